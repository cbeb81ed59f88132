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
With ``liger_kernels`` (`RunSpec.liger_kernels`) Liger's
RMSNorm and SwiGLU replace the HF modules' terms in Llama, Mistral, Qwen2 and Qwen3 layers in
training (`activation_liger.py`, from liger-kernel's autograd Functions; not traced: the tracer
cannot run Triton kernels); no-grad forwards are planned as without it.
Families beyond the Llama layer follow ``ModelArch`` fields, not family names: a plain MLP
(`mlp_gated`), LayerNorm (`norm_type`: input + fp32 mean/rstd), a parallel residual, post-norms
only (OLMo2), q/k norms over the whole projection, a fused q/k/v without GQA; traced on tiny
GPT-NeoX, StarCoder2, Phi-3 and OLMo2 configs (`tests/trace/test_agreement.py`), Phi-2 and OLMo-1
probes (`scripts/calibrate_activations.py`: Phi-2's ``gelu_new`` keeps three more [.., I] tensors,
OLMo-1's LayerNorm its fp32 copy; both traced coefficients). Phi-2's biased LM head: the tracer
adds the bias out of place (`at::linear` does for tensor subclasses such as fake tensors;
`output.add_(bias)` in place on CUDA), with the final norm's whole output still referenced, so
the traced peak sits at that add ~1 % above the plan; on the GPU the head's moment stays below
the division's.
"""

from __future__ import annotations

from ..catalog.models import ModelArch
from ..spec.run import AttentionImpl
from .activation_attention import (  # noqa: F401  (re-exported: planner, tests)
    FLASH_VARLEN_CONSTANT_BYTES, MEM_EFFICIENT_BIAS_ALIGNMENT, MEM_EFFICIENT_LSE_ALIGNMENT, SDPA_RNG_STATE_BYTES,
    ULYSSES_ALL_TO_ALL_COPIES, attention_backward_bytes_per_sequence, attention_core_saved_bytes_per_sequence,
    dense_attention_mask_bytes, fused_qkv_kept_bytes_per_token, sdpa_bias_bytes_per_sequence,
    ulysses_all_to_all_bytes, ulysses_attention_view,
)
from .activation_liger import liger_checkpointed_input_reused_bytes_per_token, liger_patches_layers
from .activation_mlp import (  # noqa: F401  (re-exported)
    GATED_MLP_BACKWARD_TEMPORARIES, MOE_COMBINE_BACKWARD_TEMPORARIES, MOE_ROUTING_INDEX_TENSORS,
    PLAIN_MLP_BACKWARD_TEMPORARIES, lora_saved_bytes_per_token, mlp_activation_saved_bytes_per_token,
    mlp_backward_peak_bytes_per_token, mlp_saved_bytes_per_token, plain_mlp_backward_temporaries_bytes_per_token,
)
from .activation_norms import (  # noqa: F401  (re-exported)
    INVERSE_RMS_BYTES, LAYER_NORM_BACKWARD_PEAK_BYTES_PER_ELEMENT, LAYER_NORM_STATS_BYTES,
    NORM_OUTPUTS_CONSUMED_PER_LAYER, RMSNORM_SAVED_BYTES_PER_ELEMENT, decoder_norm_saved_bytes_per_token,
    has_post_sublayer_norms, is_layer_norm, layer_norm_input_copy_bytes_per_element, layer_norm_keeps_residual_input,
    hidden_norm_saved_bytes_per_token, norm_backward_peak_bytes_per_token, norms_saved_bytes_per_token,
    num_decoder_norms, num_linear_inputs_per_layer, num_residual_inputs_saved_per_layer, post_norms_only,
    qk_norm_saved_bytes_per_token, rmsnorm_saved_bytes_per_token,
)
from .activation_units import (  # noqa: F401  (re-exported)
    B, F, GRAD_IN_BYTES_PER_ELEMENT, INDEX_BYTES, SMALL_TENSOR_BYTES, coefficients, kv_width, query_width,
)

# --- one decoder layer: its components (activation_norms/attention/mlp.py) composed -----------


def decoder_layer_saved_bytes_per_sequence(
    arch: ModelArch, attention: AttentionImpl, seq_len: int, lora_per_token: int = 0, sequence_parallel_size: int = 1,
    liger_kernels: bool = False,
) -> int:
    """All bytes one decoder layer keeps for backward for one sequence (no checkpointing);
    ``seq_len`` is this GPU's share of it under sequence parallelism; ``liger_kernels``: Liger's
    RMSNorm and SwiGLU where they replace the layer's (`activation_liger.py`)."""
    per_token = (norms_saved_bytes_per_token(arch, liger_kernels) + qk_norm_saved_bytes_per_token(arch)
                 + mlp_saved_bytes_per_token(arch, liger_kernels) + lora_per_token)
    return per_token * seq_len + attention_core_saved_bytes_per_sequence(arch, attention, seq_len, sequence_parallel_size)


def decoder_layer_constant_bytes(arch: ModelArch, attention: AttentionImpl) -> int:
    """Per layer and per forward, whatever the batch: kernel rng state, varlen offsets,
    Gemma's fp32 ``1 + w`` norm weights, the MoE expert offsets."""
    kernel = {AttentionImpl.sdpa: SDPA_RNG_STATE_BYTES, AttentionImpl.flash_attention_2: FLASH_VARLEN_CONSTANT_BYTES}
    per_norm = coefficients(arch).norm_weight_copy_bytes_per_element
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
    return coefficients(arch).rotary_tables * 2 * B * seq_len * rotary_dim


def head_saved_bytes_per_token(arch: ModelArch, liger_kernels: bool = False) -> int:
    """The final norm (without its output: the LM head keeps only the completion rows of it,
    counted with the logits, `logits.lm_head_input_bytes`); a LayerNorm on the bf16 stream keeps its input too,
    the last layer's output (so does Liger's RMSNorm, `hidden_norm_saved_bytes_per_token`)."""
    residual = B * arch.hidden_size if layer_norm_keeps_residual_input(arch) else 0
    return hidden_norm_saved_bytes_per_token(arch, liger_kernels) + residual


def head_constant_bytes(arch: ModelArch) -> int:
    return coefficients(arch).norm_weight_copy_bytes_per_element * arch.hidden_size


def checkpointed_layer_input_bytes_per_token(arch: ModelArch) -> int:
    """With gradient checkpointing each decoder layer keeps only its bf16 input (2h).

    Source: Korthikanti et al. 2022 §5 (full recompute: 2sbh per layer); transformers
    `GradientCheckpointingLayer` checkpoints every decoder layer's forward.
    """
    return B * arch.hidden_size


def checkpointed_input_reused_bytes_per_token(arch: ModelArch, liger_kernels: bool = False) -> int:
    """Bytes per token of a recomputed layer's saved tensors that are its checkpointed input
    itself: a LayerNorm on the bf16 stream (or OLMo2's q/k/v projections, after no norm) saves the layer's input
    (OLMo-1's upcast copy is a new tensor), as does Liger's RMSNorm
    (`activation_liger.liger_checkpointed_input_reused_bytes_per_token`),
    the storage the checkpoint already holds, so the recomputation does not add it again."""
    if liger_patches_layers(arch, liger_kernels):
        return liger_checkpointed_input_reused_bytes_per_token(arch)
    return B * arch.hidden_size if layer_norm_keeps_residual_input(arch) or post_norms_only(arch) else 0


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
    lora_per_token: int = 0, sequence_parallel_size: int = 1, liger_kernels: bool = False,
) -> int:
    """Activations alive at the end of the training forward of one micro-batch, except the
    logits and the LM head's input (`logits.py`): every layer's saved tensors (with LoRA, the
    adapter branches' ``lora_per_token`` too) or, with checkpointing, every layer's input and
    the shared checkpoint inputs; the rotary tables; the final norm. ``liger_kernels``: the
    run applies Liger's RMSNorm/SwiGLU/RoPE (`activation_liger.py`)."""
    b, s, n, lk = num_sequences, seq_len, arch.num_layers, liger_kernels
    if checkpointing:
        layers = n * b * s * checkpointed_layer_input_bytes_per_token(arch) + checkpoint_shared_input_bytes(arch, attention, b, s)
    else:
        layers = n * (b * decoder_layer_saved_bytes_per_sequence(arch, attention, s, lora_per_token, sequence_parallel_size, lk)
                      + decoder_layer_constant_bytes(arch, attention))
    return layers + rotary_table_bytes(arch, s) + b * s * head_saved_bytes_per_token(arch, lk) + head_constant_bytes(arch)


# --- backward ------------------------------------------------------------------------------


def layer_backward_peak_bytes_per_sequence(
    arch: ModelArch, attention: AttentionImpl, seq_len: int, lora_per_token: int = 0, sequence_parallel_size: int = 1,
    liger_kernels: bool = False,
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
    h, s, sp, lk = arch.hidden_size, seq_len, sequence_parallel_size, liger_kernels
    saved = decoder_layer_saved_bytes_per_sequence(arch, attention, s, lora_per_token, sp, lk)
    grad_in = GRAD_IN_BYTES_PER_ELEMENT * h * s
    # Gemma, OLMo2: the post-sublayer norm's backward makes the sublayer's output gradient, besides the residual's.
    post = has_post_sublayer_norms(arch)
    sublayer_grad_in = 2 * grad_in if post else grad_in
    norm_backward = norm_backward_peak_bytes_per_token(arch, lk) * s
    post_mlp_norm = decoder_norm_saved_bytes_per_token(arch, h) * s if post else 0
    mlp_kept = mlp_saved_bytes_per_token(arch, lk) * s
    mlp = saved - post_mlp_norm - mlp_kept + mlp_backward_peak_bytes_per_token(arch, lk) * s + sublayer_grad_in
    norm_part = (hidden_norm_saved_bytes_per_token(arch, lk) + B * h) * s
    pre_mlp_norm = saved - post_mlp_norm - mlp_kept - norm_part + norm_backward + grad_in
    attn = norm_part + qk_norm_saved_bytes_per_token(arch) * s + attention_backward_bytes_per_sequence(arch, attention, s, sp) + sublayer_grad_in
    moments = [mlp, pre_mlp_norm, attn]
    if post:
        moments.append(saved - post_mlp_norm + norm_backward + grad_in)
    return max(moments)


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
    lora_per_token: int = 0, sequence_parallel_size: int = 1, liger_kernels: bool = False,
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
    b, s, sp, lk = num_sequences, seq_len, sequence_parallel_size, liger_kernels
    saved = training_saved_activation_bytes(arch, attention, checkpointing, b, s, lora_per_token, sp, lk)
    tied = 0 if lora_per_token else tied_head_gradient_bytes(arch)  # LoRA: the embeddings are frozen
    without_head = saved - b * s * head_saved_bytes_per_token(arch, lk) + tied
    final_norm = without_head + b * s * norm_backward_peak_bytes_per_token(arch, lk)
    layer = b * layer_backward_peak_bytes_per_sequence(arch, attention, s, lora_per_token, sp, lk)
    if checkpointing:
        reused = b * s * checkpointed_input_reused_bytes_per_token(arch, lk)
        top_layer = without_head + layer - reused + decoder_layer_constant_bytes(arch, attention)
    else:
        top_layer = without_head - b * decoder_layer_saved_bytes_per_sequence(arch, attention, s, lora_per_token, sp, lk) + layer
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
    h, q = arch.hidden_size, query_width(arch)
    kv = kv_width(arch)
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
