"""Activation memory of a decoder-only transformer in training and in no-grad forwards.

Bytes per token per decoder layer are derived tensor by tensor from what autograd saves in
the Hugging Face Llama/Qwen2 decoder layer (transformers `models/llama/modeling_llama.py`,
`models/qwen2/modeling_qwen2.py`), in the style of Korthikanti et al. 2022 (arXiv 2205.05198,
§4.1, which gives sbh(34 + 5as/h) for GPT-style layers with dropout). Symbols: h hidden,
q = heads·head_dim, k = kv_heads·head_dim, I intermediate, n_h heads, s sequence length.

Assumes: bf16 activations; no dropout (attention_dropout 0 in these models); RMSNorm as HF
writes it (upcast to fp32); SwiGLU MLP; whole sequences padded to the longest (worst case).
"""

from __future__ import annotations

from ..catalog.models import ModelArch
from ..spec.run import AttentionImpl
from . import constants as C

B = C.BF16_BYTES
F = C.FP32_BYTES

RMSNORM_SAVED_BYTES_PER_ELEMENT = F + B
"""HF RMSNorm saves its fp32 upcast input (for pow/mul backward) and the bf16 normalised
value (for the weight multiply): 4 + 2 bytes per hidden element."""


def rmsnorm_saved_bytes_per_token(hidden: int) -> int:
    return RMSNORM_SAVED_BYTES_PER_ELEMENT * hidden


def attention_saved_bytes_per_token(arch: ModelArch, attention: AttentionImpl, seq_len: int) -> int:
    """Bytes autograd keeps per token for one self-attention block (after its norm).

    - Input of q/k/v projections (the norm's bf16 output): 2h.
    - sdpa: transformers expands K/V to all heads (`repeat_kv`) when a padding mask is given,
      and SDPA's memory-efficient kernel saves q, k, v, out and fp32 log-sum-exp:
      2q·4 + 4·n_h. Source: transformers `integrations/sdpa_attention.py`,
      PyTorch `_scaled_dot_product_efficient_attention` backward signature.
    - flash_attention_2: no expansion: 2q (q) + 2k·2 (k, v) + 2q (out) + 4·n_h (lse).
      Source: flash-attn `FlashAttnFunc.forward` save_for_backward.
    - eager: q and expanded k, fp32 softmax output and its bf16 copy (s values per head),
      expanded v: 2q·3 + (4 + 2)·n_h·s. Source: transformers `eager_attention_forward`.
    - o_proj input (contiguous reshape of the attention output): 2q.
    No s×s term except eager: flash and memory-efficient kernels never store scores.
    """
    h, q = arch.hidden_size, arch.num_attention_heads * arch.head_dim
    kv = arch.num_kv_heads * arch.head_dim
    n_h = arch.num_attention_heads
    proj_input = B * h
    if attention == AttentionImpl.sdpa:
        core = 4 * B * q + F * n_h
    elif attention == AttentionImpl.flash_attention_2:
        core = B * q + 2 * B * kv + B * q + F * n_h
    else:
        core = 3 * B * q + (F + B) * n_h * seq_len
    o_proj_input = B * q
    return proj_input + core + o_proj_input


def mlp_saved_bytes_per_token(arch: ModelArch) -> int:
    """SwiGLU MLP: input 2h (shared by gate/up), gate output 2I (SiLU backward), SiLU output
    2I and up output 2I (product backward), product 2I (down_proj input) = 2h + 8I.

    MoE layers: each token passes top-k routed experts (and shared experts), so the I-terms
    scale with k·I_moe + I_shared; router logits fp32 per expert. Source: transformers
    `models/qwen3_moe/modeling_qwen3_moe.py`.
    """
    h = arch.hidden_size
    if arch.num_experts:
        routed = arch.num_experts_per_tok * arch.moe_intermediate_size
        shared = arch.shared_expert_intermediate_size or arch.num_shared_experts * arch.moe_intermediate_size
        router = F * arch.num_experts
        return B * h + 4 * B * (routed + shared) + router
    return B * h + 4 * B * arch.intermediate_size


def decoder_layer_saved_bytes_per_token(arch: ModelArch, attention: AttentionImpl, seq_len: int) -> int:
    """All bytes one decoder layer saves for backward, per token, without checkpointing:
    two RMSNorms + attention block + MLP block (residual adds save nothing)."""
    norms = 2 * rmsnorm_saved_bytes_per_token(arch.hidden_size)
    return norms + attention_saved_bytes_per_token(arch, attention, seq_len) + mlp_saved_bytes_per_token(arch)


def checkpointed_layer_input_bytes_per_token(arch: ModelArch) -> int:
    """With gradient checkpointing each decoder layer keeps only its bf16 input (2h).

    Source: Korthikanti et al. 2022 §5 (full recompute: 2sbh per layer); transformers
    `GradientCheckpointingLayer` checkpoints every decoder layer.
    """
    return B * arch.hidden_size


def head_saved_bytes_per_token(arch: ModelArch) -> int:
    """Final RMSNorm (6h) + lm_head input (2h). TRL slices the completion positions with
    `logits_to_keep`, but the slice is a view whose base (all tokens) stays alive."""
    return rmsnorm_saved_bytes_per_token(arch.hidden_size) + B * arch.hidden_size


def training_saved_activation_bytes(
    arch: ModelArch, attention: AttentionImpl, checkpointing: bool, num_sequences: int, seq_len: int,
    lora_per_token: int = 0,
) -> int:
    """Activations alive at the end of the forward pass of one micro-batch (excluding logits):
    every layer's saved tensors (with LoRA, the adapter branches' ``lora_per_token`` too), or
    only layer inputs under checkpointing, plus the head and the dense attention mask."""
    tokens = num_sequences * seq_len
    per_layer = (
        checkpointed_layer_input_bytes_per_token(arch)
        if checkpointing
        else decoder_layer_saved_bytes_per_token(arch, attention, seq_len) + lora_per_token
    )
    mask = dense_attention_mask_bytes(attention, num_sequences, seq_len)
    return tokens * (arch.num_layers * per_layer + head_saved_bytes_per_token(arch)) + mask


def backward_transient_bytes(
    arch: ModelArch, attention: AttentionImpl, checkpointing: bool, num_sequences: int, seq_len: int,
    lora_per_token: int = 0,
) -> int:
    """Extra memory while backpropagating through one layer: the gradient flowing in and
    out of the layer (2 × 2h per token) and, with checkpointing, the recomputed layer's
    saved tensors. Source: torch.utils.checkpoint recomputes one layer at a time."""
    tokens = num_sequences * seq_len
    grads = 2 * B * arch.hidden_size
    recompute = decoder_layer_saved_bytes_per_token(arch, attention, seq_len) + lora_per_token if checkpointing else 0
    return tokens * (grads + recompute)


def inference_layer_peak_bytes_per_token(arch: ModelArch, tensor_parallel_size: int = 1) -> int:
    """Peak transient bytes per token inside one decoder layer under no_grad.

    The residual stream and the layer input (2h each) are alive throughout; on top, the
    larger of the fp32 RMSNorm upcast (4h + 4h), the attention block (q/k/v outputs + attention
    output: 2(q + 2k) + 2q) and the MLP (gate and up outputs + activation: 3 × 2I).
    Tensor parallelism splits heads and I, not h. Source: HF modeling_llama forward; vLLM
    `MergedColumnParallelLinear` + `SiluAndMul` hold the same three I-sized tensors.
    """
    t = tensor_parallel_size
    h, q = arch.hidden_size, arch.num_attention_heads * arch.head_dim
    kv = arch.num_kv_heads * arch.head_dim
    inter = (
        arch.num_experts_per_tok * arch.moe_intermediate_size
        + (arch.shared_expert_intermediate_size or arch.num_shared_experts * arch.moe_intermediate_size)
        if arch.num_experts
        else arch.intermediate_size
    )
    norm = 2 * F * h
    attn = (B * (q + 2 * kv) + B * q) // t
    mlp = 3 * B * inter // t
    return 2 * B * h + max(norm, attn, mlp)


def inference_forward_peak_bytes(arch: ModelArch, num_tokens: int, tensor_parallel_size: int = 1) -> int:
    """Activation peak of a no-grad forward over ``num_tokens`` tokens (excluding logits and
    any attention mask)."""
    return num_tokens * inference_layer_peak_bytes_per_token(arch, tensor_parallel_size)


def dense_attention_mask_bytes(attention: AttentionImpl, num_sequences: int, seq_len: int) -> int:
    """The 4-D additive mask [b, 1, s, s] transformers builds in the model dtype for sdpa with
    padding and for eager; one tensor shared by every layer (saved once for backward).
    flash_attention_2 takes the padding as cu_seqlens and has no such mask.
    Source: transformers `modeling_attn_mask_utils._prepare_4d_causal_attention_mask_for_sdpa`
    and `masking_utils` (bf16 min-value mask). Assumes: prompts are padded (batched GRPO)."""
    if attention == AttentionImpl.flash_attention_2:
        return 0
    return num_sequences * seq_len * seq_len * B


def lora_saved_bytes_per_token(in_features_of_targets: list[int], rank: int, dropout: bool) -> int:
    """What PEFT's LoRA branch saves per token, summed over a layer's adapted linears.

    PEFT casts the layer input to the adapters' fp32 (`_cast_input_dtype`), applies dropout
    (a bool mask is saved when p > 0) and saves the fp32 input of lora_A (4·d_in) and of
    lora_B (4·r); the sum with the base output saves nothing.
    Source: peft/tuners/lora/layer.py (`Linear.forward`, autocast_adapter_dtype=True).
    """
    mask = 1 if dropout else 0
    return sum((F + mask) * d_in + F * rank for d_in in in_features_of_targets)
