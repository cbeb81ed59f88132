"""Host RAM of one node by phase: load, rollout, train (steady state).

The node's limit is Ray's kill threshold × RAM when Ray runs (its memory monitor kills
workers above `memory_usage_threshold`, default 0.95), else the RAM itself (kernel OOM killer).
Per-rank terms are multiplied by the ranks of that model on the node. Every pinned buffer is
rounded up to a power of two, as PyTorch's CachingHostAllocator allocates it (memory/pinned.py);
freed pinned blocks stay cached, so a buffer counts from its first use on.
"""

from __future__ import annotations

import math

from ..catalog.models import ModelArch
from ..memory import constants as C
from ..memory import growth as G
from ..memory import host as H
from ..memory import params as P
from ..memory import pinned as PIN
from ..memory import states as S
from ..memory import vllm as V
from ..memory.components import Category, Component
from ..spec.run import Role, RolloutEngine, RunSpec, Strategy
from ..units import gib_to_bytes
from .memo import Memo, value_key
from . import timeline as TL
from . import vision_terms as VTR
from .roles import Group, RoleModel
from .shape import RunShape

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


MROPE_TOWERS = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl")
"""Vision-language families whose position_ids carry three rows (mrope). Source: transformers
qwen2_vl / qwen2_5_vl / qwen3_vl modeling (`get_rope_index`: position_ids [3, batch, seq])."""


def ray_step_batch(spec: RunSpec, shape: RunShape, arch: ModelArch) -> int:
    """The step's batch a Ray single controller passes between workers, as the driver's node
    holds it (`memory.host.ray_step_batch_bytes`): every sequence of every node (the driver owns
    the call's arguments and fetches every result), padded to the limits (verl/EasyR1 pad
    prompts to max_prompt_length and responses to response_length), and each prompt's images at
    the worst size the limits allow. The plan's host RAM is the driver node's.
    Assumes: OpenRLHF/ORZ's experience batches (sequences, masks, log-probs, values, rewards
    passed between Ray actors) are of the same order; read from verl/EasyR1 only."""
    sequences = shape.generation_sequences_per_gpu * TL.train_gpus_per_node(spec) * spec.hardware.num_nodes
    prompts = max(1, sequences // spec.batch.num_generations)
    v = arch.vision
    rows = 1 + (C.MROPE_EXTRA_POSITION_ROWS if v is not None and v.model_type in MROPE_TOWERS else 0)
    pixels = 0
    if VTR.has_images(spec, arch):
        assert v is not None
        per_image = G.pixel_value_bytes_per_image(VTR.patches_per_image(spec, arch), v.patch_size, v.temporal_patch_size,
                                                  v.in_chans)
        pixels = spec.vision.images_per_prompt * per_image
    tokens = VTR.prompt_tokens_with_images(spec, spec.lengths.max_prompt_tokens, VTR.image_tokens_per_prompt(spec, arch))
    completion = spec.lengths.max_completion_tokens
    return H.ray_step_batch_bytes(sequences, tokens + completion, completion, rows, prompts, pixels)


def _ray(spec: RunSpec, step_batch: int) -> list[Component]:
    if not spec.ray.enabled or spec.hardware.host_ram_gib is None:
        return []
    ram = gib_to_bytes(spec.hardware.host_ram_gib)
    return [_c("ray.object_store", H.ray_object_store_bytes(ram, spec.ray.object_store_fraction, step_batch))]


def _state_buffers(spec: RunSpec, m: RoleModel) -> list[int]:
    """Bytes per element of each flat optimizer buffer a CPU optimizer keeps: fp32 master
    (mixed precision), the optimizer's states, fp32 gradients (DeepSpeed CPU Adam)."""
    master = [C.FP32_BYTES] if S.master_bytes_per_param(spec.precision) else []
    states = S.optimizer_state_bytes(m.arch, spec.finetune, spec.optimizer, spec.precision, m.num_trainable)
    per_element = states // max(m.num_trainable, 1)
    return master + [per_element, C.FP32_BYTES]


def _strategy_offload(spec: RunSpec, groups: tuple[Group, ...], models: dict[Role, RoleModel]) -> list[Component]:
    """ZeRO-Offload / FSDP CPU offload of the trainable models: flat pinned buffers per rank,
    each rounded to a power of two (pinned.flat_partition_pinned_bytes; ZeRO-3 per sub-group)."""
    out, dist = [], spec.distribution
    sub_group = dist.sub_group_size if dist.strategy == Strategy.zero3 else None
    for role, m in models.items():
        if not m.trainable:
            continue
        ranks, p = _ranks(groups, role), role.value
        elements = math.ceil(m.num_trainable / m.num_shards)
        if dist.offload_optimizer:
            per_rank = sum(PIN.flat_partition_pinned_bytes(elements, b, sub_group) for b in _state_buffers(spec, m))
            out.append(_c(f"offload.{p}.optimizer_pinned", per_rank * ranks))
        if dist.offload_params:
            per_param = m.weights_full // max(P.num_parameters(m.arch), 1) or C.BF16_BYTES
            params = PIN.flat_partition_pinned_bytes(math.ceil(P.num_parameters(m.arch) / m.num_shards), per_param, sub_group)
            out.append(_c(f"offload.{p}.params_pinned", params * ranks))
    return out


def _reference_offload(spec: RunSpec, groups: tuple[Group, ...], models: dict[Role, RoleModel]) -> list[Component]:
    """The reference's parameters kept in pinned host memory per rank (FSDP CPUOffload per unit,
    ZeRO-3 per shard: `_moved_weights_bytes`) for the whole run."""
    m = models.get(Role.reference)
    if m is None or not spec.distribution.offload_reference_params:
        return []
    return [_c("offload.reference.params_pinned", _moved_weights_bytes(spec, m) * _ranks(groups, Role.reference))]


def _sleep_copies(spec: RunSpec, groups: tuple[Group, ...], models: dict[Role, RoleModel]) -> list[Component]:
    """Level-1 sleep: every vLLM worker's weight segments backed up in pinned host memory,
    each rounded to a power of two (pinned.vllm_sleep_backup_bytes); the blocks stay cached
    after wake-up."""
    ro = spec.rollout
    if ro.engine != RolloutEngine.vllm_colocate or ro.sleep_level != 1:
        return []
    per_worker = PIN.vllm_sleep_backup_bytes(models[Role.actor].arch, ro.tensor_parallel_size)
    return [_c("vllm.sleep_weights_pinned", per_worker * _ranks(groups, Role.vllm))]


def _moved_weights_bytes(spec: RunSpec, m: RoleModel) -> int:
    """One rank's pinned bytes for its weights moved to CPU: FSDP flat-parameter shards per unit
    (verl `offload_fsdp_model`), or each parameter / ZeRO-3 shard (ms-swift)."""
    arch = m.arch
    per_param = max(m.weights_full // max(P.num_parameters(arch), 1), 1)
    if spec.distribution.strategy == Strategy.fsdp:
        return PIN.fsdp_offload_pinned_bytes(arch, m.num_shards, per_param)
    sharded = S.SHARDING[spec.distribution.strategy].weights
    tensors = [(t.numel, t.count) for t in P.model_tensors(arch)]
    return H.per_tensor_offload_pinned_bytes(tensors, m.num_shards, sharded, per_param)


def _moved_states_bytes(spec: RunSpec, m: RoleModel, with_master: bool) -> int:
    """One rank's pinned bytes for optimizer states moved to CPU: per FSDP unit (verl
    `offload_fsdp_optimizer`), or DeepSpeed's flat partition per state (ms-swift)."""
    if spec.distribution.strategy == Strategy.fsdp:
        return PIN.fsdp_optimizer_offload_pinned_bytes(m.arch, m.num_shards)
    elements = math.ceil(m.num_trainable / m.num_shards)
    buffers = _state_buffers(spec, m)[:-1]
    if not with_master and S.master_bytes_per_param(spec.precision):
        buffers = buffers[1:]
    return sum(PIN.flat_partition_pinned_bytes(elements, b) for b in buffers)


def _moved_to_cpu(spec: RunSpec, groups: tuple[Group, ...], models: dict[Role, RoleModel], phase: str) -> list[Component]:
    """GPU-resident states moved to CPU (pinned): ms-swift's and EasyR1's rollout offload
    (actor and reference weights, the actor's optimizer states) in rollout, or every idle
    model with offload_idle_models."""
    ro, out = spec.rollout, []
    for role, m in models.items():
        ranks, p = _ranks(groups, role), role.value
        idle = spec.placement.offload_idle_models and not (phase == "train" and role == Role.actor)
        swift = phase == "rollout" and ro.sleep_level > 0
        weights = idle or (swift and ro.offload_model and role in (Role.actor, Role.reference))
        states = m.trainable and (idle or (swift and ro.offload_optimizer and role == Role.actor))
        if weights and m.weights:
            out.append(_c(f"moved_to_cpu.{p}.weights", _moved_weights_bytes(spec, m) * ranks))
        if states and m.optimizer_states:
            out.append(_c(f"moved_to_cpu.{p}.optimizer_states", _moved_states_bytes(spec, m, idle) * ranks))
    return out


def _loading(spec: RunSpec, groups: tuple[Group, ...], models: dict[Role, RoleModel]) -> list[Component]:
    """Checkpoint loading in host RAM: every process (or only local rank 0 with rank0_init)
    materialises its model, a ZeRO-3 rank one checkpoint file at a time."""
    sharded_init = spec.distribution.strategy == Strategy.zero3
    out = []
    for role, m in models.items():
        per_proc = H.model_loading_bytes_per_process(m.weights_full, sharded_init, C.HF_CHECKPOINT_SHARD_BYTES)
        loaders = 1 if spec.distribution.rank0_init else _ranks(groups, role)
        out.append(_c(f"model_loading.{role.value}", per_proc * loaders))
    return out


_HOST_PHASES = Memo()


def host_phases(spec: RunSpec, groups: tuple[Group, ...], models: dict[Role, RoleModel], budget: V.EngineBudget,
                step_batch: int = 0) -> list[Phase]:
    """Host RAM of the node in load, rollout and train (computed once per distinct input: the
    spec fields read here, the groups, the models and the step's batch bytes; `planner.memo`)."""
    ro = spec.rollout
    key = (
        step_batch, groups, tuple(models.items()), value_key(spec.distribution), value_key(spec.precision),
        value_key(spec.finetune), value_key(spec.optimizer), value_key(spec.ray), value_key(spec.hardware.host_ram_gib),
        value_key(spec.placement.offload_idle_models), value_key(ro.engine), value_key(ro.sleep_level),
        value_key(ro.tensor_parallel_size), value_key(ro.offload_model), value_key(ro.offload_optimizer),
    )
    return list(_HOST_PHASES.get(key, lambda: tuple(_host_phases(spec, groups, models, step_batch))))


def _host_phases(spec: RunSpec, groups: tuple[Group, ...], models: dict[Role, RoleModel], step_batch: int) -> list[Phase]:
    offloaded = _strategy_offload(spec, groups, models) + _reference_offload(spec, groups, models)
    pinned = offloaded + _sleep_copies(spec, groups, models) + _ray(spec, step_batch)
    phases = [
        ("load", _loading(spec, groups, models) + offloaded),
        ("rollout", pinned + _moved_to_cpu(spec, groups, models, "rollout")),
        ("train", pinned + _moved_to_cpu(spec, groups, models, "train")),
    ]
    return [(name, tuple(c for c in comps if c.num_bytes > 0)) for name, comps in phases]
