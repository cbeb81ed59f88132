"""Activation terms of the MLP: dense gated (SwiGLU), plain (fc1 → GELU → fc2), MoE experts
and LoRA's adapter branches, and the MLP's backward peak.

Part of the activation model (`activations.py`, whose docstring states the shared sources and
assumptions). Symbols: h hidden, I intermediate, k experts per token.
"""

from __future__ import annotations

from ..catalog.models import ModelArch
from .activation_liger import liger_mlp_backward_peak_bytes_per_token, liger_mlp_saved_bytes_per_token, liger_patches_layers
from .activation_units import B, F, INDEX_BYTES, coefficients

MOE_ROUTING_INDEX_TENSORS = 4
"""transformers 5.23 grouped-mm MoE keeps per (token, expert) pair: the top-k indices, the
sort permutation, the expert ids (floor_divide) and the inverse permutation (int64 each)."""
MOE_COMBINE_BACKWARD_TEMPORARIES = 3
"""MoE backward starts at the combine (sum over the k experts of the re-ordered, weighted
outputs): the expanded per-pair gradient, the zero-filled gradient of the re-ordering and its
`index_put`, three bf16 [pairs, h] tensors, while every tensor the experts keep is alive."""
GATED_MLP_BACKWARD_TEMPORARIES = 3
"""MLP backward (down_proj, then the gate·up product): the product's gradient and the gate
and up gradients, three bf16 [.., I] tensors, while the product itself has been freed."""
PLAIN_MLP_BACKWARD_TEMPORARIES = 2
"""Plain MLP backward (fc2, then a one-op GELU): the GELU output's gradient and fc1's output
gradient, two bf16 [.., I] tensors, while the GELU output has been freed; in general the
activation's traced backward peak (`FamilyCoefficients.mlp_activation_backward_peak_bytes_per_element`)."""


def mlp_saved_bytes_per_token(arch: ModelArch, liger_kernels: bool = False) -> int:
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
    A dense MLP's activation function made of several ops keeps its intermediates too
    (`mlp_activation_saved_bytes_per_token`).

    Liger's SwiGLU, where it replaces the MLP: `activation_liger.liger_mlp_saved_bytes_per_token`.
    """
    if liger_patches_layers(arch, liger_kernels):
        return liger_mlp_saved_bytes_per_token(arch)
    h = arch.hidden_size
    if not arch.num_experts:
        return (4 if arch.mlp_gated else 2) * B * arch.intermediate_size + mlp_activation_saved_bytes_per_token(arch)
    k, i_moe = arch.num_experts_per_tok, arch.moe_intermediate_size
    per_pair = B * h + 2 * B * i_moe + B * i_moe + B * i_moe + B * h + B + MOE_ROUTING_INDEX_TENSORS * INDEX_BYTES
    shared = arch.shared_expert_intermediate_size or arch.num_shared_experts * i_moe
    return k * per_pair + F * arch.num_experts + 4 * B * shared


def mlp_activation_saved_bytes_per_token(arch: ModelArch) -> int:
    """What a dense MLP's activation function keeps besides its input and output, per token
    (`FamilyCoefficients.mlp_activation_saved_bytes_per_element` × I): nothing for one aten op;
    Phi-2's ``gelu_new`` = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) keeps 0.5·x and 1 + tanh
    (its last multiply) and the ``tanh`` output (its backward): 3 × 2I.
    Source: transformers `activations.py` (NewGELUActivation), phi/configuration_phi.py
    (hidden_act="gelu_new"); derivatives.yaml (mul saves both operands, tanh its result)."""
    return coefficients(arch).mlp_activation_saved_bytes_per_element * arch.intermediate_size


def plain_mlp_backward_temporaries_bytes_per_token(arch: ModelArch) -> int:
    """Plain MLP at its activation's backward, besides what the MLP keeps: the activation's
    backward peak with its incoming gradient (`FamilyCoefficients.mlp_activation_backward_peak_bytes_per_element`
    × I): 2 × 2I for one GELU op (`PLAIN_MLP_BACKWARD_TEMPORARIES`: the output's and the input's
    gradients); for ``gelu_new`` the traced peak of its chain of elementwise backwards.
    Source: the activation traced alone (`scripts/calibrate_activations.py`)."""
    return coefficients(arch).mlp_activation_backward_peak_bytes_per_element * arch.intermediate_size


def mlp_backward_peak_bytes_per_token(arch: ModelArch, liger_kernels: bool = False) -> int:
    """The MLP's part at its backward peak: dense, its kept tensors minus the product plus the
    product's, gate's and up's gradients (plain: `plain_mlp_backward_temporaries_bytes_per_token`;
    Liger's SwiGLU: `activation_liger.liger_mlp_backward_peak_bytes_per_token`);
    MoE, all its kept tensors plus the combine's backward (`MOE_COMBINE_BACKWARD_TEMPORARIES`)."""
    if liger_patches_layers(arch, liger_kernels):
        return liger_mlp_backward_peak_bytes_per_token(arch)
    if not arch.num_experts:
        i = arch.intermediate_size
        if not arch.mlp_gated:
            return mlp_saved_bytes_per_token(arch) - B * i + plain_mlp_backward_temporaries_bytes_per_token(arch)
        return mlp_saved_bytes_per_token(arch) - B * i + GATED_MLP_BACKWARD_TEMPORARIES * B * i
    return mlp_saved_bytes_per_token(arch) + MOE_COMBINE_BACKWARD_TEMPORARIES * arch.num_experts_per_tok * B * arch.hidden_size


def lora_saved_bytes_per_token(in_features_of_targets: list[int], rank: int, dropout: bool, adapter_bytes: int = F) -> int:
    """What PEFT's LoRA branch saves per token, summed over a layer's adapted linears.

    fp32 adapters (PEFT's default, autocast_adapter_dtype=True): PEFT casts the layer input to
    fp32 (`_cast_input_dtype`), applies dropout (a bool mask is saved when p > 0) and saves the
    fp32 input of lora_A (4·d_in) and of lora_B (4·r); the sum with the base output saves nothing.
    bf16 adapters (TRL's QLoRA cast, `roles.adapter_bytes`): the cast of the bf16 input is a no-op,
    so lora_A saves the very tensor the base layer reads unless dropout makes a new one (2·d_in
    and its mask when p > 0), and lora_B its bf16 input (2·r).
    Source: peft/tuners/lora/layer.py (`Linear.forward`, `_cast_input_dtype`: `x.to(dtype)` returns
    `x` itself when the dtype matches).
    """
    mask = 1 if dropout else 0
    if adapter_bytes == F:
        return sum((F + mask) * d_in + F * rank for d_in in in_features_of_targets)
    return sum(((adapter_bytes + mask) * d_in if dropout else 0) + adapter_bytes * rank for d_in in in_features_of_targets)
