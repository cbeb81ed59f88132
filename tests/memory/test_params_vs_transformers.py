"""Analytic parameter counts equal transformers' ``sum(p.numel() for p in model.parameters())``
exactly, for a tiny config of every family transformers ships (text and vision-language).

The models are built on the meta device (no memory, no weights); the configs go through
``arch_from_config`` twice: as ``to_dict()`` (every key) and as ``to_diff_dict()`` (only what
differs from the config class, as a hub file is), so the family defaults are checked too.
Needs torch and transformers (the ``trace`` extra); skipped without them.
"""

from __future__ import annotations

from typing import Any

import pytest

from oomless.catalog.models import arch_from_config
from oomless.memory import params as P

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

TINY_TEXT: dict[str, Any] = {
    "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 3,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 128,
    "pad_token_id": None, "bos_token_id": None, "eos_token_id": None,
}
MOE = {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32}
MLA = {"kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 8,
       "n_routed_experts": 4, "n_shared_experts": 1, "num_experts_per_tok": 2,
       "moe_intermediate_size": 32, "first_k_dense_replace": 1, "head_dim": 8}

GDN = {"head_dim": 16, "num_hidden_layers": 4, "linear_num_key_heads": 2,
       "linear_num_value_heads": 4, "linear_key_head_dim": 8, "linear_value_head_dim": 12,
       "linear_conv_kernel_dim": 4}
"""Gated DeltaNet (Qwen3.5/Qwen3-Next) dimensions, all different so a swap shows."""

TEXT_CASES: list[tuple[str, dict[str, Any]]] = [
    ("llama", {}),
    ("llama", {"attention_bias": True, "mlp_bias": True, "tie_word_embeddings": True}),
    ("mistral", {}),
    ("granite", {}),
    ("smollm3", {}),
    ("qwen2", {}),
    ("qwen2", {"tie_word_embeddings": True}),
    ("qwen3", {"head_dim": 32}),
    ("qwen2_moe", {**MOE, "shared_expert_intermediate_size": 48, "decoder_sparse_step": 1}),
    ("qwen2_moe", {**MOE, "shared_expert_intermediate_size": 48, "mlp_only_layers": [1]}),
    ("qwen3_moe", {**MOE, "head_dim": 16}),
    ("mixtral", {"num_local_experts": 4, "num_experts_per_tok": 2}),
    ("olmoe", {**MOE, "intermediate_size": 32}),
    ("gemma", {"head_dim": 16}),
    ("gemma2", {"head_dim": 16}),
    ("gemma3_text", {"head_dim": 16}),
    ("phi3", {}),
    ("phi", {}),
    ("phi", {"qk_layernorm": True}),
    ("gpt_neox", {}),
    ("gpt_neox", {"attention_bias": False, "tie_word_embeddings": True}),
    ("olmo", {}),
    ("olmo2", {}),
    ("olmo3", {}),
    ("glm", {"head_dim": 16}),
    ("glm4", {"head_dim": 16}),
    ("starcoder2", {}),
    ("starcoder2", {"use_bias": False}),
    ("deepseek_v2", {**MLA, "q_lora_rank": None}),
    ("deepseek_v2", {**MLA, "q_lora_rank": 24}),
    ("deepseek_v3", {**MLA, "q_lora_rank": 24}),
    ("gpt_oss", {"num_local_experts": 4, "num_experts_per_tok": 2, "head_dim": 16}),
    ("qwen3_5_text", {**GDN, "num_hidden_layers": 5}),
    ("qwen3_5_moe_text", {**GDN, **MOE, "shared_expert_intermediate_size": 40}),
    ("qwen3_next", {**GDN, **MOE, "shared_expert_intermediate_size": 40}),
]


def _meta_count(model_cls: Any, config: Any) -> int:
    with torch.device("meta"):
        model = model_cls.from_config(config)
    return sum(p.numel() for p in model.parameters())


def _config_dicts(config: Any) -> list[dict[str, Any]]:
    sparse = {**config.to_diff_dict(), "model_type": config.model_type}
    return [config.to_dict(), sparse]


@pytest.mark.parametrize(("model_type", "overrides"), TEXT_CASES,
                         ids=[f"{m}-{i}" for i, (m, _) in enumerate(TEXT_CASES)])
def test_text_family_matches_transformers(model_type: str, overrides: dict[str, Any]) -> None:
    config = transformers.AutoConfig.for_model(model_type, **{**TINY_TEXT, **overrides})
    expected = _meta_count(transformers.AutoModelForCausalLM, config)
    for as_dict in _config_dicts(config):
        arch = arch_from_config(as_dict, f"tiny-{model_type}")
        assert arch.warnings == (), arch.warnings
        assert P.num_parameters(arch) == expected, (model_type, sorted(as_dict))
        assert sum(t.numel * t.count for t in P.model_tensors(arch)) == expected


TINY_VLM_TEXT = {**TINY_TEXT, "head_dim": 16}
CLIP = {"hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 3,
        "num_attention_heads": 2, "image_size": 28, "patch_size": 14}
QWEN_VL_TEXT: dict[str, Any] = {}

VLM_CASES: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]] = [
    # (model_type, vision_config overrides, text_config overrides, top-level overrides)
    ("llava", CLIP, {}, {}),
    ("llava", {**CLIP, "model_type": "siglip_vision_model"}, {},
     {"vision_feature_layer": [-2, -1], "multimodal_projector_bias": False}),
    ("idefics3", CLIP, {}, {}),
    ("smolvlm", CLIP, {}, {"scale_factor": 1}),
    ("gemma3", {**CLIP, "image_size": 56}, {}, {"mm_tokens_per_image": 4}),
    ("gemma3", {**CLIP, "image_size": 56, "vision_use_head": False}, {},
     {"mm_tokens_per_image": 4}),
    ("internvl", {**CLIP, "image_size": [28, 28], "patch_size": [14, 14]}, {}, {}),
    ("internvl", {**CLIP, "image_size": [28, 28], "patch_size": [14, 14], "use_qk_norm": True,
                  "attention_bias": True, "use_mean_pooling": False}, {}, {}),
    ("qwen2_vl", {"depth": 3, "embed_dim": 32, "hidden_size": 64, "num_heads": 2,
                  "mlp_ratio": 2}, QWEN_VL_TEXT, {}),
    ("qwen2_5_vl", {"depth": 3, "hidden_size": 32, "intermediate_size": 48, "num_heads": 2,
                    "out_hidden_size": 64, "fullatt_block_indexes": [2]}, QWEN_VL_TEXT, {}),
    ("qwen3_vl", {"depth": 3, "hidden_size": 32, "intermediate_size": 48, "num_heads": 2,
                  "out_hidden_size": 64, "num_position_embeddings": 16,
                  "deepstack_visual_indexes": [0, 2]}, {}, {}),
    ("qwen3_vl_moe", {"depth": 3, "hidden_size": 32, "intermediate_size": 48, "num_heads": 2,
                      "out_hidden_size": 64, "num_position_embeddings": 16,
                      "deepstack_visual_indexes": [1]},
     {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32}, {}),
    ("qwen3_5", {"depth": 2, "hidden_size": 32, "intermediate_size": 48, "num_heads": 2,
                 "out_hidden_size": 64, "num_position_embeddings": 16,
                 "deepstack_visual_indexes": []}, GDN, {}),
]


def _vlm_config(model_type: str, vision: dict[str, Any], text: dict[str, Any],
                top: dict[str, Any]) -> Any:
    base = transformers.AutoConfig.for_model(model_type).to_dict()
    vision_config = {**base["vision_config"], **vision}
    text_config = {k: v for k, v in {**base["text_config"], **TINY_VLM_TEXT, **text}.items()
                   if k not in ("layer_types", "max_window_layers")
                   if v is not None}
    return transformers.AutoConfig.for_model(model_type, vision_config=vision_config,
                                             text_config=text_config, **top)


@pytest.mark.parametrize(("model_type", "vision", "text", "top"), VLM_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(VLM_CASES)])
def test_vision_language_family_matches_transformers(
        model_type: str, vision: dict[str, Any], text: dict[str, Any], top: dict[str, Any]
) -> None:
    config = _vlm_config(model_type, vision, text, top)
    expected = _meta_count(transformers.AutoModelForImageTextToText, config)
    arch = arch_from_config(config.to_dict(), f"tiny-{model_type}")
    assert arch.vision is not None and arch.warnings == ()
    assert P.num_parameters(arch) == expected, model_type


OMNI_AUDIO = {"d_model": 32, "encoder_layers": 2, "encoder_attention_heads": 2,
              "encoder_ffn_dim": 48, "num_mel_bins": 16, "output_dim": 64}
OMNI_VISION = {"depth": 3, "hidden_size": 32, "intermediate_size": 48, "num_heads": 2,
               "out_hidden_size": 64, "fullatt_block_indexes": [2]}


def _omni_thinker_config(tied: bool) -> Any:
    from transformers import Qwen2_5OmniThinkerConfig
    text_config = {**{k: v for k, v in TINY_VLM_TEXT.items() if v is not None},
                   "model_type": "qwen2_5_omni_text"}
    return Qwen2_5OmniThinkerConfig(text_config=text_config, vision_config=OMNI_VISION,
                                    audio_config=OMNI_AUDIO, tie_word_embeddings=tied)


@pytest.mark.parametrize("tied", [False, True], ids=["untied", "tied"])
def test_qwen2_5_omni_thinker_matches_transformers(tied: bool) -> None:
    """The thinker (text model, vision tower and merger, audio encoder, lm_head) counts as
    transformers builds it; read from the full Omni config (talker noted) and from the
    thinker config alone. The thinker's ``tie_word_embeddings`` decides the tie (its
    text_config's own key, True by default, does not)."""
    from transformers import Qwen2_5OmniConfig, Qwen2_5OmniThinkerForConditionalGeneration
    thinker = _omni_thinker_config(tied)
    with torch.device("meta"):
        model = Qwen2_5OmniThinkerForConditionalGeneration._from_config(thinker)
    expected = sum(p.numel() for p in model.parameters())
    full = Qwen2_5OmniConfig(thinker_config=thinker.to_dict()).to_dict()
    for as_dict in (full, thinker.to_dict(), {**thinker.to_diff_dict(),
                                              "model_type": thinker.model_type}):
        arch = arch_from_config(as_dict, "tiny-qwen2_5_omni")
        assert arch.vision is not None and arch.audio is not None
        assert arch.text_model_type == "qwen2_5_omni_text" and arch.qkv_bias
        assert arch.tie_word_embeddings == tied
        assert P.num_parameters(arch) == expected
        assert sum(t.numel * t.count for t in P.model_tensors(arch)) == expected
    assert any("talker_config" in w for w in arch_from_config(full, "omni").warnings)
    assert arch_from_config(thinker.to_dict(), "thinker").warnings == ()
