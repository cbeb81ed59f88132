"""Host RAM of one node by phase: load, rollout, train (steady state).

The node's limit is Ray's kill threshold × RAM when Ray runs (its memory monitor kills
workers above `memory_usage_threshold`, default 0.95), else the RAM itself (kernel OOM killer).
Per-rank terms are multiplied by the ranks of that model on the node.
"""

from __future__ import annotations

from ..memory import constants as C
from ..memory import host as H
from ..memory import states as S
from ..memory import vllm as V
from ..memory.components import Category, Component
from ..spec.run import Role, RolloutEngine, RunSpec, Strategy
from ..units import gib_to_bytes
from .roles import Group, RoleModel

Phase = tuple[str, tuple[Component, ...]]


def host_limit_bytes(spec: RunSpec) -> int | None:
    if spec.hardware.host_ram_gib is None:
        return None
    ram = gib_to_bytes(spec.hardware.host_ram_gib)
    return int(ram * spec.ray.memory_usage_threshold) if spec.ray.enabled else ram


def _c(name: str, num_bytes: int) -> Component:
    return Component(name, Category.OTHER, int(num_bytes))


def _ranks(groups: tuple[Group, ...], role: Role) -> int:
    return sum(g.gpus_per_node for g in groups if role in g.roles)


def _ray(spec: RunSpec) -> list[Component]:
    if not spec.ray.enabled or spec.hardware.host_ram_gib is None:
        return []
    ram = gib_to_bytes(spec.hardware.host_ram_gib)
    return [_c("ray.object_store", H.ray_object_store_bytes(ram, spec.ray.object_store_fraction))]


def _strategy_offload(spec: RunSpec, groups: tuple[Group, ...], models: dict[Role, RoleModel]) -> list[Component]:
    """ZeRO-Offload / FSDP CPU offload of the trainable models, pinned, per rank."""
    out = []
    for role, m in models.items():
        ranks, p = _ranks(groups, role), role.value
        if m.trainable and spec.distribution.offload_optimizer:
            states = S.optimizer_state_bytes(m.arch, spec.finetune, spec.optimizer, spec.precision, m.num_trainable)
            per_rank = H.offloaded_optimizer_bytes_per_rank(m.num_trainable, S.master_bytes_per_param(spec.precision), states, m.num_shards)
            out.append(_c(f"offload.{p}.optimizer_pinned", per_rank * ranks))
        if m.trainable and spec.distribution.offload_params:
            out.append(_c(f"offload.{p}.params_pinned", H.offloaded_param_bytes_per_rank(m.weights_full, m.num_shards) * ranks))
    return out


def _sleep_copies(spec: RunSpec, groups: tuple[Group, ...], budget: V.EngineBudget) -> list[Component]:
    ro = spec.rollout
    if ro.engine != RolloutEngine.vllm_colocate or ro.sleep_level != 1:
        return []
    return [_c("vllm.sleep_weights_pinned", H.vllm_sleep_copy_bytes(budget.weight_bytes, _ranks(groups, Role.vllm)))]


def _moved_to_cpu(spec: RunSpec, groups: tuple[Group, ...], models: dict[Role, RoleModel], phase: str) -> list[Component]:
    """GPU-resident states moved to CPU: ms-swift's rollout offload (actor and reference
    weights, actor optimizer) in rollout, or every idle model with offload_idle_models."""
    ro, out = spec.rollout, []
    for role, m in models.items():
        ranks, p = _ranks(groups, role), role.value
        idle = spec.placement.offload_idle_models and not (phase == "train" and role == Role.actor)
        swift = phase == "rollout" and ro.sleep_level > 0
        weights = idle or (swift and ro.offload_model and role in (Role.actor, Role.reference))
        states = m.trainable and (idle or (swift and ro.offload_optimizer and role == Role.actor))
        if weights:
            out.append(_c(f"moved_to_cpu.{p}.weights", (m.weights + m.persistent) * ranks))
        if states:
            master = m.master if idle else 0
            out.append(_c(f"moved_to_cpu.{p}.optimizer_states", (m.optimizer_states + master) * ranks))
    return out


def _loading(spec: RunSpec, groups: tuple[Group, ...], models: dict[Role, RoleModel]) -> list[Component]:
    sharded_init = spec.distribution.strategy == Strategy.zero3
    out = []
    for role, m in models.items():
        per_proc = H.model_loading_bytes_per_process(m.weights_full, sharded_init, C.HF_CHECKPOINT_SHARD_BYTES)
        out.append(_c(f"model_loading.{role.value}", per_proc * _ranks(groups, role)))
    return out


def host_phases(spec: RunSpec, groups: tuple[Group, ...], models: dict[Role, RoleModel], budget: V.EngineBudget) -> list[Phase]:
    pinned = _strategy_offload(spec, groups, models) + _sleep_copies(spec, groups, budget) + _ray(spec)
    phases = [
        ("load", _loading(spec, groups, models) + _strategy_offload(spec, groups, models) + _ray(spec)),
        ("rollout", pinned + _moved_to_cpu(spec, groups, models, "rollout")),
        ("train", pinned + _moved_to_cpu(spec, groups, models, "train")),
    ]
    return [(name, tuple(c for c in comps if c.num_bytes > 0)) for name, comps in phases]
