"""Liger's model kernels in the activation model (`RunSpec.liger_kernels`): what its RMSNorm
and SwiGLU autograd Functions keep for backward and hold during it, in place of the Hugging
Face modules' chains of elementwise ops (`activation_norms.py`, `activation_mlp.py`).

TRL/ms-swift (`use_liger_kernel`: transformers' Trainer) and verl (`model.use_liger`) call
``_apply_liger_kernel_to_instance(model)`` on the built model; for the model types below it
runs ``apply_liger_kernel_to_<type>(rope=True, rms_norm=True, swiglu=True, model=model)``,
which rebinds every decoder layer's ``input_layernorm``, ``post_attention_layernorm`` and the
final ``norm`` to ``LigerRMSNorm.forward`` (``casting_mode="llama"``, ``in_place=True``), the
MLP's forward to ``LigerSwiGLUMLP.forward`` (``down_proj(LigerSiLUMulFunction(gate_proj(x),
up_proj(x)))``) and ``apply_rotary_pos_emb`` to ``liger_rotary_pos_emb``.

Source: liger-kernel 0.6.4 and 0.8.5 (the same autograd Functions in both):
`liger_kernel/transformers/monkey_patch.py` (``apply_liger_kernel_to_llama|mistral|qwen2|qwen3``,
``_patch_rms_norm_module``, ``_patch_swiglu_module``), `transformers/rms_norm.py`,
`transformers/swiglu.py`, `ops/rms_norm.py` (``LigerRMSNormFunction``), `ops/swiglu.py`
(``LigerSiLUMulFunction``), `ops/rope.py` (``LigerRopeFunction``).

Assumes: bf16 activations; the norms' inputs contiguous (``ensure_contiguous`` copies
nothing). RoPE changes nothing planned: ``LigerRopeFunction`` rotates q and k in place in the
projections' outputs and saves (cos, sin), as HF's ``q * cos + rotate_half(q) * sin`` keeps
only cos and sin (its results replace the projections' outputs, which are freed); neither
model counts the forward temporaries of the rotation or the backward's copies of dq/dk.
Known limitations: liger-kernel 0.8.5 also rebinds Qwen3's per-head ``q_norm``/``k_norm`` on
the instance, 0.6.4 does not: they stay planned as HF's (conservative by (6 − 2)·d bytes per
head row). ``rms_norm_backward``'s fp32 ``[SM count, h]`` weight-gradient buffer (under 2 MiB)
is not counted. Gemma (``LigerRMSNormForGemma*``: fp32 casting, no in-place backward;
GEGLU), OLMo2, GLM-4, Granite, MoE and other families are planned as without Liger.
"""

from __future__ import annotations

from ..catalog.models import ModelArch
from .activation_units import B, F

LIGER_LLAMA_STYLE_MODEL_TYPES = frozenset({"llama", "mistral", "qwen2", "qwen3"})
"""Model types whose ``apply_liger_kernel_to_<type>`` patches an existing instance with the
default ``LigerRMSNorm`` (llama casting, in-place backward) and ``LigerSwiGLUMLP`` (Qwen2.5
configs are ``qwen2``). Source: liger-kernel 0.6.4/0.8.5 `transformers/monkey_patch.py`
(``MODEL_TYPE_TO_APPLY_LIGER_FN`` and the functions it names)."""

LIGER_RMSNORM_SAVED_BYTES_PER_ELEMENT = B
"""``LigerRMSNormFunction.forward`` saves (X, W, RSTD): X is its bf16 input itself (no fp32
upcast copy, no normalised copy: the kernel recomputes X·rstd in backward), W a parameter."""
LIGER_RSTD_BYTES = F
"""RSTD: one fp32 per row (``rstd_dtype`` is fp32 in the llama casting mode)."""
LIGER_RMSNORM_BACKWARD_TEMPORARY_BYTES_PER_ELEMENT = 0
"""``rms_norm_backward`` with ``in_place=True`` writes dX into dY (``dX = dY``): no [.., h]
tensor besides the saved X; the per-call fp32 [SM count, h] dW buffer is not per token."""
LIGER_SWIGLU_KEPT_TENSORS = 3
"""``LigerSiLUMulFunction`` saves a (gate_proj's output) and b (up_proj's output), recomputing
silu(a) in backward; its output c = silu(a)·b is down_proj's input, which down_proj keeps:
3 bf16 [.., I] tensors where HF's MLP keeps 4 (gate, silu output, up, product)."""
LIGER_SWIGLU_BACKWARD_TEMPORARIES = 1
"""``swiglu_backward`` stores da and db into a's and b's storage (``tl.store(a_ptr, da_row)``):
the only new [.., I] tensor is dc, the product's gradient from down_proj's backward."""


def liger_patches_layers(arch: ModelArch, liger_kernels: bool) -> bool:
    """Whether Liger's RMSNorm and SwiGLU replace ``arch``'s: the run applies Liger and the
    family is one Liger patches with its default kernels (`LIGER_LLAMA_STYLE_MODEL_TYPES`), in
    the structure the terms below assume (RMSNorm pre-norms, a dense gated MLP)."""
    return (
        liger_kernels
        and arch.text_model_type in LIGER_LLAMA_STYLE_MODEL_TYPES
        and arch.norm_type == "rms_norm"
        and arch.mlp_gated
        and not arch.num_experts
        and not arch.sandwich_norm
    )


def liger_norm_saved_bytes_per_token(arch: ModelArch) -> int:
    """One hidden-width Liger RMSNorm per token: its bf16 input (2h) and its fp32 rstd (4).
    The input is a residual-stream tensor nothing else keeps (the residual adds save nothing),
    except the layer's checkpointed input (`liger_checkpointed_input_reused_bytes_per_token`)."""
    return LIGER_RMSNORM_SAVED_BYTES_PER_ELEMENT * arch.hidden_size + LIGER_RSTD_BYTES


def liger_norm_backward_peak_bytes_per_token(arch: ModelArch) -> int:
    """A Liger RMSNorm at its backward: its saved input, still held, and no temporaries
    (`LIGER_RMSNORM_BACKWARD_TEMPORARY_BYTES_PER_ELEMENT`)."""
    return (LIGER_RMSNORM_SAVED_BYTES_PER_ELEMENT + LIGER_RMSNORM_BACKWARD_TEMPORARY_BYTES_PER_ELEMENT) * arch.hidden_size


def liger_checkpointed_input_reused_bytes_per_token(arch: ModelArch) -> int:
    """A recomputed layer's input norm saves the layer's input, the storage the checkpoint
    already holds (non-reentrant checkpointing recomputes from the saved inputs themselves)."""
    return LIGER_RMSNORM_SAVED_BYTES_PER_ELEMENT * arch.hidden_size


def liger_mlp_saved_bytes_per_token(arch: ModelArch) -> int:
    """Liger's SwiGLU MLP: a, b and the product (`LIGER_SWIGLU_KEPT_TENSORS` × 2I)."""
    return LIGER_SWIGLU_KEPT_TENSORS * B * arch.intermediate_size


def liger_mlp_backward_peak_bytes_per_token(arch: ModelArch) -> int:
    """Liger's SwiGLU at its backward: a and b (then their gradients, in place) and dc, the
    product freed with down_proj's backward."""
    return liger_mlp_saved_bytes_per_token(arch) - B * arch.intermediate_size + LIGER_SWIGLU_BACKWARD_TEMPORARIES * B * arch.intermediate_size
