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


def ray_object_store_bytes(host_ram_bytes: int, fraction: float) -> int:
    """Ray object store at its default cap: min(fraction × RAM, 200 GB). It lives in
    /dev/shm and counts toward node memory as it fills; we plan the cap (worst case).
    Source: ray/_private/ray_constants.py (DEFAULT_OBJECT_STORE_MEMORY_PROPORTION 0.3,
    DEFAULT_OBJECT_STORE_MAX_MEMORY_BYTES)."""
    return min(int(host_ram_bytes * fraction), C.RAY_OBJECT_STORE_CAP_BYTES)


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
