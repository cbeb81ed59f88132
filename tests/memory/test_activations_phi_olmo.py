"""Phi-2's ``gelu_new`` MLP and OLMo-1's upcasting LayerNorm, derived by hand on tiny configs
(h = 8, I = 32) with the shipped traced coefficients (`memory/data/activation_calibration.json`,
measured by scripts/calibrate_activations.py on the phi/olmo probes, whose traced points agree
within 2 %)."""

from __future__ import annotations

from typing import Any

from oomless.catalog.models import arch_from_config
from oomless.memory import activations as A
from oomless.memory.activation_calibration import family_coefficients

TINY: dict[str, Any] = {"hidden_size": 8, "intermediate_size": 32, "num_hidden_layers": 2,
                        "num_attention_heads": 2, "vocab_size": 64, "tie_word_embeddings": False,
                        "max_position_embeddings": 64}


def _arch(model_type: str, **extra: Any) -> Any:
    return arch_from_config({**TINY, "model_type": model_type, **extra}, f"tiny-{model_type}")


def test_phi_gelu_new_keeps_three_more_intermediates() -> None:
    coefficients = family_coefficients("phi")
    assert coefficients.mlp_activation_saved_bytes_per_element == 3 * 2  # 0.5·x, tanh, 1 + tanh
    assert coefficients.mlp_activation_backward_peak_bytes_per_element == 3 * 2
    arch = _arch("phi")
    # fc1 output and the product fc2 reads (2 × 2I), plus gelu_new's three (3 × 2I).
    assert A.mlp_saved_bytes_per_token(arch) == 5 * 2 * 32
    # at the last multiply's backward: the product freed; its gradient and both operands' gradients.
    assert A.mlp_backward_peak_bytes_per_token(arch) == 4 * 2 * 32 + 3 * 2 * 32


def test_one_op_gelu_is_unchanged() -> None:
    arch = _arch("gpt_neox")
    assert A.mlp_saved_bytes_per_token(arch) == 2 * 2 * 32
    assert A.mlp_backward_peak_bytes_per_token(arch) == 2 * 32 + 2 * 2 * 32


def test_olmo_layer_norm_keeps_its_fp32_copy_not_its_input() -> None:
    assert family_coefficients("olmo").layer_norm_input_copy_bytes_per_element == 4
    arch = _arch("olmo")
    assert A.num_residual_inputs_saved_per_layer(arch) == 0
    # 2 norms × (fp32 mean + rstd 8 + fp32 copy 4h); the two norm outputs the linears keep (2h each).
    assert A.norms_saved_bytes_per_token(arch) == 2 * (8 + 4 * 8) + 2 * 2 * 8
    # the final norm: statistics and its fp32 copy, not the last layer's output.
    assert A.head_saved_bytes_per_token(arch) == 8 + 4 * 8
    # the recomputed layer's copy is a new tensor, not the checkpointed input.
    assert A.checkpointed_input_reused_bytes_per_token(arch) == 0
