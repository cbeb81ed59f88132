"""Model catalog: every shipped config parses; ids, stems, bare names and paths resolve;
bad input gives one-line InputErrors; family rules match the catalog's annotations."""

from __future__ import annotations

import json
import shutil
from importlib import resources
from pathlib import Path

import pytest

from oomless.catalog.models import ModelArch, arch_from_config
from oomless.catalog.resolve import catalog_ids, load_model
from oomless.errors import InputError

MODELS_DIR = resources.files("oomless.catalog") / "data" / "models"
CATALOG_FILES = sorted(p.name for p in MODELS_DIR.iterdir() if p.name.endswith(".json"))


def _raw(stem: str) -> dict:
    return json.loads((MODELS_DIR / f"{stem}.json").read_text("utf-8"))


@pytest.mark.parametrize("file_name", CATALOG_FILES)
def test_every_shipped_config_loads(file_name: str) -> None:
    stem = file_name[: -len(".json")]
    arch = load_model(stem)
    assert isinstance(arch, ModelArch)
    assert arch.name == stem.replace("--", "/", 1)
    assert arch.source.endswith(file_name)
    assert arch.num_layers > 0 and arch.hidden_size > 0 and arch.vocab_size > 0
    assert arch.num_attention_heads % arch.num_kv_heads == 0
    assert 0 <= arch.num_dense_layers <= arch.num_layers


@pytest.mark.parametrize("file_name", CATALOG_FILES)
def test_family_rules_agree_with_catalog_annotations(file_name: str) -> None:
    """The catalog's ``_derived`` notes (written by hand from the model pages) agree with the
    rules the parser applies per family."""
    stem = file_name[: -len(".json")]
    derived = _raw(stem).get("_derived", {})
    arch = load_model(stem)
    if "qkv_bias" in derived:
        assert arch.qkv_bias == derived["qkv_bias"]
    if "head_dim" in derived:
        assert arch.head_dim == derived["head_dim"]
    if "q_proj_out" in derived:
        assert arch.num_attention_heads * arch.head_dim == derived["q_proj_out"]


def test_catalog_ids_cover_every_file() -> None:
    assert len(catalog_ids()) == len(CATALOG_FILES)
    assert "Qwen/Qwen2.5-7B-Instruct" in catalog_ids()


@pytest.mark.parametrize(
    "ref",
    ["Qwen/Qwen2.5-7B-Instruct", "qwen/qwen2.5-7b-instruct", "Qwen--Qwen2.5-7B-Instruct",
     "Qwen2.5-7B-Instruct", "  QWEN2.5-7B-INSTRUCT "],
)
def test_catalog_refs_resolve(ref: str) -> None:
    assert load_model(ref).name == "Qwen/Qwen2.5-7B-Instruct"


def test_repeated_catalog_loads_are_cached() -> None:
    assert load_model("Qwen/Qwen3-8B") is load_model("qwen3-8b")


def test_local_directory_and_file(tmp_path: Path) -> None:
    src = MODELS_DIR / "meta-llama--Llama-3.2-1B-Instruct.json"
    model_dir = tmp_path / "my-llama"
    model_dir.mkdir()
    (model_dir / "config.json").write_text(src.read_text("utf-8"))
    loose = tmp_path / "cfg.json"
    shutil.copy(model_dir / "config.json", loose)

    by_dir, by_file = load_model(str(model_dir)), load_model(str(loose))
    assert by_dir.name == str(model_dir) and by_file.name == str(loose)
    assert by_dir.source == str(model_dir / "config.json")
    catalog = load_model("meta-llama/Llama-3.2-1B-Instruct")
    assert by_dir.hidden_size == by_file.hidden_size == catalog.hidden_size == 2048


def test_directory_without_config(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"config\.json"):
        load_model(str(tmp_path))


def test_unknown_model_suggests_closest() -> None:
    with pytest.raises(InputError) as err:
        load_model("Qwen/Qwen2.5-7B-Instruc")
    assert err.value.field == "model"
    assert "Qwen/Qwen2.5-7B-Instruct" in str(err.value)
    assert "\n" not in str(err.value)


def test_malformed_json_is_one_line_input_error(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text('{"hidden_size": 8,,}')
    with pytest.raises(InputError) as err:
        load_model(str(bad))
    assert "not valid JSON" in str(err.value) and "line 1" in str(err.value)
    assert "\n" not in str(err.value)


def test_non_object_json(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text("[1, 2]")
    with pytest.raises(InputError, match="not a JSON object"):
        load_model(str(bad))


def test_missing_required_key_is_named() -> None:
    config = {"model_type": "llama", "hidden_size": 8, "num_hidden_layers": 2,
              "num_attention_heads": 2, "intermediate_size": 16,
              "max_position_embeddings": 64}
    with pytest.raises(InputError, match="'vocab_size'"):
        arch_from_config(config, "tiny")


# --- family rules ----------------------------------------------------------------------------


def test_qwen2_bias_and_inactive_sliding_window() -> None:
    arch = load_model("Qwen/Qwen2.5-7B-Instruct")
    assert arch.qkv_bias and not arch.o_bias and not arch.qk_norm
    assert arch.sliding_window is None  # use_sliding_window false
    assert arch.num_dense_layers == arch.num_layers and arch.num_experts == 0


def test_qwen3_qk_norm_and_explicit_head_dim() -> None:
    arch = load_model("Qwen/Qwen3-0.6B")
    assert arch.qk_norm and not arch.qkv_bias
    assert arch.head_dim == 128 != arch.hidden_size // arch.num_attention_heads


def test_qwen3_moe_fields() -> None:
    arch = load_model("Qwen/Qwen3-30B-A3B")
    assert (arch.num_experts, arch.num_experts_per_tok, arch.moe_intermediate_size) == (128, 8, 768)
    assert arch.num_dense_layers == 0 and arch.num_moe_layers == 48
    assert arch.num_shared_experts == 0 and arch.shared_expert_intermediate_size == 0


def test_deepseek_v3_mla_and_dense_layers() -> None:
    arch = load_model("deepseek-ai/DeepSeek-V3")
    assert arch.uses_mla
    assert (arch.kv_lora_rank, arch.q_lora_rank) == (512, 1536)
    assert (arch.qk_nope_head_dim, arch.qk_rope_head_dim, arch.v_head_dim) == (128, 64, 128)
    assert arch.head_dim == 192
    assert arch.num_dense_layers == 3 and arch.num_moe_layers == 58
    assert (arch.num_experts, arch.num_shared_experts) == (256, 1)


def test_gemma2_tied_sandwich_and_alternating_window() -> None:
    arch = load_model("google/gemma-2-9b-it")
    assert arch.tie_word_embeddings and arch.sandwich_norm
    assert arch.sliding_window == 4096 and arch.num_sliding_window_layers == 21


def test_gemma3_nested_text_config_and_siglip() -> None:
    arch = load_model("google/gemma-3-4b-it")
    assert arch.model_type == "gemma3" and arch.text_model_type == "gemma3_text"
    assert (arch.num_attention_heads, arch.num_kv_heads, arch.head_dim) == (8, 4, 256)
    assert arch.sliding_window == 1024 and arch.num_sliding_window_layers == 34 - 5
    assert arch.qk_norm and arch.tie_word_embeddings
    assert arch.vision is not None and arch.vision.model_type == "siglip_vision_model"
    assert arch.vision.spatial_merge_size == 4  # 64x64 patches pooled to 16x16 tokens
    assert arch.vision.out_hidden_size == 2560


def test_gemma3_sparse_hub_config_uses_family_defaults() -> None:
    """The hub file has no heads/vocab in text_config; transformers fills them in."""
    raw = _raw("google--gemma-3-4b-it")
    sparse = {k: raw[k] for k in ("model_type", "mm_tokens_per_image", "vision_config")}
    sparse["text_config"] = {k: v for k, v in raw["text_config"].items()
                             if not k.startswith("_")}
    arch = arch_from_config(sparse, "gemma-3-4b-sparse")
    full = load_model("google/gemma-3-4b-it")
    assert arch.vocab_size == full.vocab_size == 262_208
    assert arch.num_kv_heads == full.num_kv_heads and arch.head_dim == full.head_dim


def test_internvl_llm_config() -> None:
    arch = load_model("OpenGVLab/InternVL3-8B")
    assert arch.text_model_type == "qwen2" and arch.qkv_bias
    assert arch.hidden_size == 3584 and arch.vocab_size == 151_674
    assert arch.vision is not None and arch.vision.spatial_merge_size == 2  # downsample 0.5
    assert arch.vision.norm_type == "layer_norm" and arch.vision.image_size == 448


def test_qwen2_5_vl_vision_fields() -> None:
    v = load_model("Qwen/Qwen2.5-VL-7B-Instruct").vision
    assert v is not None
    assert (v.depth, v.hidden_size, v.intermediate_size, v.num_heads) == (32, 1280, 3420, 16)
    assert (v.patch_size, v.spatial_merge_size, v.temporal_patch_size) == (14, 2, 2)
    assert v.fullatt_block_indexes == (7, 15, 23, 31) and v.out_hidden_size == 3584


def test_qwen2_5_vl_nested_text_config_matches_flat() -> None:
    """transformers >= 4.52 re-saves Qwen2.5-VL with the text fields under text_config."""
    raw = _raw("Qwen--Qwen2.5-VL-3B-Instruct")
    text_keys = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                 "num_key_value_heads", "vocab_size", "tie_word_embeddings",
                 "max_position_embeddings")
    nested = {"model_type": "qwen2_5_vl", "vision_config": raw["vision_config"],
              "text_config": {"model_type": "qwen2_5_vl_text",
                              **{k: raw[k] for k in text_keys}}}
    arch, flat = arch_from_config(nested, "nested"), load_model("Qwen/Qwen2.5-VL-3B-Instruct")
    for field in ("hidden_size", "num_layers", "num_kv_heads", "vocab_size", "qkv_bias",
                  "tie_word_embeddings", "vision"):
        assert getattr(arch, field) == getattr(flat, field), field


def test_gpt_oss_fields() -> None:
    arch = load_model("openai/gpt-oss-20b")
    assert arch.qkv_bias and arch.o_bias and arch.mlp_bias and arch.router_bias
    assert arch.attention_sinks and arch.experts_fused
    assert (arch.num_experts, arch.num_experts_per_tok, arch.moe_intermediate_size) == (32, 4, 2880)
    assert arch.sliding_window == 128 and arch.num_sliding_window_layers == 12


def test_llama_has_no_bias_and_mistral_no_window() -> None:
    llama = load_model("meta-llama/Llama-3.1-8B-Instruct")
    assert not (llama.qkv_bias or llama.o_bias or llama.mlp_bias)
    assert load_model("mistralai/Mistral-7B-Instruct-v0.3").sliding_window is None


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [("hidden_size", "8", "hidden_size='8'"), ("num_attention_heads", 0, "positive integer"),
     ("intermediate_size", None, "no 'intermediate_size'"),
     ("num_key_value_heads", "x", "malformed value")],
)
def test_malformed_dimension_is_input_error(key: str, value: object, expected: str) -> None:
    config = {"model_type": "llama", "hidden_size": 8, "num_hidden_layers": 2,
              "num_attention_heads": 2, "intermediate_size": 16, "vocab_size": 32,
              "max_position_embeddings": 64, key: value}
    with pytest.raises(InputError) as err:
        arch_from_config(config, "tiny")
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_qwen2_sliding_window_needs_opt_in() -> None:
    base = {"model_type": "qwen2", "hidden_size": 8, "num_hidden_layers": 4,
            "num_attention_heads": 2, "intermediate_size": 16, "vocab_size": 32,
            "max_position_embeddings": 64, "sliding_window": 16, "max_window_layers": 1}
    assert arch_from_config(base, "q").sliding_window is None  # key absent = default False
    on = arch_from_config({**base, "use_sliding_window": True}, "q")
    assert (on.sliding_window, on.num_sliding_window_layers) == (16, 3)
    mistral = arch_from_config({**base, "model_type": "mistral"}, "m")
    assert (mistral.sliding_window, mistral.num_sliding_window_layers) == (16, 4)
