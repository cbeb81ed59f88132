"""Host (CPU) RAM terms of a node: pinned offload, vLLM sleep copies, model loading, Ray.

Every term is bytes per node. Ranks per node multiply per-rank terms.
"""

from __future__ import annotations

import math

from . import constants as C


def offloaded_optimizer_bytes_per_rank(num_trainable: int, master_bytes: int, state_bytes_total: int, num_shards: int) -> int:
    """ZeRO-Offload / FSDP CPU offload: the rank's partition of fp32 master weights,
    optimizer states and the fp32 gradients the CPU optimizer steps on (4 + 8 + 4 = 16 B per
    param for Adam), pinned by default since DeepSpeed PR #8207.
    Source: DeepSpeed docs memory.rst; research/memory-model.md §4 (16Ψ/N per rank)."""
    per_param_grads = C.FP32_BYTES * num_trainable
    return math.ceil((num_trainable * master_bytes + state_bytes_total + per_param_grads) / num_shards)


def offloaded_param_bytes_per_rank(weight_bytes_full: int, num_shards: int) -> int:
    """ZeRO-3 offload_param / FSDP param offload: the rank's 16-bit parameter shard, pinned."""
    return math.ceil(weight_bytes_full / num_shards)


def vllm_sleep_copy_bytes(weight_bytes_per_rank: int, num_workers_per_node: int) -> int:
    """Level-1 sleep copies each worker's weights into pinned host memory (torch.empty(...,
    pin_memory=True) in vllm/device_allocator/cumem.py). PyTorch's CachingHostAllocator
    keeps freed pinned blocks for reuse, so we count the copy as resident for the run."""
    return weight_bytes_per_rank * num_workers_per_node


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
