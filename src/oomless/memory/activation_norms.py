"""Activation terms of a decoder layer's norms: what RMSNorm and LayerNorm keep for backward,
the inputs of the linears that read them, q/k norms, and a norm's backward peak.

Part of the activation model (`activations.py`, whose docstring states the shared sources and
assumptions). Symbols: h hidden, d head_dim.
Source: transformers 5.23 `models/llama/modeling_llama.py` (LlamaRMSNorm), gpt_neox, phi,
starcoder2, olmo2 decoder layers; PyTorch derivatives.yaml (`native_layer_norm`).
"""

from __future__ import annotations

from ..catalog.models import ModelArch
from .activation_liger import liger_norm_backward_peak_bytes_per_token, liger_norm_saved_bytes_per_token, liger_patches_layers
from .activation_units import B, F, coefficients

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


def rmsnorm_saved_bytes_per_token(hidden: int) -> int:
    """HF Llama RMSNorm, without the inverse RMS (used by the vision towers)."""
    return RMSNORM_SAVED_BYTES_PER_ELEMENT * hidden


def num_decoder_norms(arch: ModelArch) -> int:
    """Llama: input and post-attention norms; Gemma 2/3 and GLM-4 add two post-sublayer norms;
    Phi-2 has one; OLMo2 two post-norms."""
    return len(arch.layer_norm_names)


def is_layer_norm(arch: ModelArch) -> bool:
    """LayerNorm (`native_layer_norm`: GPT-NeoX, Phi-2, StarCoder2; OLMo-1's parameter-free
    one too) rather than the HF RMSNorm chain of elementwise ops."""
    return arch.norm_type != "rms_norm"


def layer_norm_input_copy_bytes_per_element(arch: ModelArch) -> int:
    """Bytes per element of the copy a LayerNorm normalises and keeps (OLMo-1: its fp32 upcast,
    4); 0 for ``native_layer_norm`` on the bf16 input. Source: olmo/modeling_olmo.py
    (OlmoLayerNorm: ``F.layer_norm(x.to(torch.float32), ...).to(orig_dtype)``), the traced
    coefficient `FamilyCoefficients.layer_norm_input_copy_bytes_per_element`."""
    return coefficients(arch).layer_norm_input_copy_bytes_per_element if is_layer_norm(arch) else 0


def layer_norm_keeps_residual_input(arch: ModelArch) -> bool:
    """A LayerNorm run on its bf16 input keeps that residual-stream tensor for backward; one
    that normalises an upcast copy keeps the copy instead (`layer_norm_input_copy_bytes_per_element`)."""
    return is_layer_norm(arch) and not layer_norm_input_copy_bytes_per_element(arch)


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
    its fp32 mean and rstd (its input is the residual stream, ``residual_inputs_saved``) and
    the upcast copy it normalises, if it makes one (OLMo-1)."""
    if is_layer_norm(arch):
        return (LAYER_NORM_STATS_BYTES + layer_norm_input_copy_bytes_per_element(arch) * width) * rows
    return coefficients(arch).norm_saved_bytes_per_element * width * rows + INVERSE_RMS_BYTES * rows


def hidden_norm_saved_bytes_per_token(arch: ModelArch, liger_kernels: bool = False) -> int:
    """One hidden-width decoder or final norm (`decoder_norm_saved_bytes_per_token`), or
    Liger's RMSNorm where it replaces it (`activation_liger.liger_norm_saved_bytes_per_token`)."""
    if liger_patches_layers(arch, liger_kernels):
        return liger_norm_saved_bytes_per_token(arch)
    return decoder_norm_saved_bytes_per_token(arch, arch.hidden_size)


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
    if not layer_norm_keeps_residual_input(arch):
        return 0
    return 1 if arch.parallel_residual else 2


def norms_saved_bytes_per_token(arch: ModelArch, liger_kernels: bool = False) -> int:
    """The layer's norms (`hidden_norm_saved_bytes_per_token`), the inputs its linears keep
    (2h each) and, for LayerNorm, the residual-stream inputs the norms keep (2h each)."""
    norms = num_decoder_norms(arch) * hidden_norm_saved_bytes_per_token(arch, liger_kernels)
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


def norm_backward_peak_bytes_per_token(arch: ModelArch, liger_kernels: bool = False) -> int:
    """One RMSNorm's backward at its peak (`FamilyCoefficients.norm_backward_peak_bytes_per_element`;
    Liger's, `activation_liger.liger_norm_backward_peak_bytes_per_token`), or a LayerNorm's
    (`LAYER_NORM_BACKWARD_PEAK_BYTES_PER_ELEMENT`)."""
    if liger_patches_layers(arch, liger_kernels):
        return liger_norm_backward_peak_bytes_per_token(arch)
    if is_layer_norm(arch):
        return LAYER_NORM_BACKWARD_PEAK_BYTES_PER_ELEMENT * arch.hidden_size
    return coefficients(arch).norm_backward_peak_bytes_per_element * arch.hidden_size
