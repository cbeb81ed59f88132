"""`make_plan`: the per-phase, per-device memory plan of a run and its verdict.

A plan is a set of constraints, each with a requirement and what is available: every phase's
peak on one GPU of every placement group against its capacity, the host's peak against its
limit, and vLLM's own start-up checks (free memory ≥ utilization × total; KV cache holds at
least one max-length sequence). The constraints are those of the worst batch the limits allow;
the binding constraint is the first broken one in time, or the one with the smallest margin.

Verdict (`Plan.verdict`): `fits` (the worst batch fits), `fits_typical` (a typical batch fits,
the worst does not: `Plan.typical`, with the chance per step in `Plan.risk`), or
`does_not_fit`. `Plan.fits` answers "will this run, as configured, finish its steps?": true
when the worst batch fits, or when it does not but the chance that the run meets such a batch
over `schedule.max_steps` is below `risk.ACCEPTED_RUN_FAILURE_PROBABILITY`.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

from ..catalog.gpus import GpuSpec
from ..catalog.models import ModelArch
from ..memory import constants as C
from ..memory import vllm as V
from ..memory.components import Component, total_bytes
from ..spec.run import Role, RolloutEngine, RunSpec
from ..units import gib_to_bytes
from .defaults import resolve_defaults
from .engine import engine_budget
from .batches import DataLengths
from .gpu_phases import GroupPlanner
from .host_phases import host_limit_bytes, host_phases, ray_step_batch
from .risk import BatchRisk, batch_risk, typical_lengths
from .roles import Group, RoleModel, placement_groups, role_models
from .shape import RunShape, limit_lengths, run_shape
from .timeline import Timeline, host_timeline

PHASE_ORDER = ("load", "rollout", "logprob", "critic_train", "train", "optimizer", "weight_sync")
"""Phases of one step in time order (load happens once, before the first step)."""


def _phase_rank(phase: str) -> int:
    """Position in a step; the timeline's "steps" constraint comes after every phase."""
    return PHASE_ORDER.index(phase) if phase in PHASE_ORDER else len(PHASE_ORDER)


@dataclass(frozen=True)
class PhaseMemory:
    name: str
    components: tuple[Component, ...]

    @functools.cached_property
    def peak_bytes(self) -> int:
        """Computed once (components are frozen): constraints, verdicts and reports ask often."""
        return total_bytes(self.components)

    def largest(self) -> Component | None:
        return self._largest

    @functools.cached_property
    def _largest(self) -> Component | None:
        return max(self.components, key=_num_bytes, default=None)


def _num_bytes(c: Component) -> int:
    return c.num_bytes


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
    first_step: int = 1
    """The step in which it first applies: 2 for a phase that breaks only once optimizer states
    created by step 1's optimizer phase are resident (`RoleModel.states_at_first_step`)."""
    kind: str = "phase_peak"
    """What is compared, for the verdict's wording (`planner.verdict`): `phase_peak` (a phase's
    total on one GPU against its capacity; ``component`` is only its largest part),
    `vllm_startup` (free memory at engine start against utilization × total), `vllm_kv` (KV
    cache against one max_model_len sequence), `host_peak`, `host_steps` (host RAM over steps)."""

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
    typical: Plan | None = None
    """The same run on a typical batch, when it differs from the worst one."""
    risk: BatchRisk | None = None
    """The chance of a batch that does not fit, when the worst does not and a typical one does."""
    timeline: Timeline | None = None
    """Host RAM over the run's steps: growth terms and checkpoint saves (`planner.timeline`)."""
    longest_fitting_prompt_tokens: int | None = None
    """When the worst batch does not fit: the longest prompt with which it would (`longest_fitting_prompt`)."""
    notes: tuple[str, ...] = ()
    """Defaults the planner chose for fields the spec left unset (`planner.defaults`); ``spec`` has them set."""

    @property
    def worst_fits(self) -> bool:
        """Every constraint holds for the worst batch the limits allow."""
        return all(c.ok for c in self.constraints)

    @property
    def verdict(self) -> str:
        if self.worst_fits:
            return "fits"
        if self.typical is not None and self.typical.worst_fits:
            return "fits_typical"
        return "does_not_fit"

    @property
    def fits(self) -> bool:
        """Will the run finish its steps: the worst batch fits, or it does not but the run meets
        it with a chance below the accepted one (`risk.BatchRisk.accepted`)."""
        if self.worst_fits:
            return True
        return self.verdict == "fits_typical" and self.risk is not None and self.risk.accepted

    @property
    def binding(self) -> Constraint:
        """When something breaks, the first broken constraint in time (the run crashes
        there; within a phase, vLLM's start-up checks come before the phase peak), else the
        one with the smallest margin."""
        broken = self.violations
        if broken:
            order = {id(c): i for i, c in enumerate(self.constraints)}
            return min(broken, key=lambda c: (c.first_step, _phase_rank(c.phase), order[id(c)]))
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


def _first_step(phase: PhaseMemory, capacity: int, lazy_states: tuple[str, ...]) -> int:
    """Step 1's phases before its optimizer phase lack optimizer states created lazily; a phase
    that breaks only with them first breaks in step 2."""
    if phase.name in ("load", "optimizer", "weight_sync") or not lazy_states:
        return 1
    lazy = sum(c.num_bytes for c in phase.components if c.name in lazy_states)
    return 2 if lazy and phase.peak_bytes - lazy <= capacity else 1


_PHASE_MEMORIES: dict[tuple[str, int], PhaseMemory] = {}
_GROUP_CONSTRAINTS: dict[tuple[object, ...], tuple[tuple[PhaseMemory, ...], tuple[Constraint, ...]]] = {}
MAX_SHARED = 1 << 14
"""Entries each table below keeps before it starts over."""


def _phase_memory(name: str, components: tuple[Component, ...]) -> PhaseMemory:
    """The phase (frozen, so one object, with its peak and largest part worked out once, serves
    every plan whose phase has these very components: `gpu_phases` and `host_phases` hand
    the same tuples to plans with the same inputs). The entry holds the components, so the
    id in its key cannot be another object's while it lives."""
    key = (name, id(components))
    phase = _PHASE_MEMORIES.get(key)
    if phase is None:
        if len(_PHASE_MEMORIES) >= MAX_SHARED:
            _PHASE_MEMORIES.clear()
        phase = _PHASE_MEMORIES[key] = PhaseMemory(name, components)
    return phase


def _phase_constraints(group: DeviceGroup, lazy_states: tuple[str, ...] = ()) -> list[Constraint]:
    """One constraint per phase of ``group`` (computed once per group role, capacity, lazy
    states and phase objects; the entry holds the phases, so their ids stay theirs)."""
    key = (group.role, group.capacity_bytes, lazy_states, tuple(map(id, group.phases)))
    hit = _GROUP_CONSTRAINTS.get(key)
    if hit is None:
        if len(_GROUP_CONSTRAINTS) >= MAX_SHARED:
            _GROUP_CONSTRAINTS.clear()
        hit = _GROUP_CONSTRAINTS[key] = (group.phases, tuple(_build_phase_constraints(group, lazy_states)))
    return list(hit[1])


def _build_phase_constraints(group: DeviceGroup, lazy_states: tuple[str, ...]) -> list[Constraint]:
    out = []
    for phase in group.phases:
        top = phase.largest()
        out.append(Constraint(
            phase=phase.name, device="gpu", device_role=group.role,
            component=top.name if top else "", required_bytes=phase.peak_bytes,
            available_bytes=group.capacity_bytes, message=f"{phase.name} peak on a {group.role} GPU",
            first_step=_first_step(phase, group.capacity_bytes, lazy_states),
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
            message="vLLM start-up: free memory must cover gpu_memory_utilization × total", kind="vllm_startup",
        ),
        Constraint(
            phase="load", device="gpu", device_role=role, component="vllm.kv_cache",
            required_bytes=one_seq, available_bytes=budget.kv_cache_bytes,
            message=f"vLLM KV cache must hold one max_model_len={shape.vllm_max_model_len} sequence", kind="vllm_kv",
        ),
    ]


def make_plan(spec: RunSpec, arch: ModelArch, gpu: GpuSpec | None, archs: dict[Role, ModelArch] | None = None,
              explain: bool = False) -> Plan:
    """Pure: the same inputs always give the same plan. ``archs`` gives the critic's and the
    reward model's architectures when they differ from the actor's.

    The plan is the worst batch the limits allow; when the run's typical batch differs (typical
    lengths, percentiles, a token budget's balanced parts) its plan comes beside it, and when
    only the typical one fits, the chance of the worst (`risk.batch_risk`). ``explain`` adds,
    when the worst batch does not fit, the longest prompt with which it would (a search of
    plans; `oomless plan` asks for it, the fit search does not). Fields the planner chooses when
    the spec leaves them unset (`planner.defaults`) are set in the plan's spec and named in
    its notes."""
    spec, notes = resolve_defaults(spec, lambda s: plan_batch(s, arch, gpu, archs),
                                   lambda s: typical_batch_plan(s, arch, gpu, archs))
    plan = _make_plan(spec, arch, gpu, archs, explain)
    return dataclasses.replace(plan, notes=notes) if notes else plan


def _make_plan(spec: RunSpec, arch: ModelArch, gpu: GpuSpec | None, archs: dict[Role, ModelArch] | None,
               explain: bool) -> Plan:
    worst = plan_batch(spec, arch, gpu, archs)
    if explain and not worst.worst_fits:
        longest = longest_fitting_prompt(spec, arch, gpu, archs)
        worst = dataclasses.replace(worst, longest_fitting_prompt_tokens=longest)
    typical = typical_batch_plan(spec, arch, gpu, archs)
    if typical is None:
        return worst
    risk = None
    if not worst.worst_fits and typical.worst_fits:
        per_step = spec.batch.micro_batch_size * spec.batch.gradient_accumulation_steps
        ranks = worst.models[Role.actor].num_shards // spec.distribution.sequence_parallel_size
        risk = batch_risk(spec, arch, per_step * max(ranks, 1), lambda x: plan_batch(spec, arch, gpu, archs, x).worst_fits)
    return dataclasses.replace(worst, typical=typical, risk=risk)


def typical_batch_plan(spec: RunSpec, arch: ModelArch, gpu: GpuSpec | None,
                       archs: dict[Role, ModelArch] | None = None) -> Plan | None:
    """The plan of a typical step's batch, or None when it is the worst batch."""
    members = 1 if spec.batch.max_tokens_per_gpu is not None else spec.batch.micro_batch_size
    lengths = typical_lengths(spec, arch, members)
    budgets = spec.batch.max_tokens_per_gpu is not None or spec.batch.logprob_token_budget is not None
    if lengths == limit_lengths(spec) and not budgets:
        return None
    return plan_batch(spec, arch, gpu, archs, lengths, worst=False)


def longest_fitting_prompt(spec: RunSpec, arch: ModelArch, gpu: GpuSpec | None,
                           archs: dict[Role, ModelArch] | None = None) -> int | None:
    """The longest prompt (text tokens; completions and images at their limits) whose worst
    batch fits, when the declared prompt limit does not: a frameworks' default limit is often
    the model's whole context, far above any dataset's prompts. None when even a one-token
    prompt does not fit, or when the prompt limit is not what breaks. Binary search: a plan's
    peaks never fall as sequences grow (tested as a property in tests/memory)."""
    limit = limit_lengths(spec)

    def fits(prompt: int) -> bool:
        return plan_batch(spec, arch, gpu, archs, dataclasses.replace(limit, prompt_tokens=prompt)).worst_fits

    if limit.prompt_tokens <= 1 or not fits(1):
        return None
    low, high = 1, limit.prompt_tokens  # fits(low), not fits(high)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if fits(mid) else (low, mid)
    return low


def plan_batch(
    spec: RunSpec, arch: ModelArch, gpu: GpuSpec | None, archs: dict[Role, ModelArch] | None = None,
    lengths: DataLengths | None = None, worst: bool = True,
) -> Plan:
    """The plan of one batch: every sequence at ``lengths`` (default: the limits), token
    budgets packed at their worst (or, ``worst`` false, at a typical step's balanced part)."""
    archs = {Role.actor: arch, Role.critic: arch, Role.reward: arch, **(archs or {})}
    shape = run_shape(spec, arch, gpu, lengths, worst)
    groups = placement_groups(spec)
    models = role_models(spec, archs, groups)
    budget = engine_budget(spec, arch, shape)
    devices, constraints = [], []
    for group, role in zip(groups, device_role_names(groups)):
        planner = GroupPlanner(spec, shape, group, models, budget)
        phases = tuple(_phase_memory(n, c) for n, c in planner.phases())
        devices.append(DeviceGroup(role, group.roles, group.gpus_per_node, shape.capacity_bytes, phases))
        if Role.vllm in group.roles:
            constraints += _engine_constraints(planner, role, arch, shape, budget)
    lazy = tuple(f"{p}.optimizer_states" for r, p in (("actor", "policy"), ("critic", "critic"))
                 if Role(r) in models and models[Role(r)].states_at_first_step)
    for device in devices:
        constraints += _phase_constraints(device, lazy)
    host_ram = None if spec.hardware.host_ram_gib is None else gib_to_bytes(spec.hardware.host_ram_gib)
    step_batch = ray_step_batch(spec, shape, arch) if spec.ray.enabled else 0
    host = HostMemory(host_ram, host_limit_bytes(spec),
                      tuple(_phase_memory(n, c) for n, c in host_phases(spec, groups, models, budget, step_batch)))
    if host.limit_bytes is not None:
        peak = host.peak_phase
        top = peak.largest()
        constraints.append(Constraint(
            phase=peak.name, device="host", device_role="node", component=top.name if top else "",
            required_bytes=peak.peak_bytes, available_bytes=host.limit_bytes,
            message="host RAM per node" + (" against Ray's kill threshold" if spec.ray.enabled else ""), kind="host_peak",
        ))
    engine = budget if spec.rollout.engine != RolloutEngine.hf else None
    plan = Plan(spec, arch, gpu, shape, models, tuple(devices), host, tuple(constraints), engine)
    timeline = host_timeline(plan)
    if timeline.crossing_step is None or timeline.limit_bytes is None:
        return dataclasses.replace(plan, timeline=timeline)
    step = timeline.crossing_step
    over = Constraint(
        phase="steps", device="host", device_role="node",
        component=timeline.growth[0].name if timeline.growth else "checkpoint_save",
        required_bytes=timeline.host_bytes_at(step), available_bytes=timeline.limit_bytes,
        message=timeline.message(), first_step=step, kind="host_steps",
    )
    return dataclasses.replace(plan, constraints=(*constraints, over), timeline=timeline)
