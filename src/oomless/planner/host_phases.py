"""Host RAM of one node by phase: load, rollout, train (steady state).

The node's limit is Ray's kill threshold × RAM when Ray runs (its memory monitor kills
workers above `memory_usage_threshold`, default 0.95), else the RAM itself (kernel OOM killer).
"""

from __future__ import annotations

from ..catalog.models import ModelArch
from ..memory import constants as C
from ..memory import host as H
from ..memory import states as S
from ..memory import vllm as V
from ..memory.components import Category, Component
from ..spec.run import RolloutEngine, RunSpec, Strategy
from ..units import gib_to_bytes
from .gpu_phases import Phase, TrainerState
from .shape import RunShape


def host_limit_bytes(spec: RunSpec) -> int | None:
    if spec.hardware.host_ram_gib is None:
        return None
    ram = gib_to_bytes(spec.hardware.host_ram_gib)
    return int(ram * spec.ray.memory_usage_threshold) if spec.ray.enabled else ram


def _c(name: str, num_bytes: int) -> Component:
    return Component(name, Category.OTHER, int(num_bytes))


def _ray(spec: RunSpec) -> list[Component]:
    if not spec.ray.enabled or spec.hardware.host_ram_gib is None:
        return []
    ram = gib_to_bytes(spec.hardware.host_ram_gib)
    return [_c("ray.object_store", H.ray_object_store_bytes(ram, spec.ray.object_store_fraction))]


def _strategy_offload(spec: RunSpec, arch: ModelArch, shape: RunShape, t: TrainerState) -> list[Component]:
    ranks, n = shape.num_train_gpus_per_node, shape.data_parallel_size
    out = []
    if spec.distribution.offload_optimizer:
        ft, prec = spec.finetune, spec.precision
        per_rank = H.offloaded_optimizer_bytes_per_rank(
            t.num_trainable, S.master_bytes_per_param(prec), S.optimizer_state_bytes(arch, ft, spec.optimizer, prec), n
        )
        out.append(_c("offload.optimizer_pinned", per_rank * ranks))
    if spec.distribution.offload_params:
        out.append(_c("offload.params_pinned", H.offloaded_param_bytes_per_rank(t.policy_weights_full, n) * ranks))
    return out


def _sleep_copies(spec: RunSpec, budget: V.EngineBudget, shape: RunShape) -> list[Component]:
    ro = spec.rollout
    if ro.engine != RolloutEngine.vllm_colocate or ro.sleep_level != 1:
        return []
    return [_c("vllm.sleep_weights_pinned", H.vllm_sleep_copy_bytes(budget.weight_bytes, shape.num_train_gpus_per_node))]


def _rollout_offload(spec: RunSpec, shape: RunShape, t: TrainerState) -> list[Component]:
    ro, ranks = spec.rollout, shape.num_train_gpus_per_node
    out = []
    if ro.offload_model:
        out.append(_c("rollout_offload.weights", (t.weights + t.reference + t.persistent) * ranks))
    if ro.offload_optimizer:
        out.append(_c("rollout_offload.optimizer_states", t.optimizer * ranks))
    return out


def _loading(spec: RunSpec, arch: ModelArch, shape: RunShape, t: TrainerState) -> list[Component]:
    sharded_init = spec.distribution.strategy == Strategy.zero3
    per_proc = H.model_loading_bytes_per_process(t.policy_weights_full, sharded_init, C.HF_CHECKPOINT_SHARD_BYTES)
    ref_full = S.reference_weight_bytes(arch, spec.finetune, spec.kl_beta)
    ref = H.model_loading_bytes_per_process(ref_full, sharded_init, C.HF_CHECKPOINT_SHARD_BYTES) if ref_full else 0
    return [_c("model_loading", (per_proc + ref) * shape.num_train_gpus_per_node)]


def host_phases(spec: RunSpec, arch: ModelArch, shape: RunShape, t: TrainerState, budget: V.EngineBudget) -> list[Phase]:
    steady = _strategy_offload(spec, arch, shape, t) + _sleep_copies(spec, budget, shape) + _ray(spec)
    phases = [
        ("load", _loading(spec, arch, shape, t) + _strategy_offload(spec, arch, shape, t) + _ray(spec)),
        ("rollout", steady + _rollout_offload(spec, shape, t)),
        ("train", steady),
    ]
    return [(name, tuple(c for c in comps if c.num_bytes > 0)) for name, comps in phases]

