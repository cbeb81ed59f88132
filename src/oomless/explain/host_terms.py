"""Formulas of host RAM per node (`planner.host_phases`): per-rank pinned buffers × the ranks
of that model on the node, checkpoint loading, Ray's object store."""

from __future__ import annotations

import math

from ..memory import constants as C
from ..memory import host as H
from ..memory import pinned as PIN
from ..memory import params as P
from ..planner import host_phases as HP
from ..spec.run import Role, Strategy
from ..units import gib_to_bytes
from .context import HOST_ROLE, Ctx
from .formula import Formula, Input, code_ref, constant, doc_source, fn_input
from .registry import host

ROLES = "(actor|reference|critic|reward)"


def _ranks(ctx: Ctx, role: Role) -> Input:
    return Input("ranks", HP._ranks(ctx.groups, role), f"{role.value} ranks on the node")


def _per_rank_times_ranks(ctx: Ctx, role: Role, per_rank: Input, source: str, code: str) -> Formula:
    return Formula("per_rank * ranks", (per_rank, _ranks(ctx, role)), source, code)


@host(r"ray\.object_store")
def ray_object_store(ctx: Ctx, name: str) -> Formula:
    ram = gib_to_bytes(ctx.spec.hardware.host_ram_gib)
    batch = HP.ray_step_batch(ctx.spec, ctx.shape, ctx.plan.arch)
    return Formula("min(RAY_LIVE_BATCH_COPIES * step_batch, min(floor(ram * fraction), RAY_OBJECT_STORE_CAP_BYTES))", (
        constant(C, "RAY_LIVE_BATCH_COPIES"),
        fn_input("step_batch", batch, H.ray_step_batch_bytes, "the step's batch a single controller passes between workers"),
        Input("ram", ram, "host RAM per node (hardware.host_ram_gib)"), Input("fraction", ctx.spec.ray.object_store_fraction, "ray.object_store_fraction"),
        constant(C, "RAY_OBJECT_STORE_CAP_BYTES"),
    ), doc_source(H.ray_object_store_bytes), code_ref(H.ray_object_store_bytes))


@host(rf"offload\.{ROLES}\.optimizer_pinned")
def optimizer_pinned(ctx: Ctx, name: str) -> Formula:
    role = HOST_ROLE[name.split(".")[1]]
    m, spec = ctx.model(role), ctx.spec
    sub_group = spec.distribution.sub_group_size if spec.distribution.strategy == Strategy.zero3 else None
    elements = math.ceil(m.num_trainable / m.num_shards)
    buffers = HP._state_buffers(spec, m)
    per = sum(PIN.flat_partition_pinned_bytes(elements, b, sub_group) for b in buffers)
    per_rank = fn_input("per_rank", per, PIN.flat_partition_pinned_bytes,
                        f"one rank's flat CPU buffers of {elements:,} elements at {', '.join(map(str, buffers))} bytes each "
                        "(fp32 master, optimizer states, fp32 gradients), each rounded up to a power of two")
    return _per_rank_times_ranks(ctx, role, per_rank, doc_source(PIN.flat_partition_pinned_bytes), code_ref(HP._strategy_offload))


@host(rf"offload\.{ROLES}\.params_pinned")
def params_pinned(ctx: Ctx, name: str) -> Formula:
    role = HOST_ROLE[name.split(".")[1]]
    m, spec = ctx.model(role), ctx.spec
    if role == Role.reference:  # `_reference_offload`; trainable models: `_strategy_offload`
        per = fn_input("per_rank", HP._moved_weights_bytes(spec, m), HP._moved_weights_bytes)
        source = f"{doc_source(HP._reference_offload) or 'verl fsdp_workers.py (reference CPUOffload)'}; {per.source}"
        return _per_rank_times_ranks(ctx, role, per, source, code_ref(HP._reference_offload))
    sub_group = spec.distribution.sub_group_size if spec.distribution.strategy == Strategy.zero3 else None
    per_param = m.weights_full // max(P.num_parameters(m.arch), 1) or C.BF16_BYTES
    elements = math.ceil(P.num_parameters(m.arch) / m.num_shards)
    per = fn_input("per_rank", PIN.flat_partition_pinned_bytes(elements, per_param, sub_group), PIN.flat_partition_pinned_bytes,
                   f"one rank's flat pinned parameter buffer: {elements:,} elements × {per_param} B, rounded to a power of two")
    return _per_rank_times_ranks(ctx, role, per, "DeepSpeed ZeRO-Offload (offload_param); " + per.source, code_ref(HP._strategy_offload))


@host(r"vllm\.sleep_weights_pinned")
def sleep_weights(ctx: Ctx, name: str) -> Formula:
    arch = ctx.model(Role.actor).arch
    per = fn_input("per_rank", PIN.vllm_sleep_backup_bytes(arch, ctx.spec.rollout.tensor_parallel_size), PIN.vllm_sleep_backup_bytes)
    return _per_rank_times_ranks(ctx, Role.vllm, per, per.source, code_ref(HP._sleep_copies))


@host(rf"moved_to_cpu\.{ROLES}\.weights")
def moved_weights(ctx: Ctx, name: str) -> Formula:
    role = HOST_ROLE[name.split(".")[1]]
    per = fn_input("per_rank", HP._moved_weights_bytes(ctx.spec, ctx.model(role)), HP._moved_weights_bytes)
    source = "ms-swift offload_model, verl offload_fsdp_model; PyTorch CachingHostAllocator (power-of-two blocks)"
    return _per_rank_times_ranks(ctx, role, per, source, code_ref(HP._moved_to_cpu))


@host(rf"moved_to_cpu\.{ROLES}\.optimizer_states")
def moved_states(ctx: Ctx, name: str) -> Formula:
    role = HOST_ROLE[name.split(".")[1]]
    idle = ctx.spec.placement.offload_idle_models and not (ctx.phase == "train" and role == Role.actor)
    per = fn_input("per_rank", HP._moved_states_bytes(ctx.spec, ctx.model(role), idle), HP._moved_states_bytes)
    source = "ms-swift offload_optimizer, verl offload_fsdp_optimizer; DeepSpeed flat partitions; PyTorch CachingHostAllocator"
    return _per_rank_times_ranks(ctx, role, per, source, code_ref(HP._moved_to_cpu))


@host(rf"model_loading\.{ROLES}")
def model_loading(ctx: Ctx, name: str) -> Formula:
    role = HOST_ROLE[name.split(".")[1]]
    m, spec = ctx.model(role), ctx.spec
    loaders = Input("loaders", 1 if spec.distribution.rank0_init else HP._ranks(ctx.groups, role),
                    "processes that load the checkpoint: 1 with rank0_init, else every rank of the model on the node")
    weights = Input("W", m.weights_full, "the model's unsharded weights")
    if spec.distribution.strategy == Strategy.zero3:
        return Formula("min(W, HF_CHECKPOINT_SHARD_BYTES) * loaders", (weights, constant(C, "HF_CHECKPOINT_SHARD_BYTES"), loaders),
                       doc_source(H.model_loading_bytes_per_process), code_ref(H.model_loading_bytes_per_process))
    return Formula("W * loaders", (weights, loaders), doc_source(H.model_loading_bytes_per_process), code_ref(H.model_loading_bytes_per_process))
