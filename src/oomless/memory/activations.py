"""Activation memory of a decoder-only transformer in training and in no-grad forwards.

Every term is derived tensor by tensor from what autograd keeps in the Hugging Face decoder
(transformers 5.23 `models/llama/modeling_llama.py`, `models/qwen2/modeling_qwen2.py`,
`models/qwen3/…`, `models/qwen3_moe/…`, `models/gemma2|gemma3/…`) when the attention runs as
the GPU kernels run it (`oomless.trace.attention`), in the style of Korthikanti et al. 2022
(arXiv 2205.05198, §4.1). Each storage is counted once: a view (a transpose, a reshape, the
`.contiguous()` of an already contiguous tensor) adds nothing. The terms were checked against
`oomless trace` (fake-tensor traces of the same step; `tests/trace/`), and the coefficients
where families differ structurally come from the traced calibration table
(`activation_calibration.py`).

Symbols: h hidden, q = heads·head_dim, kv = kv_heads·head_dim, d head_dim, n_h heads,
n_kv kv heads, I intermediate, s sequence length, b sequences, L layers.

Source (kernels): PyTorch `aten/src/ATen/native/transformers/attention.cpp` (CUDA dispatch,
`convert_boolean_attn_mask`, `preprocess_mask`) and the meta kernels of torch 2.13.
Assumes: bf16 activations; dropout 0 (these models' configs); every sequence padded to the
longest (a padding mask is present, so sdpa takes the mask path and flash-attention the varlen
path), or packed sequences given as one row of b = 1 and s = the packed tokens
(`planner/batches.py`: flash-attention varlen sees the packed length, linear in it; sdpa's
block-diagonal mask of a packed row is s × s); under Ulysses sequence parallelism ``s`` is a
GPU's share and the attention sees the whole sequence for its heads (`ulysses_attention_view`); transformers' defaults for training (use_cache False; non-reentrant checkpointing of
every decoder layer, `GradientCheckpointingLayer`); full fine-tuning. Known limitations: LoRA
adds PEFT's branch tensors (`lora_saved_bytes_per_token`) to the full fine-tuning layer (only the
frozen LM head and embeddings are taken out): traced, it agrees within 5 % with checkpointing
(seed S1: −1.9 %) and is 12–18 % conservative without (a frozen base keeps fewer tensors);
CUDA kernels' internal workspaces are not counted (`oomless.trace.attention`). Hybrid models'
Gated DeltaNet layers are planned as full-attention layers (`activation_model_warnings`).
Families beyond the Llama layer follow ``ModelArch`` fields, not family names: a plain MLP
(`mlp_gated`), LayerNorm (`norm_type`: input + fp32 mean/rstd), a parallel residual, post-norms
only (OLMo2), q/k norms over the whole projection, a fused q/k/v without GQA; traced on tiny
GPT-NeoX, StarCoder2, Phi-3 and OLMo2 configs (`tests/trace/test_agreement.py`).
"""

from __future__ import annotations

import dataclasses
import math

from ..catalog.models import ModelArch
from ..spec.run import AttentionImpl
from . import constants as C
from .activation_calibration import FamilyCoefficients, family_coefficients

B = C.BF16_BYTES
F = C.FP32_BYTES
INDEX_BYTES = 8
"""int64 indices (positions, flash's unpad indices, MoE routing)."""
SMALL_TENSOR_BYTES = C.CUDA_MIN_BLOCK_BYTES
"""A scalar or tiny tensor still takes one 512-B block of the caching allocator."""

RMSNORM_SAVED_BYTES_PER_ELEMENT = F + B
"""HF RMSNorm saves its fp32 upcast input (for pow/mul backward) and the bf16 normalised
value (for the weight multiply): 4 + 2 bytes per hidden element."""
INVERSE_RMS_BYTES = F
"""`torch.rsqrt(variance + eps)`: one fp32 per token and per norm, saved by the multiply."""
NORM_OUTPUTS_CONSUMED_PER_LAYER = 2
"""Norm outputs saved by the linears that read them: the q/k/v input and the MLP input.
Gemma's post-attention/post-feed-forward norms feed a residual add, which saves nothing.
OLMo2 (post-norms only) has its linears read the residual stream instead: the same two
tensors of 2h. Phi-2 (one norm, parallel residual) has one."""
LAYER_NORM_STATS_BYTES = 2 * F
"""`native_layer_norm` saves its input, its mean and its rstd for backward; on CUDA the two
statistics are fp32 [.., 1] for a bf16 input (`acc_type`). Source: PyTorch
aten/src/ATen/native/cuda/layer_norm_kernel.cu (`layer_norm_cuda`), derivatives.yaml
(`native_layer_norm_backward` takes input, mean, rstd). The fake-tensor tracer runs the CPU
decomposition, which casts them to bf16 (torch/_decomp/decompositions.py
`native_layer_norm`): 4 B per token less per norm than planned."""
LAYER_NORM_BACKWARD_PEAK_BYTES_PER_ELEMENT = B
"""`native_layer_norm_backward` is one kernel: its only [.., h] temporary is the bf16 input
gradient (the weight/bias gradients are per feature). Source: layer_norm_kernel.cu
(`layer_norm_backward_cuda`)."""
SDPA_RNG_STATE_BYTES = 2 * SMALL_TENSOR_BYTES
"""The memory-efficient kernel's philox seed and offset (int64 scalars), kept per call."""
FLASH_VARLEN_CONSTANT_BYTES = 3 * SMALL_TENSOR_BYTES
"""Varlen flash keeps cu_seqlens, the rng seed and offset per call."""
MEM_EFFICIENT_LSE_ALIGNMENT = 32
"""The memory-efficient kernel's fp32 log-sum-exp is [b, n_h, ⌈s/32⌉·32] (torch `_meta_registrations`)."""
MEM_EFFICIENT_BIAS_ALIGNMENT = 16
"""PyTorch `preprocess_mask`: a bias whose last dimension is not a multiple of 16 is padded,
after being expanded to all heads (so the padded copy has n_h rows per query)."""
MOE_ROUTING_INDEX_TENSORS = 4
"""transformers 5.23 grouped-mm MoE keeps per (token, expert) pair: the top-k indices, the
sort permutation, the expert ids (floor_divide) and the inverse permutation (int64 each)."""
MOE_COMBINE_BACKWARD_TEMPORARIES = 3
"""MoE backward starts at the combine (sum over the k experts of the re-ordered, weighted
outputs): the expanded per-pair gradient, the zero-filled gradient of the re-ordering and its
`index_put`, three bf16 [pairs, h] tensors, while every tensor the experts keep is alive."""
GRAD_IN_BYTES_PER_ELEMENT = B
"""The gradient of a layer's output (the residual stream), alive through the layer's backward."""

ULYSSES_ALL_TO_ALL_COPIES = 3
"""verl `all_to_all_tensor`: besides its input, one all-to-all holds the contiguous split copies
of the input, the receive buffers and their concatenation, each the input's size."""

_LAYER_BWD_TEMPORARIES_MLP = 3
"""MLP backward (down_proj, then the gate·up product): the product's gradient and the gate
and up gradients, three bf16 [.., I] tensors, while the product itself has been freed."""
_LAYER_BWD_TEMPORARIES_PLAIN_MLP = 2
"""Plain MLP backward (fc2, then the GELU): the GELU output's gradient and fc1's output
gradient, two bf16 [.., I] tensors, while the GELU output has been freed."""


def _coef(arch: ModelArch) -> FamilyCoefficients:
    return family_coefficients(arch.text_model_type)


def rmsnorm_saved_bytes_per_token(hidden: int) -> int:
    """HF Llama RMSNorm, without the inverse RMS (used by the vision towers)."""
    return RMSNORM_SAVED_BYTES_PER_ELEMENT * hidden


def _q(arch: ModelArch) -> int:
    return arch.num_attention_heads * arch.head_dim


def _kv(arch: ModelArch) -> int:
    return arch.num_kv_heads * arch.head_dim


# --- one decoder layer: what autograd keeps, per sequence of s tokens ------------------------


def num_decoder_norms(arch: ModelArch) -> int:
    """Llama: input and post-attention norms; Gemma 2/3 and GLM-4 add two post-sublayer norms;
    Phi-2 has one; OLMo2 two post-norms."""
    return len(arch.layer_norm_names)


def is_layer_norm(arch: ModelArch) -> bool:
    """LayerNorm (`native_layer_norm`: GPT-NeoX, Phi-2, StarCoder2; OLMo-1's parameter-free
    one too) rather than the HF RMSNorm chain of elementwise ops."""
    return arch.norm_type != "rms_norm"


def post_norms_only(arch: ModelArch) -> bool:
    """OLMo2: the norms follow the attention and the MLP (``post_attention_layernorm``,
    ``post_feedforward_layernorm``) and feed residual adds; the linears read the residual stream.
    Source: olmo2/modeling_olmo2.py (Olmo2DecoderLayer)."""
    return all(name.startswith("post_") for name in arch.layer_norm_names)


def has_post_sublayer_norms(arch: ModelArch) -> bool:
    """A norm between a sublayer's output and the residual add (Gemma 2/3, GLM-4, OLMo2): its
    backward runs first and makes the sublayer's output gradient."""
    return arch.sandwich_norm or post_norms_only(arch)


def decoder_norm_saved_bytes_per_token(arch: ModelArch, width: int, rows: int = 1) -> int:
    """One norm over ``rows`` vectors of ``width`` per token (q/k norms: a row per head, or one
    row of the whole projection for OLMo2), without its output and its bf16 input: RMSNorm,
    the fp32 upcast + bf16 cast (Gemma, OLMo2: fp32 normalised value) + inverse RMS; LayerNorm,
    its fp32 mean and rstd (its input is the residual stream, ``residual_inputs_saved``)."""
    if is_layer_norm(arch):
        return LAYER_NORM_STATS_BYTES * rows
    return _coef(arch).norm_saved_bytes_per_element * width * rows + INVERSE_RMS_BYTES * rows


def num_linear_inputs_per_layer(arch: ModelArch) -> int:
    """bf16 [.., h] tensors the layer's first linears keep as their input: the attention's and
    the MLP's (``NORM_OUTPUTS_CONSUMED_PER_LAYER``), one when both read one norm (Phi-2)."""
    shared = arch.parallel_residual and num_decoder_norms(arch) == 1
    return 1 if shared else NORM_OUTPUTS_CONSUMED_PER_LAYER


def num_residual_inputs_saved_per_layer(arch: ModelArch) -> int:
    """Residual-stream tensors a LayerNorm keeps as its input: the layer's input and, with a
    sequential residual, the sum after attention (StarCoder2); with a parallel residual both
    norms read the layer's input (GPT-NeoX, Phi-2). RMSNorm keeps its fp32 copy instead (0).
    Source: gpt_neox/modeling_gpt_neox.py, phi/modeling_phi.py, starcoder2/modeling_starcoder2.py
    (decoder layer forward); derivatives.yaml (native_layer_norm saves input)."""
    if not is_layer_norm(arch):
        return 0
    return 1 if arch.parallel_residual else 2


def norms_saved_bytes_per_token(arch: ModelArch) -> int:
    """The layer's norms, the inputs its linears keep (2h each) and, for LayerNorm, the
    residual-stream inputs the norms keep (2h each)."""
    norms = num_decoder_norms(arch) * decoder_norm_saved_bytes_per_token(arch, arch.hidden_size)
    kept = num_linear_inputs_per_layer(arch) + num_residual_inputs_saved_per_layer(arch)
    return norms + kept * B * arch.hidden_size


def qk_norm_saved_bytes_per_token(arch: ModelArch) -> int:
    """Qwen3/Gemma 3 normalise q and k per head before RoPE, OLMo2 the whole q and k
    projections; RoPE keeps only cos/sin, so the norms' outputs are not kept. LayerNorm q/k
    norms (Phi-2 ``qk_layernorm``) keep their input, the projection's output, as well."""
    if not arch.qk_norm:
        return 0
    d, a, k = arch.head_dim, arch.num_attention_heads, arch.num_kv_heads
    if arch.qk_norm_full_width:
        return (decoder_norm_saved_bytes_per_token(arch, a * d)
                + decoder_norm_saved_bytes_per_token(arch, k * d))
    inputs = B * (a + k) * d if is_layer_norm(arch) else 0
    return (decoder_norm_saved_bytes_per_token(arch, d, a)
            + decoder_norm_saved_bytes_per_token(arch, d, k) + inputs)


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
    return B * (_q(arch) + _kv(arch))


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
    return ULYSSES_ALL_TO_ALL_COPIES * B * _q(arch) * num_sequences * seq_len


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
    q, kv, n_h = _q(arch), _kv(arch), arch.num_attention_heads
    if attention == AttentionImpl.sdpa:
        lse = F * n_h * math.ceil(s / MEM_EFFICIENT_LSE_ALIGNMENT) * MEM_EFFICIENT_LSE_ALIGNMENT
        return 4 * B * q * s + lse + sdpa_bias_bytes_per_sequence(arch, s) + fused
    if attention == AttentionImpl.flash_attention_2:
        return (B * q + 2 * B * kv + B * q + F * n_h + B * q + INDEX_BYTES) * s
    return 4 * B * q * s + _coef(arch).eager_score_saved_bytes * n_h * s * s + fused


def mlp_saved_bytes_per_token(arch: ModelArch) -> int:
    """Gated MLP (SwiGLU, Gemma's GELU-tanh): gate output (activation backward), activation
    and up outputs (product backward), the product (down_proj input): 4 × 2I. The input is the
    norm output (`norms_saved_bytes_per_token`).

    MoE (transformers 5.23 grouped-mm experts, `integrations/moe.py`): per (token, expert)
    pair the gathered input (2h), the fused gate_up output (2·2I_moe), activation and product
    (2I_moe each) and the down output kept for the routing-weight multiply (2h), the bf16
    routing weight and four int64 routing indices; per token the fp32 router softmax over the
    experts. Shared experts are a dense gated MLP.

    Plain MLP (GPT-NeoX, Phi-2, StarCoder2: fc1 → GELU → fc2): fc1's output (the GELU's input)
    and the GELU's output (fc2's input): 2 × 2I. Source: gpt_neox/modeling_gpt_neox.py
    (GPTNeoXMLP), phi/modeling_phi.py (PhiMLP), starcoder2/modeling_starcoder2.py.
    """
    h = arch.hidden_size
    if not arch.num_experts:
        return (4 if arch.mlp_gated else 2) * B * arch.intermediate_size
    k, i_moe = arch.num_experts_per_tok, arch.moe_intermediate_size
    per_pair = B * h + 2 * B * i_moe + B * i_moe + B * i_moe + B * h + B + MOE_ROUTING_INDEX_TENSORS * INDEX_BYTES
    shared = arch.shared_expert_intermediate_size or arch.num_shared_experts * i_moe
    return k * per_pair + F * arch.num_experts + 4 * B * shared


def decoder_layer_saved_bytes_per_sequence(
    arch: ModelArch, attention: AttentionImpl, seq_len: int, lora_per_token: int = 0, sequence_parallel_size: int = 1,
) -> int:
    """All bytes one decoder layer keeps for backward for one sequence (no checkpointing);
    ``seq_len`` is this GPU's share of it under sequence parallelism."""
    per_token = norms_saved_bytes_per_token(arch) + qk_norm_saved_bytes_per_token(arch) + mlp_saved_bytes_per_token(arch) + lora_per_token
    return per_token * seq_len + attention_core_saved_bytes_per_sequence(arch, attention, seq_len, sequence_parallel_size)


def decoder_layer_constant_bytes(arch: ModelArch, attention: AttentionImpl) -> int:
    """Per layer and per forward, whatever the batch: kernel rng state, varlen offsets,
    Gemma's fp32 ``1 + w`` norm weights, the MoE expert offsets."""
    kernel = {AttentionImpl.sdpa: SDPA_RNG_STATE_BYTES, AttentionImpl.flash_attention_2: FLASH_VARLEN_CONSTANT_BYTES}
    per_norm = _coef(arch).norm_weight_copy_bytes_per_element
    norms = num_decoder_norms(arch) * per_norm * arch.hidden_size + (2 * per_norm * arch.head_dim if arch.qk_norm else 0)
    moe = SMALL_TENSOR_BYTES if arch.num_experts else 0
    return kernel.get(attention, 0) + norms + moe


def activation_model_warnings(arch: ModelArch) -> tuple[str, ...]:
    """One line per approximation the activation terms make for ``arch`` (for the plan's
    warnings): a hybrid's Gated DeltaNet layers are planned as full-attention layers."""
    n = arch.num_linear_attention_layers
    if not n:
        return ()
    return (f"{arch.name}: activations of its {n} Gated DeltaNet (linear-attention) layers are "
            "planned as full-attention layers of the same width; the conv and chunked "
            "recurrent-state tensors those layers keep (transformers qwen3_next/qwen3_5 "
            "modeling, fla chunk_gated_delta_rule) are not modelled or traced",)


# --- the whole model -----------------------------------------------------------------------


def rotary_table_bytes(arch: ModelArch, seq_len: int) -> int:
    """cos and sin, [1, s, d_rot] bf16 each, computed once per forward and kept by RoPE's
    multiplies; d_rot = d · partial_rotary_factor (GPT-NeoX 0.25, Phi-2/GLM 0.5). OLMo2 keeps
    them in fp32 (its coefficient counts two bf16 pairs). Source: gpt_neox/modeling_gpt_neox.py
    (GPTNeoXRotaryEmbedding dim = rotary_ndims), olmo2/modeling_olmo2.py."""
    rotary_dim = int(arch.head_dim * arch.partial_rotary_factor)
    return _coef(arch).rotary_tables * 2 * B * seq_len * rotary_dim


def head_saved_bytes_per_token(arch: ModelArch) -> int:
    """The final norm (without its output: the LM head keeps only the completion rows of it,
    counted with the logits, `logits.lm_head_input_bytes`); a LayerNorm keeps its input too,
    the last layer's output."""
    residual = B * arch.hidden_size if is_layer_norm(arch) else 0
    return decoder_norm_saved_bytes_per_token(arch, arch.hidden_size) + residual


def head_constant_bytes(arch: ModelArch) -> int:
    return _coef(arch).norm_weight_copy_bytes_per_element * arch.hidden_size


def checkpointed_layer_input_bytes_per_token(arch: ModelArch) -> int:
    """With gradient checkpointing each decoder layer keeps only its bf16 input (2h).

    Source: Korthikanti et al. 2022 §5 (full recompute: 2sbh per layer); transformers
    `GradientCheckpointingLayer` checkpoints every decoder layer's forward.
    """
    return B * arch.hidden_size


def checkpointed_input_reused_bytes_per_token(arch: ModelArch) -> int:
    """Bytes per token of a recomputed layer's saved tensors that are its checkpointed input
    itself: a LayerNorm (or OLMo2's q/k/v projections, after no norm) saves the layer's input,
    the storage the checkpoint already holds, so the recomputation does not add it again."""
    return B * arch.hidden_size if is_layer_norm(arch) or post_norms_only(arch) else 0


def num_mask_kinds(arch: ModelArch) -> int:
    """Full-attention and sliding-window layers get different masks (Gemma, sliding Qwen)."""
    return 2 if arch.num_sliding_window_layers and arch.num_sliding_window_layers < arch.num_layers else 1


def checkpoint_shared_input_bytes(arch: ModelArch, attention: AttentionImpl, num_sequences: int, seq_len: int) -> int:
    """Inputs every checkpointed layer holds besides its hidden states: the position ids
    (int64 [s]) and the mask transformers built — sdpa a bool [b, 1, s, s], eager a bf16 one,
    flash-attention the bool [b, s] padding mask — one per mask kind."""
    b, s = num_sequences, seq_len
    mask = {AttentionImpl.sdpa: b * s * s, AttentionImpl.eager: B * b * s * s}.get(attention, b * s)
    return INDEX_BYTES * s + num_mask_kinds(arch) * mask


def training_saved_activation_bytes(
    arch: ModelArch, attention: AttentionImpl, checkpointing: bool, num_sequences: int, seq_len: int,
    lora_per_token: int = 0, sequence_parallel_size: int = 1,
) -> int:
    """Activations alive at the end of the training forward of one micro-batch, except the
    logits and the LM head's input (`logits.py`): every layer's saved tensors (with LoRA, the
    adapter branches' ``lora_per_token`` too) or, with checkpointing, every layer's input and
    the shared checkpoint inputs; the rotary tables; the final norm."""
    b, s, n = num_sequences, seq_len, arch.num_layers
    if checkpointing:
        layers = n * b * s * checkpointed_layer_input_bytes_per_token(arch) + checkpoint_shared_input_bytes(arch, attention, b, s)
    else:
        layers = n * (b * decoder_layer_saved_bytes_per_sequence(arch, attention, s, lora_per_token, sequence_parallel_size)
                      + decoder_layer_constant_bytes(arch, attention))
    return layers + rotary_table_bytes(arch, s) + b * s * head_saved_bytes_per_token(arch) + head_constant_bytes(arch)


# --- backward ------------------------------------------------------------------------------


def norm_backward_peak_bytes_per_token(arch: ModelArch) -> int:
    """One RMSNorm's backward at its peak (`FamilyCoefficients.norm_backward_peak_bytes_per_element`),
    or a LayerNorm's (`LAYER_NORM_BACKWARD_PEAK_BYTES_PER_ELEMENT`)."""
    if is_layer_norm(arch):
        return LAYER_NORM_BACKWARD_PEAK_BYTES_PER_ELEMENT * arch.hidden_size
    return _coef(arch).norm_backward_peak_bytes_per_element * arch.hidden_size


def layer_backward_peak_bytes_per_sequence(
    arch: ModelArch, attention: AttentionImpl, seq_len: int, lora_per_token: int = 0, sequence_parallel_size: int = 1,
) -> int:
    """The most one decoder layer holds during its own backward (its remaining saved tensors
    and the temporaries), with the incoming residual gradient (2h), as the largest of:

    - MLP: the product is freed after down_proj's backward; its gradient and the gate/up
      gradients (3 × 2I) are alive while everything else of the layer is still kept.
    - the norm before the MLP: the MLP's tensors and that norm's are freed except its fp32
      input; the norm's backward temporaries (`norm_backward_peak_bytes_per_token`).
    - Gemma's post-feed-forward norm, whose backward comes first, while all of the layer is kept.
    - attention: the input norm's tensors and the attention's kept tensors with the kernel's
      gradients (sdpa/flash: dq, dk, dv and the output gradient; eager: the fp32 gradient of
      the probabilities and of the scores).
    """
    h, s, sp = arch.hidden_size, seq_len, sequence_parallel_size
    saved = decoder_layer_saved_bytes_per_sequence(arch, attention, s, lora_per_token, sp)
    grad_in = GRAD_IN_BYTES_PER_ELEMENT * h * s
    # Gemma, OLMo2: the post-sublayer norm's backward makes the sublayer's output gradient, besides the residual's.
    post = has_post_sublayer_norms(arch)
    sublayer_grad_in = 2 * grad_in if post else grad_in
    norm_backward = norm_backward_peak_bytes_per_token(arch) * s
    post_mlp_norm = decoder_norm_saved_bytes_per_token(arch, h) * s if post else 0
    mlp_kept = mlp_saved_bytes_per_token(arch) * s
    mlp = saved - post_mlp_norm - mlp_kept + _mlp_backward_peak_bytes_per_token(arch) * s + sublayer_grad_in
    norm_part = (decoder_norm_saved_bytes_per_token(arch, h) + B * h) * s
    pre_mlp_norm = saved - post_mlp_norm - mlp_kept - norm_part + norm_backward + grad_in
    attn = norm_part + qk_norm_saved_bytes_per_token(arch) * s + _attention_backward_bytes_per_sequence(arch, attention, s, sp) + sublayer_grad_in
    moments = [mlp, pre_mlp_norm, attn]
    if post:
        moments.append(saved - post_mlp_norm + norm_backward + grad_in)
    return max(moments)


def _mlp_backward_peak_bytes_per_token(arch: ModelArch) -> int:
    """The MLP's part at its backward peak: dense, its kept tensors minus the product plus the
    product's, gate's and up's gradients; MoE, all its kept tensors plus the combine's backward
    (`MOE_COMBINE_BACKWARD_TEMPORARIES`)."""
    if not arch.num_experts:
        i = arch.intermediate_size
        temporaries = _LAYER_BWD_TEMPORARIES_MLP if arch.mlp_gated else _LAYER_BWD_TEMPORARIES_PLAIN_MLP
        return mlp_saved_bytes_per_token(arch) - B * i + temporaries * B * i
    return mlp_saved_bytes_per_token(arch) + MOE_COMBINE_BACKWARD_TEMPORARIES * arch.num_experts_per_tok * B * arch.hidden_size


def _attention_backward_bytes_per_sequence(arch: ModelArch, attention: AttentionImpl, seq_len: int, sp: int = 1) -> int:
    kept = attention_core_saved_bytes_per_sequence(arch, attention, seq_len, sp)
    arch, s = ulysses_attention_view(arch, seq_len, sp)
    q, kv, n_h = _q(arch), _kv(arch), arch.num_attention_heads
    if attention == AttentionImpl.eager:
        kept_scores = (_coef(arch).eager_score_saved_bytes - B) * n_h * s * s
        return (2 * B * q + B * q) * s + kept_scores + 2 * F * n_h * s * s
    kv_width = kv if attention == AttentionImpl.flash_attention_2 else q
    return kept + (B * q + 2 * B * kv_width + B * q) * s


TIED_GRADIENT_COPIES_AT_EMBEDDING_BACKWARD = 2
"""At the very end of backward, with tied embeddings: the LM head's weight gradient and the
embedding's, summed out of place into ``.grad``; every activation has been freed by then."""


def tied_head_gradient_bytes(arch: ModelArch) -> int:
    """With tied embeddings the LM head's weight gradient (bf16 V×h) is not accumulated into
    ``.grad`` when the head's backward makes it: autograd sums it with the embedding's
    gradient, which comes last, so it is an extra V×h through the whole backward of the
    decoder (torch/csrc/autograd/input_buffer.cpp accumulates a view out of place)."""
    return B * arch.vocab_size * arch.hidden_size if arch.tie_word_embeddings else 0


def backward_transient_bytes(
    arch: ModelArch, attention: AttentionImpl, checkpointing: bool, num_sequences: int, seq_len: int,
    lora_per_token: int = 0, sequence_parallel_size: int = 1,
) -> int:
    """How far backward rises above `training_saved_activation_bytes`, at its largest of:

    - the final norm's backward (the final norm's other tensors freed);
    - the top decoder layer's backward (`layer_backward_peak_bytes_per_sequence`): without
      checkpointing it replaces that layer's kept tensors; with checkpointing the layer is
      first recomputed (torch.utils.checkpoint, non-reentrant, recomputing one layer at a time),
      so its whole backward peak comes on top of the kept layer inputs.
    Lower layers hold less (the layers above have been freed). With tied embeddings the LM
    head's weight gradient waits for the embedding's (`tied_head_gradient_bytes`) through both,
    and the embedding's backward ends with both gradients alive.
    Source: the autograd order of the traced step (`oomless trace`).
    """
    b, s, sp = num_sequences, seq_len, sequence_parallel_size
    saved = training_saved_activation_bytes(arch, attention, checkpointing, b, s, lora_per_token, sp)
    tied = 0 if lora_per_token else tied_head_gradient_bytes(arch)  # LoRA: the embeddings are frozen
    without_head = saved - b * s * head_saved_bytes_per_token(arch) + tied
    final_norm = without_head + b * s * norm_backward_peak_bytes_per_token(arch)
    layer = b * layer_backward_peak_bytes_per_sequence(arch, attention, s, lora_per_token, sp)
    if checkpointing:
        reused = b * s * checkpointed_input_reused_bytes_per_token(arch)
        top_layer = without_head + layer - reused + decoder_layer_constant_bytes(arch, attention)
    else:
        top_layer = without_head - b * decoder_layer_saved_bytes_per_sequence(arch, attention, s, lora_per_token, sp) + layer
    embedding = TIED_GRADIENT_COPIES_AT_EMBEDDING_BACKWARD * tied
    return max(final_norm, top_layer, embedding, saved) - saved


# --- no-grad forwards ------------------------------------------------------------------------


def inference_layer_peak_bytes_per_token(arch: ModelArch, tensor_parallel_size: int = 1) -> int:
    """Peak transient bytes per token inside one decoder layer under no_grad.

    The residual stream and the layer input (2h each) are alive throughout; on top, the
    larger of the fp32 RMSNorm upcast (4h + 4h), the attention block (q/k/v outputs + attention
    output: 2(q + 2k) + 2q) and the MLP (gate and up outputs + activation: 3 × 2I).
    Tensor parallelism splits heads and I, not h. Source: HF modeling_llama forward; vLLM
    `MergedColumnParallelLinear` + `SiluAndMul` hold the same three I-sized tensors.
    """
    t = tensor_parallel_size
    h, q = arch.hidden_size, _q(arch)
    kv = _kv(arch)
    inter = (
        arch.num_experts_per_tok * arch.moe_intermediate_size
        + (arch.shared_expert_intermediate_size or arch.num_shared_experts * arch.moe_intermediate_size)
        if arch.num_experts
        else arch.intermediate_size
    )
    norm = 2 * F * h
    attn = (B * (q + 2 * kv) + B * q) // t
    mlp = (3 if arch.mlp_gated else 2) * B * inter // t  # plain: fc1 output + GELU output
    return 2 * B * h + max(norm, attn, mlp)


def inference_forward_peak_bytes(arch: ModelArch, num_tokens: int, tensor_parallel_size: int = 1) -> int:
    """Activation peak of a no-grad forward over ``num_tokens`` tokens (excluding logits and
    any attention mask)."""
    return num_tokens * inference_layer_peak_bytes_per_token(arch, tensor_parallel_size)


def dense_attention_mask_bytes(attention: AttentionImpl, num_sequences: int, seq_len: int) -> int:
    """Mask bytes alive while a layer attends in a no-grad forward: transformers' bool
    [b, 1, s, s] mask for sdpa (1 B) and the bf16 additive mask PyTorch converts it to in the
    call (2 B); eager's bf16 mask; flash-attention takes the padding as cu_seqlens.
    Source: transformers `masking_utils.sdpa_mask`/`eager_mask`; PyTorch
    `convert_boolean_attn_mask`. Assumes: prompts are padded (batched GRPO) and s a multiple
    of 16 (else the converted mask is padded per head, `sdpa_bias_bytes_per_sequence`)."""
    elements = num_sequences * seq_len * seq_len
    return {AttentionImpl.sdpa: (1 + B) * elements, AttentionImpl.eager: B * elements}.get(attention, 0)


def lora_saved_bytes_per_token(in_features_of_targets: list[int], rank: int, dropout: bool) -> int:
    """What PEFT's LoRA branch saves per token, summed over a layer's adapted linears.

    PEFT casts the layer input to the adapters' fp32 (`_cast_input_dtype`), applies dropout
    (a bool mask is saved when p > 0) and saves the fp32 input of lora_A (4·d_in) and of
    lora_B (4·r); the sum with the base output saves nothing.
    Source: peft/tuners/lora/layer.py (`Linear.forward`, autocast_adapter_dtype=True).
    Not traced (the tracer runs full fine-tuning).
    """
    mask = 1 if dropout else 0
    return sum((F + mask) * d_in + F * rank for d_in in in_features_of_targets)
