"""Activation terms of the attention: what sdpa, flash-attention and eager keep after the
q/k/v projections, the masks, a fused q/k/v output, Ulysses' view and all-to-all, and the
kernel's gradients in backward.

Part of the activation model (`activations.py`, whose docstring states the shared sources and
assumptions). Symbols: q = heads·head_dim, kv = kv_heads·head_dim, n_h heads, s sequence length.
Source (kernels): PyTorch `aten/src/ATen/native/transformers/attention.cpp` and the meta
kernels of torch 2.13; transformers `integrations/sdpa_attention.py`,
`modeling_flash_attention_utils.py`, `eager_attention_forward`.
"""

from __future__ import annotations

import dataclasses
import math

from ..catalog.models import ModelArch
from ..spec.run import AttentionImpl
from .activation_units import B, F, INDEX_BYTES, SMALL_TENSOR_BYTES, coefficients, kv_width, query_width

SDPA_RNG_STATE_BYTES = 2 * SMALL_TENSOR_BYTES
"""The memory-efficient kernel's philox seed and offset (int64 scalars), kept per call."""
FLASH_VARLEN_CONSTANT_BYTES = 3 * SMALL_TENSOR_BYTES
"""Varlen flash keeps cu_seqlens, the rng seed and offset per call."""
MEM_EFFICIENT_LSE_ALIGNMENT = 32
"""The memory-efficient kernel's fp32 log-sum-exp is [b, n_h, ⌈s/32⌉·32] (torch `_meta_registrations`)."""
MEM_EFFICIENT_BIAS_ALIGNMENT = 16
"""PyTorch `preprocess_mask`: a bias whose last dimension is not a multiple of 16 is padded,
after being expanded to all heads (so the padded copy has n_h rows per query)."""
ULYSSES_ALL_TO_ALL_COPIES = 3
"""verl `all_to_all_tensor`: besides its input, one all-to-all holds the contiguous split copies
of the input, the receive buffers and their concatenation, each the input's size."""


def fused_qkv_kept_bytes_per_token(arch: ModelArch, attention: AttentionImpl) -> int:
    """A fused q/k/v projection without GQA (GPT-NeoX ``query_key_value``): ``repeat_kv`` is
    the identity, so sdpa keeps v as a view of the fused output and the whole [.., q+2kv]
    storage stays alive, q and k slices included (q and k themselves are RoPE's new tensors).
    With GQA (Phi-3) k and v are expanded copies and the fused output is freed; flash-attention
    keeps its unpadded copies, eager's batched matmul a contiguous copy of v (traced).
    Source: transformers gpt_neox/modeling_gpt_neox.py (GPTNeoXAttention: qkv.view then
    chunk), `repeat_kv` (n_rep = 1 returns its input), `integrations/sdpa_attention.py`."""
    if not arch.fused_qkv or arch.uses_mla or attention != AttentionImpl.sdpa:
        return 0
    if arch.num_kv_heads != arch.num_attention_heads:
        return 0
    return B * (query_width(arch) + kv_width(arch))


def sdpa_bias_bytes_per_sequence(arch: ModelArch, seq_len: int) -> int:
    """The additive bf16 mask PyTorch makes from the bool mask in every SDPA call and the
    memory-efficient kernel keeps: [1, s, s] per sequence, or [n_h, s, ⌈s/16⌉·16] when s is not
    a multiple of 16 (padded after the expansion to all heads)."""
    align = MEM_EFFICIENT_BIAS_ALIGNMENT
    if seq_len % align == 0:
        return B * seq_len * seq_len
    return B * arch.num_attention_heads * seq_len * math.ceil(seq_len / align) * align


def ulysses_attention_view(arch: ModelArch, seq_len: int, sequence_parallel_size: int) -> tuple[ModelArch, int]:
    """What one GPU's attention sees under Ulysses sequence parallelism of degree sp: after the
    all-to-all, the whole sequence (sp × the local ``seq_len``) for 1/sp of the heads; KV heads
    fewer than sp are first repeated to sp. Every other term of a layer sees the local tokens.
    Source: verl `models/transformers/monkey_patch.py` (`_ulysses_flash_attention_forward`:
    repeat_kv by max(sp // n_kv, 1), `gather_seq_scatter_heads`); DeepSpeed-Ulysses
    (arXiv 2309.14509, §3.1)."""
    sp = sequence_parallel_size
    if sp == 1:
        return arch, seq_len
    heads = dataclasses.replace(
        arch, num_attention_heads=arch.num_attention_heads // sp, num_kv_heads=max(arch.num_kv_heads // sp, 1)
    )
    return heads, seq_len * sp


def ulysses_all_to_all_bytes(arch: ModelArch, num_sequences: int, seq_len: int, sequence_parallel_size: int) -> int:
    """Transient bytes of Ulysses' largest all-to-all (q before attention, the output after:
    bf16 [b, s_local, q] each) on top of its input: split copies, receive buffers and their
    concatenation (`ULYSSES_ALL_TO_ALL_COPIES`). The repeated KV are at most q wide.
    Source: verl `utils/ulysses.py` (`all_to_all_tensor`, `SeqAllToAll`); the backward's
    all-to-all of the gradients has the same size."""
    if sequence_parallel_size == 1:
        return 0
    return ULYSSES_ALL_TO_ALL_COPIES * B * query_width(arch) * num_sequences * seq_len


def attention_core_saved_bytes_per_sequence(
    arch: ModelArch, attention: AttentionImpl, seq_len: int, sequence_parallel_size: int = 1,
) -> int:
    """What the attention keeps after the q/k/v projections (whose input the norms count);
    under Ulysses, for the whole sequence and this GPU's heads (`ulysses_attention_view`).

    - sdpa (memory-efficient kernel, mask path): q; k and v expanded to all heads by
      `repeat_kv` (or already all heads); the output, allocated [b, s, h, d] and returned
      transposed, so `.contiguous()` before o_proj is free and o_proj keeps the same storage;
      fp32 log-sum-exp [n_h, ⌈s/32⌉·32]; the bf16 bias (`sdpa_bias_bytes_per_sequence`).
    - flash_attention_2 (varlen): the unpadded copies of q, k, v ([tokens, heads, d]), the
      output, fp32 log-sum-exp [n_h, tokens], the zero-filled padded output o_proj keeps, and
      the int64 unpad indices.
    - eager: a contiguous copy of q for the batched matmul, expanded k and v, the scores
      (fp32 softmax + bf16 probabilities per score; Gemma 2's soft-cap keeps its `tanh` too:
      `eager_score_saved_bytes`), the contiguous transposed output.
    - a fused q/k/v projection without GQA keeps its whole output (`fused_qkv_kept_bytes_per_token`).
    Source: transformers `integrations/sdpa_attention.py`, `modeling_flash_attention_utils.py`,
    `eager_attention_forward`; PyTorch `scaled_dot_product_attention` (CUDA dispatch).
    """
    fused = fused_qkv_kept_bytes_per_token(arch, attention) * seq_len if sequence_parallel_size == 1 else 0
    arch, s = ulysses_attention_view(arch, seq_len, sequence_parallel_size)
    q, kv, n_h = query_width(arch), kv_width(arch), arch.num_attention_heads
    if attention == AttentionImpl.sdpa:
        lse = F * n_h * math.ceil(s / MEM_EFFICIENT_LSE_ALIGNMENT) * MEM_EFFICIENT_LSE_ALIGNMENT
        return 4 * B * q * s + lse + sdpa_bias_bytes_per_sequence(arch, s) + fused
    if attention == AttentionImpl.flash_attention_2:
        return (B * q + 2 * B * kv + B * q + F * n_h + B * q + INDEX_BYTES) * s
    return 4 * B * q * s + coefficients(arch).eager_score_saved_bytes * n_h * s * s + fused


def attention_backward_bytes_per_sequence(arch: ModelArch, attention: AttentionImpl, seq_len: int, sp: int = 1) -> int:
    """The attention's part at its backward peak: its kept tensors with the kernel's gradients
    (sdpa/flash: dq, dk, dv and the output gradient; eager: the fp32 gradients of the
    probabilities and of the scores). Source: derivatives.yaml
    (`_scaled_dot_product_efficient_attention_backward`, `_flash_attention_backward`)."""
    kept = attention_core_saved_bytes_per_sequence(arch, attention, seq_len, sp)
    arch, s = ulysses_attention_view(arch, seq_len, sp)
    q, kv, n_h = query_width(arch), kv_width(arch), arch.num_attention_heads
    if attention == AttentionImpl.eager:
        kept_scores = (coefficients(arch).eager_score_saved_bytes - B) * n_h * s * s
        return (2 * B * q + B * q) * s + kept_scores + 2 * F * n_h * s * s
    kv_grad_width = kv if attention == AttentionImpl.flash_attention_2 else q
    return kept + (B * q + 2 * B * kv_grad_width + B * q) * s


def dense_attention_mask_bytes(attention: AttentionImpl, num_sequences: int, seq_len: int) -> int:
    """Mask bytes alive while a layer attends in a no-grad forward: transformers' bool
    [b, 1, s, s] mask for sdpa (1 B) and the bf16 additive mask PyTorch converts it to in the
    call (2 B); eager's bf16 mask; flash-attention takes the padding as cu_seqlens.
    Source: transformers `masking_utils.sdpa_mask`/`eager_mask`; PyTorch
    `convert_boolean_attn_mask`. Assumes: prompts are padded (batched GRPO) and s a multiple
    of 16 (else the converted mask is padded per head, `sdpa_bias_bytes_per_sequence`)."""
    elements = num_sequences * seq_len * seq_len
    return {AttentionImpl.sdpa: (1 + B) * elements, AttentionImpl.eager: B * elements}.get(attention, 0)
