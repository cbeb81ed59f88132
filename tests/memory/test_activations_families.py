"""Saved-activation terms for layers beyond the Llama one, derived by hand on tiny configs
(h = 8, I = 32, 2 heads of d = 4). The traced agreement of the same structures on h = 128
probes is in tests/trace/test_agreement.py (GPT-NeoX, StarCoder2, Phi-3, OLMo2)."""

from __future__ import annotations

from typing import Any

from oomless.catalog.models import arch_from_config
from oomless.memory import activations as A
from oomless.spec.run import AttentionImpl

TINY: dict[str, Any] = {"hidden_size": 8, "intermediate_size": 32, "num_hidden_layers": 2,
                        "num_attention_heads": 2, "vocab_size": 64, "tie_word_embeddings": False,
                        "max_position_embeddings": 64}


def _arch(model_type: str, **extra: Any) -> Any:
    return arch_from_config({**TINY, "model_type": model_type, **extra}, f"tiny-{model_type}")


def test_gpt_neox_parallel_layer_norm_layer() -> None:
    arch = _arch("gpt_neox")
    # 2 LayerNorms x fp32 mean + rstd (8 B); the two norm outputs q/k/v and fc1 keep (2h each)
    # and the layer input both norms keep (2h): 16 + 3 x 16.
    assert A.norms_saved_bytes_per_token(arch) == 64
    # fc1 output (GELU input) and GELU output: 2 x 2I.
    assert A.mlp_saved_bytes_per_token(arch) == 128
    # no GQA: v is a view of the fused [.., 3q] output, whose q and k slices stay alive too.
    assert A.fused_qkv_kept_bytes_per_token(arch, AttentionImpl.sdpa) == 2 * (8 + 8)
    assert A.fused_qkv_kept_bytes_per_token(arch, AttentionImpl.flash_attention_2) == 0
    assert A.fused_qkv_kept_bytes_per_token(arch, AttentionImpl.eager) == 0  # v copied
    # the final LayerNorm keeps its input and its statistics.
    assert A.head_saved_bytes_per_token(arch) == 16 + 8
    # a recomputed layer's LayerNorm saves the checkpointed input itself.
    assert A.checkpointed_input_reused_bytes_per_token(arch) == 16
    # rotary tables of d·0.25 = 1 column: cos + sin, bf16, per token.
    assert A.rotary_table_bytes(arch, 10) == 2 * 2 * 10 * 1


def test_starcoder2_sequential_layer_norm_layer() -> None:
    arch = _arch("starcoder2", num_key_value_heads=1)
    # stats 2 x 8; norm outputs 2 x 2h; the layer input and the sum after attention 2 x 2h.
    assert A.norms_saved_bytes_per_token(arch) == 16 + 4 * 16
    assert A.fused_qkv_kept_bytes_per_token(arch, AttentionImpl.sdpa) == 0  # separate q/k/v


def test_phi_one_norm_feeds_both_sublayers() -> None:
    arch = _arch("phi")
    # one LayerNorm: stats 8, one output (2h) read by q/k/v and fc1, the layer input (2h).
    assert A.norms_saved_bytes_per_token(arch) == 8 + 2 * 16


def test_phi3_fused_qkv_with_gqa_is_the_llama_layer() -> None:
    phi3 = _arch("phi3", num_key_value_heads=1, pad_token_id=None)
    llama = _arch("llama", num_key_value_heads=1)
    assert A.fused_qkv_kept_bytes_per_token(phi3, AttentionImpl.sdpa) == 0
    for attention in AttentionImpl:
        assert (A.decoder_layer_saved_bytes_per_sequence(phi3, attention, 16)
                == A.decoder_layer_saved_bytes_per_sequence(llama, attention, 16))


def test_olmo2_post_norms_and_full_width_qk_norms() -> None:
    arch = _arch("olmo2", num_key_value_heads=1)
    assert A.post_norms_only(arch) and A.has_post_sublayer_norms(arch)
    # OLMo2's RMSNorm keeps fp32 input and fp32 normalised value (8 B/element, traced
    # coefficient) + fp32 inverse RMS; the linears keep the residual stream (2 x 2h).
    assert A.norms_saved_bytes_per_token(arch) == 2 * (8 * 8 + 4) + 2 * 16
    # q_norm over a·d = 8, k_norm over k·d = 4, one row each.
    assert A.qk_norm_saved_bytes_per_token(arch) == (8 * 8 + 4) + (8 * 4 + 4)
    assert A.checkpointed_input_reused_bytes_per_token(arch) == 16


def test_llama_layer_is_unchanged() -> None:
    arch = _arch("llama", num_key_value_heads=1)
    assert not A.post_norms_only(arch) and not A.is_layer_norm(arch)
    assert A.norms_saved_bytes_per_token(arch) == 2 * (6 * 8 + 4) + 2 * 16
    assert A.mlp_saved_bytes_per_token(arch) == 4 * 2 * 32
    assert A.checkpointed_input_reused_bytes_per_token(arch) == 0
    assert A.activation_model_warnings(arch) == ()


def test_hybrid_linear_attention_layers_are_flagged() -> None:
    arch = arch_from_config({**TINY, "model_type": "qwen3_5_text", "num_hidden_layers": 4,
                             "num_key_value_heads": 1, "head_dim": 4, "linear_num_key_heads": 2,
                             "linear_num_value_heads": 4, "linear_key_head_dim": 2,
                             "linear_value_head_dim": 2, "linear_conv_kernel_dim": 4},
                            "tiny-qwen3.5")
    (warning,) = A.activation_model_warnings(arch)
    assert "3 Gated DeltaNet" in warning and "full-attention" in warning
