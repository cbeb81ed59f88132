"""Model resolution (issue 12): local folders and config.json paths, PEFT adapter folders, the
HF cache layout, the Hub (a local fake: no network), the catalog, and the one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oomless.catalog import hub
from oomless.catalog.checkpoint import Quantization, parameter_counts_from_header, quantization_from_config
from oomless.catalog.resolve import load_model
from oomless.errors import InputError
from oomless.memory.params import num_parameters

from .fake_hub import FAKE_COMMIT, FakeHub, make_cache_entry, safetensors_bytes

TINY_LLAMA = {
    "model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 128,
    "max_position_embeddings": 256, "tie_word_embeddings": False,
}
TENSORS = {"model.embed_tokens.weight": ("BF16", [128, 64]), "lm_head.weight": ("BF16", [128, 64]),
           "model.norm.weight": ("F32", [64])}
"""Not the whole model: the exact count is whatever the headers say (128·64·2 bf16 + 64 fp32)."""


def _config_bytes(config: dict) -> bytes:
    return json.dumps(config).encode()


def _go_online(monkeypatch: pytest.MonkeyPatch, endpoint: str) -> None:
    """Undo the suite's offline mode for one test (huggingface_hub also read it at import)."""
    from huggingface_hub import constants

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_ENDPOINT", endpoint)


@pytest.fixture
def hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "hf-cache"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache


def test_local_folder_with_config_and_safetensors_headers(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(TINY_LLAMA))
    (tmp_path / "model.safetensors").write_bytes(safetensors_bytes(TENSORS))
    arch = load_model(str(tmp_path))
    assert arch.hidden_size == 64 and arch.checkpoint is not None
    assert arch.checkpoint.where == f"local:{tmp_path}"
    assert dict(arch.checkpoint.parameter_counts) == {"BF16": 2 * 128 * 64, "F32": 64}
    assert arch.checkpoint.exact_num_parameters == 2 * 128 * 64 + 64
    assert load_model(str(tmp_path / "config.json")).hidden_size == 64


def test_corrupt_safetensors_header_gives_no_count_rather_than_an_error(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(TINY_LLAMA))
    (tmp_path / "model.safetensors").write_bytes(b"\xff" * 8 + b"{not json")
    arch = load_model(str(tmp_path))
    assert arch.checkpoint is not None and arch.checkpoint.exact_num_parameters is None


def test_hf_cache_layout_offline(hf_cache: Path) -> None:
    make_cache_entry(hf_cache, "acme/tiny-llama", {"config.json": _config_bytes(TINY_LLAMA),
                                                   "model.safetensors": safetensors_bytes(TENSORS)})
    arch = load_model("acme/tiny-llama")
    assert arch.checkpoint is not None and arch.checkpoint.where == "hf-cache:acme/tiny-llama@main"
    assert arch.checkpoint.exact_num_parameters == 2 * 128 * 64 + 64
    assert load_model("acme/tiny-llama", revision=FAKE_COMMIT).hidden_size == 64


def test_hf_cache_revision_branch(hf_cache: Path) -> None:
    make_cache_entry(hf_cache, "acme/tiny-llama", {"config.json": _config_bytes(TINY_LLAMA)})
    wide = {**TINY_LLAMA, "hidden_size": 128}
    make_cache_entry(hf_cache, "acme/tiny-llama", {"config.json": _config_bytes(wide)}, branch="v2",
                     commit="f" * 40)
    assert load_model("acme/tiny-llama").hidden_size == 64
    assert load_model("acme/tiny-llama", revision="v2").hidden_size == 128


def test_offline_with_nothing_found_is_one_line_naming_where_it_looked(hf_cache: Path) -> None:
    with pytest.raises(InputError) as err:
        load_model("acme/not-there")
    message = str(err.value)
    assert "\n" not in message and err.value.field == "model"
    assert str(hf_cache) in message and "HF_HUB_OFFLINE" in message and "config.json" in message


def test_catalog_id_still_resolves_offline(hf_cache: Path) -> None:
    arch = load_model("Qwen/Qwen2.5-7B-Instruct")
    assert arch.checkpoint is not None and arch.checkpoint.where.startswith("catalog:")


def test_a_cluster_path_is_planned_by_its_folder_name_with_a_note(hf_cache: Path) -> None:
    arch = load_model("/mnt/nfs/ckpt/Qwen2.5-7B-Instruct")
    assert arch.name == "Qwen/Qwen2.5-7B-Instruct"
    assert arch.checkpoint is not None and any("does not exist here" in n for n in arch.checkpoint.notes)


def test_peft_adapter_folder_resolves_to_its_base(tmp_path: Path, hf_cache: Path) -> None:
    base = tmp_path / "base"
    base.mkdir()
    (base / "config.json").write_text(json.dumps(TINY_LLAMA))
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 8, "base_model_name_or_path": str(base)}))
    arch = load_model(str(adapter))
    assert arch.hidden_size == 64
    assert arch.checkpoint is not None and arch.checkpoint.adapter_of == f"local:{adapter}"
    (adapter / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "base_model_name_or_path": "Qwen/Qwen3-8B"}))
    assert load_model(str(adapter)).name == "Qwen/Qwen3-8B"


def test_adapter_without_base_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA"}))
    with pytest.raises(InputError, match="base_model_name_or_path"):
        load_model(str(tmp_path))


def test_download_from_fake_hub_fetches_config_and_headers_only(hf_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    weights = safetensors_bytes(TENSORS)
    repos = {"acme/tiny-llama": {"config.json": _config_bytes(TINY_LLAMA), "model.safetensors": weights}}
    with FakeHub(repos) as fake:
        _go_online(monkeypatch, fake.url)
        arch = load_model("acme/tiny-llama")
        assert arch.checkpoint is not None and arch.checkpoint.where == "hub:acme/tiny-llama@main"
        assert arch.checkpoint.exact_num_parameters == 2 * 128 * 64 + 64
        assert "metadata" in arch.checkpoint.parameter_count_source
        whole_files = [p for m, p, rng in fake.requests if m == "GET" and p.endswith(".safetensors") and rng is None]
        assert whole_files == [], "weights were downloaded"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the config.json is now in the cache
    assert load_model("acme/tiny-llama").checkpoint.where == "hf-cache:acme/tiny-llama@main"


def test_fake_hub_adapter_repo_and_missing_repo(hf_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = json.dumps({"peft_type": "LORA", "base_model_name_or_path": "Qwen/Qwen2.5-0.5B-Instruct"}).encode()
    with FakeHub({"acme/lora": {"adapter_config.json": adapter}}, gated=frozenset()) as fake:
        _go_online(monkeypatch, fake.url)
        assert load_model("acme/lora").name == "Qwen/Qwen2.5-0.5B-Instruct"
        with pytest.raises(InputError, match="no model repo 'acme/nothing'"):
            load_model("acme/nothing")


def test_unreachable_endpoint_falls_back_to_catalog_quickly(hf_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _go_online(monkeypatch, "http://127.0.0.1:9")  # discard port: nothing listens
    assert load_model("Qwen/Qwen3-8B").checkpoint.where.startswith("catalog:")
    with pytest.raises(InputError, match="not reachable"):
        load_model("acme/unknown-model")


def test_only_config_files_may_be_downloaded() -> None:
    with pytest.raises(ValueError):
        hub.download("acme/x", "model.safetensors", None)


def test_safetensors_header_counts() -> None:
    header = {"__metadata__": {}, "a": {"dtype": "BF16", "shape": [3, 4]}, "b": {"dtype": "BF16", "shape": []}}
    assert parameter_counts_from_header(header) == {"BF16": 13}
    with pytest.raises(ValueError):
        parameter_counts_from_header({"a": {"dtype": "BF16", "shape": [-1]}})


def test_multi_token_prediction_layers_past_num_hidden_layers_are_not_counted() -> None:
    """DeepSeek-V3 ships layer 61 (MTP) that transformers does not build; vision blocks keep
    their own numbering."""
    header = {"model.layers.60.mlp.w": {"dtype": "BF16", "shape": [10]},
              "model.layers.61.mlp.w": {"dtype": "BF16", "shape": [1000]},
              "visual.blocks.70.attn.w": {"dtype": "BF16", "shape": [7]}}
    assert parameter_counts_from_header(header, num_layers=61) == {"BF16": 17}
    assert parameter_counts_from_header(header) == {"BF16": 1017}


@pytest.mark.parametrize(("qc", "expected"), [
    ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_use_double_quant": True},
     Quantization("bitsandbytes", 4, double_quant=True)),
    ({"quant_method": "bitsandbytes", "load_in_8bit": True}, Quantization("bitsandbytes", 8)),
    ({"quant_method": "gptq", "bits": 4, "group_size": 128}, Quantization("gptq", 4, 128)),
    ({"quant_method": "awq", "bits": 4, "group_size": 64}, Quantization("awq", 4, 64)),
    ({"quant_method": "fp8", "activation_scheme": "dynamic"}, Quantization("fp8", 8)),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {"num_bits": 4}}}},
     Quantization("compressed-tensors", 4)),
])
def test_quantization_config(qc: dict, expected: Quantization) -> None:
    assert quantization_from_config({"quantization_config": qc}) == expected


def test_quantization_bits_per_weight() -> None:
    # GPTQ 4-bit, group 128: 4 + (16 fp16 scale + 4 packed zero) / 128 bits per weight
    assert Quantization("gptq", 4, 128).bits_per_weight == pytest.approx(4 + 20 / 128)
    # QLoRA NF4 with double quantization: 4 + 8/64 + 32/(64·256) = 4.127 bits (QLoRA paper §2)
    assert Quantization("bitsandbytes", 4, double_quant=True).bits_per_weight == pytest.approx(4.1270, abs=1e-4)


def test_prequantized_local_checkpoint_is_noted(tmp_path: Path) -> None:
    config = {**TINY_LLAMA, "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    arch = load_model(str(tmp_path))
    assert arch.checkpoint is not None and arch.checkpoint.quantization == Quantization("awq", 4, 128)
    assert num_parameters(arch) > 0


def test_the_plan_uses_the_exact_count_and_keeps_the_config_count(tmp_path: Path) -> None:
    from oomless.memory.params import num_config_parameters

    (tmp_path / "config.json").write_text(json.dumps(TINY_LLAMA))
    (tmp_path / "model.safetensors").write_bytes(safetensors_bytes(TENSORS))
    arch = load_model(str(tmp_path))
    assert num_parameters(arch) == 2 * 128 * 64 + 64
    assert num_config_parameters(arch) != num_parameters(arch)
    quantized = {**TINY_LLAMA, "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128}}
    (tmp_path / "config.json").write_text(json.dumps(quantized))
    arch = load_model(str(tmp_path))  # packed int32 storage is no parameter count
    assert num_parameters(arch) == num_config_parameters(arch)


def test_spec_model_revision_reaches_the_cache(hf_cache: Path) -> None:
    from oomless.spec.load import parse_spec, resolve

    make_cache_entry(hf_cache, "acme/tiny-llama", {"config.json": _config_bytes(TINY_LLAMA)})
    make_cache_entry(hf_cache, "acme/tiny-llama", {"config.json": _config_bytes({**TINY_LLAMA, "hidden_size": 128})},
                     branch="v2", commit="e" * 40)
    spec = {"model": "acme/tiny-llama", "hardware": {"gpu": "H100-80GB", "gpus_per_node": 1}, "rollout": {"engine": "hf"}}
    assert resolve(parse_spec(spec)).arch.hidden_size == 64
    assert resolve(parse_spec({**spec, "model_revision": "v2"})).arch.hidden_size == 128


def test_prequantized_checkpoint_is_planned_in_its_stored_format(tmp_path: Path) -> None:
    from oomless.memory.states import frozen_weight_bytes, prequantized_weight_bytes, num_quantizable_parameters
    from oomless.planner.plan import make_plan
    from oomless.spec.load import parse_spec, resolve

    config = {**TINY_LLAMA, "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    arch = load_model(str(tmp_path))
    quantized, total = num_quantizable_parameters(arch), num_parameters(arch)
    stored = prequantized_weight_bytes(arch)
    assert stored == -(-quantized * (4 + 20 / 128) // 8) + (total - quantized) * 2
    spec = {"model": str(tmp_path), "hardware": {"gpu": "H100-80GB", "gpus_per_node": 1},
            "finetune": {"method": "lora"}, "rollout": {"engine": "vllm_colocate"}}
    run = resolve(parse_spec(spec))
    assert frozen_weight_bytes(arch, run.spec.finetune) == stored
    plan = make_plan(run.spec, run.arch, run.gpu, run.archs)
    assert plan.engine.weight_bytes == stored
    full = resolve(parse_spec({**spec, "finetune": {"method": "full"}}))
    assert any("bf16 copy" in w for w in full.warnings)
    assert make_plan(full.spec, full.arch, full.gpu, full.archs).engine.weight_bytes == total * 2  # the bf16 copy
