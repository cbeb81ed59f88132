"""Pinned host memory of RL fine-tuning: what really gets page-locked, allocation by allocation.

Pinned (page-locked) host memory is not a byte count but a list of allocations, each rounded:

* PyTorch's CachingHostAllocator rounds every pinned allocation up to the next power of two
  and keeps freed blocks cached (released only by ``empty_cache``). ``Tensor.pin_memory()``,
  ``torch.empty(..., pin_memory=True)`` and CUDA→CPU ``.to("cpu", non_blocking=True)`` all go
  through it. Source: aten/src/ATen/core/CachingHostAllocator.h (torch 2.x,
  ``roundSize = c10::llvm::PowerOf2Ceil(size)``); aten/src/ATen/native/TensorConversions.cpp
  ``_to_copy`` (pin_out = non_blocking && self.is_cuda() && dst is CPU). Measured: vLLM PR
  #50094 (6→8, 10→16, 12→16 GiB VmRSS), vLLM issue #53042 (2.08 GiB → 4 GiB of Shmem).
* So the terms below first list the allocations (FSDP unit shards, vLLM weight segments,
  DeepSpeed flat partitions), then round each one (``pinned_total_bytes``).

Producers modelled: verl/EasyR1 FSDP1 parameter and optimizer offload, vLLM sleep level 1,
DeepSpeed ZeRO-Offload flat partitions.

Known limitations:
* The CachingHostAllocator reuses a cached block only for the same power-of-two size class;
  we assume each offload cycle asks for the same sizes, so the first cycle's blocks are the
  steady state (true for the three producers, which move the same tensors every step).
* vLLM: bf16 weights (no quantisation, no fp8 DeepSeek), vision tower TP-sharded
  (``mm_encoder_tp_mode="weights"``, the default); vision embeddings and projectors other than
  Qwen2.5-VL's merger treated as replicated; DeepSeek's ``e_score_correction_bias`` and
  transient tensors of ``process_weights_after_loading`` ignored. See ``caching_allocator_segments``
  for the allocator's simplifications.
* FSDP units follow HF ``_no_split_modules`` as verl's default wrap policy does; a custom
  ``transformer_layer_cls_to_wrap`` changes the units.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable

from ..catalog.models import ModelArch
from . import constants as C
from .params import (decoder_layer_sequence, num_embedding_parameters, num_final_norm_parameters,
                     num_lm_head_parameters, num_parameters_per_decoder_layer,
                     num_parameters_per_linear_attention_layer)
from .tensors import ParamTensor
from .vision_params import vision_tensors
from .vllm_weights import vllm_weight_request_sizes  # noqa: F401  (re-exported: tests)

# --- the host allocator -----------------------------------------------------------------------


def pinned_allocation_bytes(num_bytes: int) -> int:
    """Bytes one pinned allocation of ``num_bytes`` really locks: the next power of two (0 → 0).

    Source: CachingHostAllocator.h ``PowerOf2Ceil`` (module docstring); vLLM PR #50094.
    """
    if num_bytes < 0:
        raise ValueError(f"num_bytes={num_bytes}; expected >= 0")
    return 0 if num_bytes == 0 else 1 << (num_bytes - 1).bit_length()


def pinned_total_bytes(sizes: Iterable[int]) -> int:
    """Σ over allocations of their power-of-two size (``pinned_allocation_bytes``)."""
    return sum(pinned_allocation_bytes(s) for s in sizes)


# --- the CUDA caching allocator's segments ------------------------------------------------------


def cuda_block_bytes(num_bytes: int) -> int:
    """A request rounded to the allocator's 512 B block granularity.

    Source: c10/cuda/CUDACachingAllocator.cpp ``round_size`` (roundup_power2_divisions unset).
    """
    return max(C.CUDA_MIN_BLOCK_BYTES, math.ceil(num_bytes / C.CUDA_MIN_BLOCK_BYTES)
               * C.CUDA_MIN_BLOCK_BYTES)


def new_segment_bytes(block_bytes: int) -> int:
    """Size of the segment opened for a block no free block can hold: 2 MiB (≤ 1 MiB),
    20 MiB (< 10 MiB), else the block rounded up to 2 MiB.

    Source: c10/cuda/CUDACachingAllocator.cpp ``get_allocation_size``.
    """
    if block_bytes <= C.CUDA_SMALL_REQUEST_MAX_BYTES:
        return C.CUDA_SMALL_SEGMENT_BYTES
    if block_bytes < C.CUDA_MIN_LARGE_ALLOC_BYTES:
        return C.CUDA_LARGE_SEGMENT_BYTES
    return math.ceil(block_bytes / C.CUDA_LARGE_ROUNDING_BYTES) * C.CUDA_LARGE_ROUNDING_BYTES


def caching_allocator_segments(request_sizes: Iterable[int]) -> tuple[int, ...]:
    """Segments the CUDA caching allocator opens for requests that all stay alive (weights
    loaded one after another), in opening order.

    Each request is rounded to 512 B and served best-fit (smallest free block, then oldest
    segment) from its pool: small (≤ 1 MiB) or large. With no fit a segment is opened
    (``new_segment_bytes``) and the block split off it; the rest stays free if > 1 MiB (large
    pool) or ≥ 512 B (small pool). So ≥ 10 MiB requests mostly get their own segment, 1-10 MiB
    requests share 20 MiB segments (a ≥ 10 MiB request can also land in such a remainder),
    small ones share 2 MiB segments. Zero-byte requests allocate nothing.
    Source: c10/cuda/CUDACachingAllocator.cpp (torch 2.x) ``malloc``, ``get_free_block``,
    ``get_allocation_size``, ``should_split``.
    Assumes (simplifications): one stream, no frees, expandable_segments off, default
    max_split_size (no split limit) and roundup_power2_divisions (none); a pluggable allocator
    (vLLM CuMemAllocator) receives exactly these segment sizes.
    """
    segments: list[int] = []
    free: dict[bool, list[tuple[int, int, int]]] = {True: [], False: []}  # (size, seg, offset)
    for request in request_sizes:
        if request < 0:
            raise ValueError(f"request size {request}; expected >= 0")
        if request == 0:
            continue
        size = cuda_block_bytes(request)
        small = size <= C.CUDA_SMALL_REQUEST_MAX_BYTES
        fits = [b for b in free[small] if b[0] >= size]
        if fits:
            block = min(fits)
            free[small].remove(block)
        else:
            segments.append(new_segment_bytes(size))
            block = (segments[-1], len(segments) - 1, 0)
        rest = block[0] - size
        if (rest >= C.CUDA_MIN_BLOCK_BYTES) if small else (rest > C.CUDA_SMALL_REQUEST_MAX_BYTES):
            free[small].append((rest, block[1], block[2] + size))
    return tuple(segments)


# --- FSDP1 offload (verl / EasyR1) --------------------------------------------------------------

FSDP_VISION_WRAP_PREFIXES: dict[str, tuple[str, ...]] = {
    "qwen2_5_vl": ("visual.blocks.*.",),
    "siglip_vision_model": ("vision_tower.vision_model.embeddings.",
                            "vision_tower.vision_model.encoder.layers.*.",
                            "vision_tower.vision_model.head"),
    "intern_vit_6b": ("vision_model.",),
    "qwen2_vl": ("visual.blocks.*.",),
    "qwen3_vl": ("visual.blocks.*.",),
    "internvl_vision": ("vision_tower.encoder.layer.*",),  # owns lambda_1/lambda_2 itself
    "clip_vision_model": ("vision_tower.vision_model.embeddings",  # owns class_embedding
                          "vision_tower.vision_model.encoder.layers.*."),
    "idefics3_vision": ("vision_model.encoder.layers.*.self_attn.",),
}
"""Vision modules that are their own FSDP unit, as ``vision_tensors`` module prefixes; a ``*``
prefix gives one unit per block. From the HF ``_no_split_modules`` verl wraps by default:
Qwen2_5_VLVisionBlock (qwen2_5_vl/modeling_qwen2_5_vl.py); SiglipVisionEmbeddings,
SiglipEncoderLayer, SiglipMultiheadAttentionPoolingHead (gemma3/modeling_gemma3.py); the whole
InternVisionModel (InternVL remote code modeling_internvl_chat.py); Qwen2VLVisionBlock
(qwen2_vl/modeling_qwen2_vl.py); Qwen3VLVisionBlock
(qwen3_vl/modeling_qwen3_vl.py; Qwen3_5VisionBlock, qwen3_5/modeling_qwen3_5.py);
InternVLVisionLayer (internvl/modeling_internvl.py); CLIPEncoderLayer, CLIPVisionEmbeddings
(clip/modeling_clip.py, LLaVA's tower); Idefics3VisionAttention, only the attention of each
tower layer (idefics3/modeling_idefics3.py). transformers 5 collects a model's
``_no_split_modules`` from its sub-models (modeling_utils.py ``post_init``)."""


def _vision_unit_key(arch: ModelArch, t: ParamTensor) -> str | None:
    assert arch.vision is not None
    return next((p for p in FSDP_VISION_WRAP_PREFIXES.get(arch.vision.model_type, ())
                 if t.module.startswith(p)), None)


@functools.lru_cache(maxsize=None)  # pure on a frozen arch; fit plans hundreds of variants of one model
def fsdp_unit_parameters(arch: ModelArch) -> tuple[int, ...]:
    """Parameters of each FSDP unit: one per decoder layer (``decoder_layer_sequence``: dense
    layers first; a hybrid's Gated DeltaNet layers hold ``linear_attn`` instead of
    ``self_attn``), one per wrapped
    vision module (``FSDP_VISION_WRAP_PREFIXES``), then the root (embedding, final norm,
    lm_head and every vision tensor no wrapped module owns: patch embed, merger, projector).

    Source: verl/utils/fsdp_utils.py ``get_fsdp_wrap_policy`` (transformer_layer_cls_to_wrap
    defaults to ``_no_split_modules``); torch FSDP1 puts a wrapped module's parameters in one
    FlatParameter and the root keeps the rest. Assumes: tied embeddings counted once (root).
    """
    units = [num_parameters_per_linear_attention_layer(arch, kind) if linear
             else num_parameters_per_decoder_layer(arch, kind)
             for kind, linear in decoder_layer_sequence(arch)]
    root = (num_embedding_parameters(arch) + num_final_norm_parameters(arch)
            + num_lm_head_parameters(arch))
    vision: dict[str, list[ParamTensor]] = {}
    for t in vision_tensors(arch):
        key = _vision_unit_key(arch, t)
        if key is None:
            root += t.numel * t.count
        else:
            vision.setdefault(key, []).append(t)
    for prefix, tensors in vision.items():
        if "*" in prefix:
            (count,) = {t.count for t in tensors}
            units += [sum(t.numel for t in tensors)] * count
        else:
            units.append(sum(t.numel * t.count for t in tensors))
    return (*units, root)


def fsdp_unit_shard_numels(arch: ModelArch, num_shards: int) -> tuple[int, ...]:
    """One rank's shard of each unit's FlatParameter: ceil(unit / N) (padded to N equal chunks).

    Source: torch/distributed/fsdp/_flat_param.py ``FlatParamHandle._get_shard``
    (``flatten().chunk(world_size)`` + padding). Assumes use_orig_params=False (verl's
    default), so no per-parameter alignment padding.
    """
    if num_shards < 1:
        raise ValueError(f"num_shards={num_shards}; expected >= 1")
    return tuple(math.ceil(u / num_shards) for u in fsdp_unit_parameters(arch))


def fsdp_offload_pinned_bytes(arch: ModelArch, num_shards: int, bytes_per_param: int) -> int:
    """One rank's pinned bytes after ``offload_fsdp_model_to_cpu``: Σ_units
    pow2(ceil(unit / N) · bytes_per_param).

    Source: verl/utils/fsdp_utils.py ``offload_fsdp_model_to_cpu`` (per handle
    ``flat_param_to("cpu", non_blocking=True)`` → one pinned allocation per unit shard).
    Assumes: verl/EasyR1 actor flat params are fp32 (bytes_per_param = 4; model loaded in fp32,
    bf16 compute via MixedPrecision).
    """
    return pinned_total_bytes(s * bytes_per_param for s in fsdp_unit_shard_numels(arch, num_shards))


def fsdp_optimizer_offload_pinned_bytes(arch: ModelArch, num_shards: int,
                                        state_bytes: int = C.FP32_BYTES,
                                        num_states: int = C.ADAM_NUM_STATES) -> int:
    """One rank's pinned bytes after ``offload_fsdp_optimizer``: every state tensor (Adam's
    exp_avg, exp_avg_sq per flat-param shard) moved with ``.to("cpu", non_blocking=True)``:
    num_states · Σ_units pow2(ceil(unit / N) · state_bytes).

    Source: verl/utils/fsdp_utils.py ``offload_fsdp_optimizer``. Assumes: all units trainable;
    the scalar ``step`` is ignored.
    """
    return num_states * fsdp_offload_pinned_bytes(arch, num_shards, state_bytes)


# --- vLLM sleep level 1 ---------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def vllm_sleep_backup_bytes(arch: ModelArch, tensor_parallel_size: int) -> int:
    """Pinned bytes one vLLM worker holds after ``sleep(level=1)``: one pinned
    ``torch.empty(size, uint8, pin_memory=True)`` per segment of the "weights" pool, each
    rounded to a power of two. Level 2 backs up no weights (0 bytes; not modelled here).

    Source: vllm/device_allocator/cumem.py ``CuMemAllocator.sleep`` (one backup per allocation
    handle = one caching-allocator segment); ``caching_allocator_segments``.
    """
    requests = vllm_weight_request_sizes(arch, tensor_parallel_size)
    return pinned_total_bytes(caching_allocator_segments(requests))


# --- DeepSpeed ZeRO-Offload ---------------------------------------------------------------------


def flat_partition_pinned_bytes(num_elements_per_rank: int, bytes_per_element: int,
                                sub_group_size: int | None = None) -> int:
    """Pinned bytes of one rank's flat CPU buffer(s): one buffer of all its elements, or one
    per sub-group of ``sub_group_size`` elements (ZeRO-3), each rounded to a power of two.

    Source: deepspeed/runtime/zero/stage_1_and_2.py, stage3.py (CPU partitions ``pin_memory()``;
    stage3 ``_create_fp16_sub_groups`` groups parameters by ``partition_numel``).
    Assumes: sub-groups are exact ``sub_group_size`` slices (DeepSpeed closes a group at the
    first whole parameter that reaches the size, so real groups run slightly larger); one
    parameter group.
    """
    n = num_elements_per_rank
    if n < 0 or (sub_group_size is not None and sub_group_size < 1):
        raise ValueError(f"num_elements_per_rank={n}, sub_group_size={sub_group_size}; "
                         "expected >= 0 and >= 1")
    size = n if sub_group_size is None else min(sub_group_size, n)
    full, rest = divmod(n, size) if size else (0, 0)
    return (full * pinned_allocation_bytes(size * bytes_per_element)
            + pinned_allocation_bytes(rest * bytes_per_element))
