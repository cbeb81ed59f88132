"""What ZeRO-3 / FSDP sharding adds on one GPU beyond the shards themselves: the gathered
units of a forward, ZeRO-3's persistent small tensors, DeepSpeed's reduce buckets and the fp32
gradient partition of the optimizer step (`roles.trainable_model` / `frozen_model` use them),
with DeepSpeed's "auto" sizes. Split from `roles`."""

from __future__ import annotations

from ..catalog.models import ModelArch
from ..memory import constants as C
from ..memory import params as P
from ..memory import states as S
from ..spec.run import RunSpec, Strategy


def deepspeed_value(value: int | str, arch: ModelArch, auto_per_hidden: tuple[int, float]) -> int:
    """A DeepSpeed size given as a number or "auto": HF fills "auto" from the hidden size h
    as coefficient · h^power (reduce_bucket_size h², stage3_prefetch_bucket_size 0.9h²,
    stage3_param_persistence_threshold 10h). Source: transformers integrations/deepspeed.py
    (`HfTrainerDeepSpeedConfig.trainer_config_finalize`)."""
    if value != "auto":
        return int(value)
    power, coefficient = auto_per_hidden
    return int(coefficient * arch.hidden_size**power)


AUTO_REDUCE_BUCKET = (2, 1.0)
AUTO_PREFETCH_BUCKET = (2, 0.9)
AUTO_PERSISTENCE_THRESHOLD = (1, 10.0)


def _gathered(spec: RunSpec, arch: ModelArch, sharded: bool) -> int:
    """Unsharded 16-bit parameters alive in a forward under ZeRO-3/FSDP.

    ZeRO-3: the module being computed plus the prefetch bucket, capped by
    stage3_max_live_parameters, and at least the largest single module. Source: DeepSpeed
    runtime/zero/config.py; `estimate_zero3_model_states_mem_needs` (largest_layer term).
    FSDP: the current and the prefetched unit (BACKWARD_PRE). Source: PyTorch FSDP docs.
    """
    if not sharded:
        return 0
    dist = spec.distribution
    layer = P.num_decoder_layer_parameters(arch) // arch.num_layers
    largest = P.num_largest_module_parameters(arch)
    if dist.strategy == Strategy.fsdp:
        return 2 * max(layer, largest) * C.BF16_BYTES
    prefetch = deepspeed_value(dist.stage3_prefetch_bucket_size, arch, AUTO_PREFETCH_BUCKET)
    live = max(largest, layer + prefetch)
    return min(live, dist.stage3_max_live_parameters) * C.BF16_BYTES


def _persistent(spec: RunSpec, arch: ModelArch, n: int) -> int:
    """ZeRO-3 keeps tensors up to stage3_param_persistence_threshold whole on every rank:
    the (N−1)/N beyond the shard. Source: DeepSpeed partition_parameters.py (`ds_persist`)."""
    if spec.distribution.strategy != Strategy.zero3:
        return 0
    threshold = deepspeed_value(spec.distribution.stage3_param_persistence_threshold, arch, AUTO_PERSISTENCE_THRESHOLD)
    small = P.num_small_parameters(arch, threshold)
    return small * C.BF16_BYTES * (n - 1) // n


def _reduce_bucket(spec: RunSpec, arch: ModelArch) -> int:
    """DeepSpeed's gradient reduce buffer(s), at full size whatever the model.

    ZeRO-1/2 allocate `reduce_bucket_size` 16-bit elements in backward, two buffers with
    overlap_comm, and release them after (stage_1_and_2.py `ipg_buffer`,
    `_release_ipg_buffers`). ZeRO-3 allocates one buffer at init (stage3.py). The parameter
    all-gather after the step works in place (runtime/utils.py `all_gather_dp_groups`).
    DDP and FSDP buckets are views of the gradients, so nothing extra.
    """
    dist = spec.distribution
    if dist.strategy in (Strategy.ddp, Strategy.fsdp):
        return 0
    size = deepspeed_value(dist.reduce_bucket_size, arch, AUTO_REDUCE_BUCKET) * C.BF16_BYTES
    if dist.strategy == Strategy.zero3:
        return size
    return size * (2 if dist.overlap_comm else 1)


def _fp32_grads(spec: RunSpec, num_trainable: int, n: int) -> int:
    """fp32 gradient partition of the optimizer step (states.fp32_grad_partition_bytes); ZeRO-3
    builds it one sub-group at a time (stage3.py `_prepare_fp32_grad_for_sub_group`). None
    on the GPU with optimizer offload (CPU Adam), under DDP (no ZeRO optimizer) or FSDP: torch
    AdamW steps on the sharded FlatParameter and its `.grad`, which FSDP casts to the
    parameter's own dtype after the reduce-scatter (fp32 under mixed precision: that is
    `grads`; torch/distributed/fsdp/_runtime_utils.py `_post_reduce_grad_callback` →
    `_cast_grad_to_param_dtype`), so no second fp32 copy exists."""
    dist = spec.distribution
    if dist.offload_optimizer or dist.strategy in (Strategy.ddp, Strategy.fsdp) or S.master_bytes_per_param(spec.precision) == 0:
        return 0
    partition = S.sharded_bytes(num_trainable * C.FP32_BYTES, True, n)
    if dist.strategy == Strategy.zero3:
        return min(partition, dist.sub_group_size * C.FP32_BYTES)
    return partition
