"""Attention as the GPU kernels allocate it, on fake CPU tensors.

On a CPU, `F.scaled_dot_product_attention` runs the math kernel (an s×s score matrix saved
for backward); on a GPU it runs a fused kernel that saves no scores. The tracer registers its
own attention functions with transformers' `AttentionInterface` (and masks with
`AttentionMaskInterface`) that do what transformers + PyTorch do on CUDA, calling the very ATen
operators the CUDA path calls. Under `FakeTensorMode` those operators run their meta kernels
(shapes, dtypes, strides of the CUDA outputs) and autograd records their real derivative
formulas, so the saved tensors are exactly those of the GPU step.

- ``oomless_sdpa`` (spec ``attention: sdpa``) follows transformers 5.23
  `integrations/sdpa_attention.py`: K/V are expanded to all heads with `repeat_kv` unless
  there is no mask (`use_gqa_in_sdpa` on CUDA). It then follows PyTorch's CUDA dispatch
  (`aten/src/ATen/native/transformers/attention.cpp`, `scaled_dot_product_attention`): with a
  mask, flash is not eligible and the memory-efficient kernel runs; the boolean mask is first
  converted to an additive mask in the query dtype (`convert_boolean_attn_mask`: one new
  [b, 1, s, s] bf16 tensor per call, i.e. per layer), then `preprocess_mask` expands it to
  all heads and pads the last dimension to a multiple of 16 when needed.
  `_scaled_dot_product_efficient_attention` saves q, k, v, the bias, the output (allocated
  [b, s, h, d] and returned transposed, so transformers' `.contiguous()` is free) and an fp32
  log-sum-exp [b, h, ⌈s/32⌉·32]. Without a mask, `_scaled_dot_product_flash_attention` runs
  (GQA native; fp32 log-sum-exp [b, h, s]).
- ``oomless_varlen`` (spec ``attention: flash_attention_2``) follows transformers
  `modeling_flash_attention_utils._flash_attention_forward` with a padding mask: `_upad_input`
  gathers q, k, v into [tokens, heads, d] copies (`_index_first_axis`), the varlen flash kernel
  (`aten._flash_attention_forward`, the same kernel family as flash-attn 2's varlen path)
  saves them with its output and an fp32 log-sum-exp [h, tokens], and `_pad_input` scatters
  the output into a zero-filled [b·s, h, d] tensor for `o_proj`.
- ``eager`` is transformers' own `eager_attention_forward`: the GPU runs the same operators.
- ``oomless_flash_packed`` (spec ``flash_attention_2`` in a vision tower that packs images by
  ``cu_seqlens``, Qwen2.5-VL) is the varlen kernel on the packed patches, no unpad/pad.

Every micro-batch is assumed padded (GRPO pads prompts and completions), so the mask paths are
taken; every position is counted as a real token (worst case: negligible padding).

Known limitations: workspaces allocated inside the CUDA backward kernels (flash's fp32
`dq_accum`, the memory-efficient kernel's fp32 gradient accumulators) are not tensors the
meta kernels return and are not counted; cuDNN attention (preferred over flash by some
PyTorch builds on H100) is not modelled.
"""

from __future__ import annotations

from typing import Any

import torch

from ..errors import InputError

SDPA_NAME = "oomless_sdpa"
FLASH_NAME = "oomless_varlen"
PACKED_FLASH_NAME = "oomless_flash_packed"
"""The vision tower's flash path (`flash_packed_attention`). The name contains "flash": transformers'
`is_flash_attention_requested` tests exactly that, and only then passes ``cu_seqlens``."""
MEM_EFFICIENT_MASK_ALIGNMENT = 16
"""`preprocess_mask`: the memory-efficient kernel needs the bias's last dim a multiple of 16."""
TRANSFORMERS_SDPA_GQA_MAX_HEAD_DIM = 256
"""transformers `use_gqa_in_sdpa` (CUDA): GQA inside SDPA only without a mask and head_dim ≤ 256."""

IMPLEMENTATIONS = {"sdpa": SDPA_NAME, "flash_attention_2": FLASH_NAME, "eager": "eager"}
"""Spec `attention` value → attention implementation the traced model is built with."""
VISION_IMPLEMENTATIONS = {"sdpa": SDPA_NAME, "flash_attention_2": PACKED_FLASH_NAME, "eager": "eager"}
"""The same for a vision tower that packs its images by ``cu_seqlens`` (Qwen2.5-VL): sdpa and
eager run transformers' per-chunk loop (one call per window or image, no mask: on CUDA the
flash kernel), flash_attention_2 one varlen call."""


def repeat_kv(hidden: torch.Tensor, n_rep: int) -> torch.Tensor:
    """transformers `repeat_kv`: [b, kv, s, d] → [b, kv·n_rep, s, d] (expand + reshape copies)."""
    if n_rep == 1:
        return hidden
    b, kv, s, d = hidden.shape
    return hidden[:, :, None, :, :].expand(b, kv, n_rep, s, d).reshape(b, kv * n_rep, s, d)


def additive_mask(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """PyTorch `convert_boolean_attn_mask`: where(mask, 0, -inf) in the query dtype."""
    if mask.dtype != torch.bool:
        return mask
    return torch.where(mask, 0.0, torch.scalar_tensor(float("-inf"), dtype=dtype, device=mask.device))


def mem_efficient_bias(bias: torch.Tensor, query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """PyTorch `preprocess_mask`: expand to [b, h, s_q, s_k]; pad the last dim to 16, or make
    it contiguous when its strides are not multiples of 16."""
    b, h, s_q, _ = query.shape
    s_k = key.shape[2]
    bias = bias.expand(b, h, s_q, s_k)
    align = MEM_EFFICIENT_MASK_ALIGNMENT
    if s_k % align:
        padded = torch.nn.functional.pad(bias, (0, align - s_k % align))
        return padded[..., :s_k]
    if any(st % align for st in bias.stride()[:-1]):
        return bias.contiguous()
    return bias


def sdpa_cuda_attention(
    module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
    attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
    is_causal: bool | None = None, **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' `sdpa_attention_forward` with PyTorch's CUDA backend choice."""
    if kwargs.get("softcap") is not None:
        raise InputError("attention", "transformers' sdpa does not support attention soft-capping "
                         "(Gemma 2); use eager or flash_attention_2")
    n_rep = getattr(module, "num_key_value_groups", 1)
    gqa_in_kernel = attention_mask is None and key.shape[-1] == value.shape[-1] <= TRANSFORMERS_SDPA_GQA_MAX_HEAD_DIM
    if n_rep > 1 and not gqa_in_kernel:
        key, value = repeat_kv(key, n_rep), repeat_kv(value, n_rep)
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    if attention_mask is None:
        out = torch.ops.aten._scaled_dot_product_flash_attention(
            query, key, value, dropout, query.shape[2] > 1 and causal, False, scale=scaling,
        )[0]
    else:
        bias = mem_efficient_bias(additive_mask(attention_mask, query.dtype), query, key)
        needs_lse = query.requires_grad or key.requires_grad or value.requires_grad
        out = torch.ops.aten._scaled_dot_product_efficient_attention(
            query, key, value, bias, needs_lse, dropout, False, scale=scaling,
        )[0]
    return out.transpose(1, 2).contiguous(), None


def flash_varlen_attention(
    module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
    attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
    is_causal: bool | None = None, **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' flash-attention-2 path for a padded batch (unpad → varlen → pad)."""
    b, _, s, _ = query.shape
    q, k, v = (t.transpose(1, 2) for t in (query, key, value))  # [b, s, heads, d]
    tokens = b * s
    indices = torch.arange(tokens, device=query.device)
    cu_seqlens = torch.arange(0, tokens + 1, s, dtype=torch.int32, device=query.device)
    q_u, k_u, v_u = (t.reshape(-1, *t.shape[2:])[indices] for t in (q, k, v))
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    out = torch.ops.aten._flash_attention_forward(
        q_u, k_u, v_u, cu_seqlens, cu_seqlens, s, s, dropout, causal, False, scale=scaling,
    )[0]
    padded = torch.zeros((tokens, *out.shape[1:]), device=out.device, dtype=out.dtype)
    padded[indices] = out
    return padded.view(b, s, *out.shape[1:]), None


def flash_packed_attention(
    module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
    attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
    is_causal: bool | None = None, cu_seq_lens_q: torch.Tensor | None = None, cu_seq_lens_k: torch.Tensor | None = None,
    max_length_q: int | None = None, max_length_k: int | None = None, **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' flash-attention-2 path for packed sequences given by ``cu_seqlens`` (the
    Qwen2.5-VL vision blocks): `_flash_attention_forward`'s varlen-kwargs branch reshapes
    q, k, v [1, s, heads, d] to [s, heads, d] (views) and calls the varlen kernel, which
    saves them with its output and an fp32 log-sum-exp [heads, s]; the output is viewed back.
    Source: transformers 5.24 `modeling_flash_attention_utils._flash_attention_forward`
    (``is_fa_with_varlen_kwargs``), `integrations/flash_attention.py`."""
    if cu_seq_lens_q is None or cu_seq_lens_k is None or max_length_q is None or max_length_k is None:
        raise InputError("attention", "the packed flash path needs cu_seqlens and max_seqlen")
    b = query.shape[0]
    q, k, v = (t.transpose(1, 2).reshape(-1, *t.shape[1:2], t.shape[-1]) for t in (query, key, value))
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    out = torch.ops.aten._flash_attention_forward(
        q, k, v, cu_seq_lens_q, cu_seq_lens_k, max_length_q, max_length_k, dropout, causal, False, scale=scaling,
    )[0]
    return out.view(b, -1, *out.shape[-2:]), None


def padding_mask_2d(attention_mask: torch.Tensor | None = None, kv_length: int = 0, **kwargs: Any) -> torch.Tensor | None:
    """Mask function for ``oomless_varlen``: transformers' `flash_attention_mask` keeps the 2-D
    padding mask when a batch is padded (its `.all()` test cannot run on fake tensors; every
    traced batch is treated as padded)."""
    return None if attention_mask is None else attention_mask[:, -kv_length:]


def register() -> None:
    """Make the implementations known to transformers (idempotent)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(SDPA_NAME, sdpa_cuda_attention)
    AttentionInterface.register(FLASH_NAME, flash_varlen_attention)
    AttentionInterface.register(PACKED_FLASH_NAME, flash_packed_attention)
    AttentionMaskInterface.register(SDPA_NAME, sdpa_mask)
    AttentionMaskInterface.register(FLASH_NAME, padding_mask_2d)
