"""Host (CPU) RAM terms of a node: pinned offload, vLLM sleep copies, model loading, Ray.

Every term is bytes per node. Ranks per node multiply per-rank terms.
"""

from __future__ import annotations

import math

from . import constants as C
from .pinned import pinned_allocation_bytes


def model_loading_bytes_per_process(weight_bytes_full: int, sharded_init: bool, max_shard_file_bytes: int) -> int:
    """Host RAM a training process needs while from_pretrained loads the checkpoint.

    Without sharded init every rank materialises the full 16-bit model on CPU before it is
    moved to the GPU; with ZeRO-3 zero.Init a rank streams one checkpoint file at a time
    (transformers `max_shard_size` default "5GB"). Source: transformers
    modeling_utils.py (`_load_pretrained_model`), DeepSpeed zero.Init docs."""
    return min(weight_bytes_full, max_shard_file_bytes) if sharded_init else weight_bytes_full


def ray_object_store_cap_bytes(host_ram_bytes: int, fraction: float) -> int:
    """Ray's default object store size: min(fraction × RAM, 200 GB).
    Source: ray/_private/ray_constants.py (DEFAULT_OBJECT_STORE_MEMORY_PROPORTION 0.3,
    DEFAULT_OBJECT_STORE_MAX_MEMORY_BYTES)."""
    return min(int(host_ram_bytes * fraction), C.RAY_OBJECT_STORE_CAP_BYTES)


def ray_step_batch_bytes(sequences: int, sequence_tokens: int, response_tokens: int, position_rows: int,
                         prompts: int, pixel_bytes_per_prompt: int) -> int:
    """One step's batch as a single controller passes it between workers: per sequence its
    token tensors (`DATAPROTO_*_BYTES_PER_TOKEN`, `position_rows` position rows), per prompt its
    images' fp32 `pixel_values` once (the n copies of a prompt share one dict, which pickle
    writes once). Source: the constants' (verl/EasyR1 ray_trainer.py)."""
    per_sequence = (sequence_tokens * (C.DATAPROTO_SEQUENCE_BYTES_PER_TOKEN + (position_rows - 1) * C.INT64_BYTES)
                    + response_tokens * C.DATAPROTO_RESPONSE_BYTES_PER_TOKEN)
    return sequences * per_sequence + prompts * pixel_bytes_per_prompt


def ray_object_store_bytes(host_ram_bytes: int, fraction: float, step_batch_bytes: int) -> int:
    """The object store's resident pages: what the step's calls hold at once
    (`RAY_LIVE_BATCH_COPIES` × the step's batch), at most the store's size. The store is a tmpfs
    file mapped without MAP_POPULATE (`preallocate_plasma_memory` false by default), so a page
    counts toward node memory once an object is written to it, and freed chunks are reused, not
    returned. Source: ray src/ray/common/ray_config_def.h (`preallocate_plasma_memory`),
    src/ray/object_manager/plasma/plasma_allocator / dlmalloc (`mmap` MAP_SHARED)."""
    return min(C.RAY_LIVE_BATCH_COPIES * step_batch_bytes, ray_object_store_cap_bytes(host_ram_bytes, fraction))


def per_tensor_offload_pinned_bytes(tensor_numels: list[tuple[int, int]], num_shards: int, sharded: bool, bytes_per_param: int) -> int:
    """One rank's pinned bytes when each parameter (or its ZeRO-3 shard) is moved to CPU with
    `.to("cpu", non_blocking=True)`, one allocation per tensor, each rounded to a power of two
    by PyTorch's CachingHostAllocator. ``tensor_numels`` is (numel, count) pairs.
    Source: ms-swift `offload_model` (per-parameter moves), aten `_to_copy` (pinned output for
    non-blocking device-to-host copies), CachingHostAllocator.h (`PowerOf2Ceil`)."""
    total = 0
    for numel, count in tensor_numels:
        per_rank = math.ceil(numel / num_shards) if sharded else numel
        total += count * pinned_allocation_bytes(per_rank * bytes_per_param)
    return total
