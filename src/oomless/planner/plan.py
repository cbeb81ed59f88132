"""`make_plan`: the per-phase, per-device memory plan of a run and its verdict.

A plan is a set of constraints, each with a requirement and what is available: every phase's
peak on one GPU of every placement group against its capacity, the host's peak against its
limit, and vLLM's own start-up checks (free memory ≥ utilization × total; KV cache holds at
least one max-length sequence). It fits when every margin is ≥ 0; the binding constraint is
the first broken one in time, or the one with the smallest margin.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..catalog.gpus import GpuSpec
from ..catalog.models import ModelArch
from ..memory import constants as C
from ..memory import vllm as V
from ..memory.components import Component, total_bytes
from ..spec.run import Role, RolloutEngine, RunSpec
from ..units import gib_to_bytes
from .engine import engine_budget
from .gpu_phases import GroupPlanner
from .host_phases import host_limit_bytes, host_phases
from .roles import Group, RoleModel, placement_groups, role_models
from .shape import RunShape, run_shape

PHASE_ORDER = ("load", "rollout", "logprob", "critic_train", "train", "optimizer", "weight_sync")
"""Phases of one step in time order (load happens once, before the first step)."""


@dataclass(frozen=True)
class PhaseMemory:
    name: str
    components: tuple[Component, ...]

    @property
    def peak_bytes(self) -> int:
        return total_bytes(self.components)

    def largest(self) -> Component | None:
        return max(self.components, key=lambda c: c.num_bytes, default=None)


@dataclass(frozen=True)
class DeviceGroup:
    """GPUs of one placement group: `train` (the actor's, with whatever shares them),
    `rollout` (vLLM alone), or the joined names of the roles it holds."""

    role: str
    roles: tuple[Role, ...]
    num_gpus_per_node: int
    capacity_bytes: int
    phases: tuple[PhaseMemory, ...]

    @property
    def peak_bytes(self) -> int:
        return max(p.peak_bytes for p in self.phases)


@dataclass(frozen=True)
class Constraint:
    """One thing that must hold; ``margin_bytes`` < 0 means it breaks."""

    phase: str
    device: str
    """"gpu" or "host"."""
    device_role: str
    component: str
    required_bytes: int
    available_bytes: int
    message: str

    @property
    def margin_bytes(self) -> int:
        return self.available_bytes - self.required_bytes

    @property
    def ok(self) -> bool:
        return self.margin_bytes >= 0


@dataclass(frozen=True)
class HostMemory:
    capacity_bytes: int | None
    limit_bytes: int | None
    phases: tuple[PhaseMemory, ...]

    @property
    def peak_phase(self) -> PhaseMemory:
        return max(self.phases, key=lambda p: p.peak_bytes)


@dataclass(frozen=True)
class Plan:
    spec: RunSpec
    arch: ModelArch
    gpu: GpuSpec | None
    shape: RunShape
    models: dict[Role, RoleModel]
    devices: tuple[DeviceGroup, ...]
    host: HostMemory
    constraints: tuple[Constraint, ...]
    engine: V.EngineBudget | None

    @property
    def fits(self) -> bool:
        return all(c.ok for c in self.constraints)

    @property
    def binding(self) -> Constraint:
        """When something breaks, the first broken constraint in time (the run crashes
        there; within a phase, vLLM's start-up checks come before the phase peak), else the
        one with the smallest margin."""
        broken = self.violations
        if broken:
            order = {id(c): i for i, c in enumerate(self.constraints)}
            return min(broken, key=lambda c: (PHASE_ORDER.index(c.phase), order[id(c)]))
        return min(self.constraints, key=lambda c: c.margin_bytes)

    @property
    def violations(self) -> tuple[Constraint, ...]:
        return tuple(c for c in self.constraints if not c.ok)


def device_role_names(groups: tuple[Group, ...]) -> list[str]:
    """`train` for the first group holding the actor, `rollout` for a vLLM-only group, else
    the joined names of the roles a group holds."""
    names, train_taken = [], False
    for g in groups:
        if Role.actor in g.roles and not train_taken:
            names.append("train")
            train_taken = True
        elif g.roles == (Role.vllm,):
            names.append("rollout")
        else:
            names.append(g.name)
    return names


def _phase_constraints(group: DeviceGroup) -> list[Constraint]:
    out = []
    for phase in group.phases:
        top = phase.largest()
        out.append(Constraint(
            phase=phase.name, device="gpu", device_role=group.role,
            component=top.name if top else "", required_bytes=phase.peak_bytes,
            available_bytes=group.capacity_bytes, message=f"{phase.name} peak on a {group.role} GPU",
        ))
    return out


def _engine_constraints(planner: GroupPlanner, role: str, arch: ModelArch, shape: RunShape, budget: V.EngineBudget) -> list[Constraint]:
    """vLLM start-up: free memory at engine start ≥ requested; KV ≥ one max_model_len sequence."""
    tp = planner.spec.rollout.tensor_parallel_size
    resident = planner.engine_start_resident_bytes() if planner.models else C.CUDA_CONTEXT_BYTES
    one_seq = V.kv_bytes_for_sequence(arch, tp, shape.vllm_max_model_len)
    return [
        Constraint(
            phase="load", device="gpu", device_role=role, component="vllm.gpu_memory_utilization",
            required_bytes=budget.requested_bytes, available_bytes=shape.capacity_bytes - resident,
            message="vLLM start-up: free memory must cover gpu_memory_utilization × total",
        ),
        Constraint(
            phase="load", device="gpu", device_role=role, component="vllm.kv_cache",
            required_bytes=one_seq, available_bytes=budget.kv_cache_bytes,
            message=f"vLLM KV cache must hold one max_model_len={shape.vllm_max_model_len} sequence",
        ),
    ]


def make_plan(spec: RunSpec, arch: ModelArch, gpu: GpuSpec | None, archs: dict[Role, ModelArch] | None = None) -> Plan:
    """Pure: the same inputs always give the same plan. ``archs`` gives the critic's and the
    reward model's architectures when they differ from the actor's."""
    archs = {Role.actor: arch, Role.critic: arch, Role.reward: arch, **(archs or {})}
    shape = run_shape(spec, arch, gpu)
    groups = placement_groups(spec)
    models = role_models(spec, archs, groups)
    budget = engine_budget(spec, arch, shape)
    devices, constraints = [], []
    for group, role in zip(groups, device_role_names(groups)):
        planner = GroupPlanner(spec, shape, group, models, budget)
        phases = tuple(PhaseMemory(n, c) for n, c in planner.phases())
        devices.append(DeviceGroup(role, group.roles, group.gpus_per_node, shape.capacity_bytes, phases))
        if Role.vllm in group.roles:
            constraints += _engine_constraints(planner, role, arch, shape, budget)
    for device in devices:
        constraints += _phase_constraints(device)
    host_ram = None if spec.hardware.host_ram_gib is None else gib_to_bytes(spec.hardware.host_ram_gib)
    host = HostMemory(host_ram, host_limit_bytes(spec), tuple(PhaseMemory(n, c) for n, c in host_phases(spec, groups, models, budget)))
    if host.limit_bytes is not None:
        peak = host.peak_phase
        top = peak.largest()
        constraints.append(Constraint(
            phase=peak.name, device="host", device_role="node", component=top.name if top else "",
            required_bytes=peak.peak_bytes, available_bytes=host.limit_bytes,
            message="host RAM per node" + (" against Ray's kill threshold" if spec.ray.enabled else ""),
        ))
    engine = budget if spec.rollout.engine != RolloutEngine.hf else None
    return Plan(spec, arch, gpu, shape, models, tuple(devices), host, tuple(constraints), engine)
