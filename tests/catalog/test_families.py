"""Family rules as data: key aliases, remote-code families (InternLM2, ChatGLM) by hand and
by published totals, unknown families planned Llama-style with a warning, missing keys named.
(Families transformers ships are checked exactly in tests/memory/test_params_vs_transformers.py.)
"""

from __future__ import annotations

import pytest

from oomless.catalog.families import FAMILIES
from oomless.catalog.models import arch_from_config
from oomless.errors import InputError
from oomless.memory import params as P

B = 10**9
TINY = {"hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2, "vocab_size": 32,
        "intermediate_size": 16, "max_position_embeddings": 64}

GLM4_9B_CHAT = {  # THUDM/glm-4-9b-chat config.json (remote code, model_type chatglm)
    "model_type": "chatglm", "num_layers": 40, "hidden_size": 4096, "ffn_hidden_size": 13696,
    "kv_channels": 128, "num_attention_heads": 32, "multi_query_attention": True,
    "multi_query_group_num": 2, "padded_vocab_size": 151552, "seq_length": 131072,
    "add_bias_linear": False, "add_qkv_bias": True, "rmsnorm": True, "post_layer_norm": True,
}
INTERNLM2_5_7B = {  # internlm/internlm2_5-7b-chat config.json (remote code)
    "model_type": "internlm2", "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "vocab_size": 92544, "bias": False, "max_position_embeddings": 32768,
    "tie_word_embeddings": False,
}


def test_every_family_cites_its_source() -> None:
    assert all(t.source for t in FAMILIES.values())


def test_chatglm_keys_and_shapes() -> None:
    arch = arch_from_config(GLM4_9B_CHAT, "glm-4-9b-chat")
    assert (arch.num_layers, arch.intermediate_size, arch.vocab_size) == (40, 13696, 151552)
    assert (arch.num_kv_heads, arch.head_dim, arch.max_position_embeddings) == (2, 128, 131072)
    shapes = {s.name: s for s in P.decoder_linear_shapes(arch)}
    # query_key_value h→(32+2·2)·128 = 4608 with bias; dense_h_to_4h = fused gate/up 2·13696.
    assert (shapes["query_key_value"].out_features, shapes["query_key_value"].bias) == (4608, True)
    assert not shapes["dense"].bias and shapes["dense_h_to_4h"].out_features == 2 * 13696
    assert arch.warnings == ()


def test_chatglm_published_total() -> None:
    # HF hub (safetensors) size of THUDM/glm-4-9b-chat: 9.4B. By hand: per layer
    # 4096·4608 + 4608 + 4096² + 4096·27392 + 13696·4096 + 2·4096 = 203,960,832; x40
    # + 2·151552·4096 embeddings + final norm 4096 = 9,399,951,360.
    assert P.num_parameters(arch_from_config(GLM4_9B_CHAT, "glm")) == 9_399_951_360


def test_internlm2_names_and_published_total() -> None:
    arch = arch_from_config(INTERNLM2_5_7B, "internlm2_5-7b-chat")
    names = [s.name for s in P.decoder_linear_shapes(arch)]
    assert names == ["wqkv", "wo", "w1", "w3", "w2"]
    assert not arch.qkv_bias and not arch.o_bias  # "bias": false
    # HF hub size of internlm/internlm2_5-7b-chat: 7.74B.
    assert P.num_parameters(arch) == pytest.approx(7.74 * B, rel=0.005)
    assert P.num_parameters(arch) == P.num_parameters(
        arch_from_config({**INTERNLM2_5_7B, "model_type": "llama"}, "same-as-llama"))


def test_internlm2_bias_defaults_true() -> None:
    config = {k: v for k, v in INTERNLM2_5_7B.items() if k != "bias"}
    arch = arch_from_config(config, "x")  # InternLM2Config(bias=True)
    assert arch.qkv_bias and arch.o_bias and not arch.mlp_bias


def test_gpt2_style_aliases() -> None:
    config = {"model_type": "my_gpt", "n_embd": 8, "n_layer": 2, "n_head": 2, "n_inner": 16,
              "vocab_size": 32, "n_positions": 64}
    arch = arch_from_config(config, "aliases")
    assert (arch.hidden_size, arch.num_layers, arch.num_attention_heads) == (8, 2, 2)
    assert (arch.intermediate_size, arch.max_position_embeddings) == (16, 64)


def test_unknown_family_is_llama_style_with_warning() -> None:
    arch = arch_from_config({"model_type": "brand_new", **TINY}, "new")
    known = arch_from_config({"model_type": "llama", **TINY}, "llama")
    assert P.num_parameters(arch) == P.num_parameters(known)
    assert len(arch.warnings) == 1 and known.warnings == ()
    warning = arch.warnings[0]
    assert "'brand_new'" in warning and "Llama-style" in warning and "\n" not in warning
    for assumption in ("q/k/v/o_proj", "gate/up/down", "RMSNorm", "tie_word_embeddings=False"):
        assert assumption in warning


def test_missing_max_positions_is_a_warning_not_an_error() -> None:
    config = {k: v for k, v in TINY.items() if k != "max_position_embeddings"}
    arch = arch_from_config({"model_type": "llama", **config}, "no-max-pos")
    assert arch.max_position_embeddings == 0
    assert any("max_position_embeddings" in w for w in arch.warnings)


@pytest.mark.parametrize("key", ["hidden_size", "num_hidden_layers", "num_attention_heads",
                                 "vocab_size", "intermediate_size"])
def test_unknown_family_missing_key_is_named(key: str) -> None:
    config = {"model_type": "brand_new", **{k: v for k, v in TINY.items() if k != key}}
    with pytest.raises(InputError) as err:
        arch_from_config(config, "new")
    assert err.value.field == "model" and f"no {key!r}" in str(err.value)
    assert "\n" not in str(err.value)


def test_all_moe_layers_need_no_dense_width() -> None:
    config = {"model_type": "qwen3_moe", **{k: v for k, v in TINY.items()
                                           if k != "intermediate_size"},
              "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 6}
    assert arch_from_config(config, "moe").num_dense_layers == 0
    with pytest.raises(InputError, match="'moe_intermediate_size'"):
        arch_from_config({**config, "moe_intermediate_size": None}, "moe")


def test_vlm_ties_by_the_top_level_key() -> None:
    """transformers 5 ties by ``model.config.tie_word_embeddings`` (the top-level key)."""
    text = {"model_type": "qwen3_vl_text", **TINY, "head_dim": 4, "tie_word_embeddings": True}
    vision = {"depth": 1, "hidden_size": 8, "intermediate_size": 16, "num_heads": 2,
              "patch_size": 2, "out_hidden_size": 8, "num_position_embeddings": 4}
    config = {"model_type": "qwen3_vl", "text_config": text, "vision_config": vision}
    assert arch_from_config(config, "tied").tie_word_embeddings
    assert not arch_from_config({**config, "tie_word_embeddings": False},
                                "untied").tie_word_embeddings


def test_unknown_hybrid_family_says_mixers_were_counted_as_attention() -> None:
    config = {"model_type": "new_hybrid", **TINY, "hybrid_override_pattern": "M*M-"}
    warnings = arch_from_config(config, "hybrid").warnings
    assert len(warnings) == 2 and "hybrid_override_pattern" in warnings[1]
