"""Spec validation: every bad input is one InputError line naming the field and what is allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomless.errors import InputError
from oomless.spec.load import load_run, parse_spec, read_yaml, resolve
from oomless.spec.run import RunSpec, Strategy
from tests.helpers import BASE_SPEC, EXAMPLES, merged


def test_base_spec_parses_with_documented_defaults() -> None:
    spec = parse_spec(BASE_SPEC)
    assert isinstance(spec, RunSpec)
    assert spec.steps_per_generation == 4  # defaults to gradient accumulation (TRL)
    assert spec.logprob_micro_batch_size == 2
    assert spec.distribution.strategy == Strategy.zero3
    assert spec.kl_beta == 0.04


def test_every_field_is_documented() -> None:
    def walk(model: type) -> list[str]:
        missing = []
        for name, field in model.model_fields.items():
            if not field.description and not (isinstance(field.annotation, type) and hasattr(field.annotation, "model_fields")):
                missing.append(f"{model.__name__}.{name}")
            ann = field.annotation
            if isinstance(ann, type) and hasattr(ann, "model_fields"):
                missing += walk(ann)
        return missing

    assert walk(RunSpec) == []


@pytest.mark.parametrize(
    ("overrides", "field", "fragment"),
    [
        ({"hardware.gpus_per_node": 0}, "hardware.gpus_per_node", "greater than or equal to 1"),
        ({"rollout.gpu_memory_utilization": 1.5}, "rollout.gpu_memory_utilization", "less than or equal to 1"),
        ({"rollout.gpu_memory_utilization": 0}, "rollout.gpu_memory_utilization", "greater than 0"),
        ({"lengths.max_prompt_tokens": -5}, "lengths.max_prompt_tokens", "greater than or equal to 1"),
        ({"distribution.strategy": "zero4"}, "distribution.strategy", "'ddp', 'zero1', 'zero2', 'zero3' or 'fsdp'"),
        ({"batch.micro_batch": 2}, "batch.micro_batch", "unknown key; allowed here: micro_batch_size"),
        ({"rollout.sleep_level": 3}, "rollout.sleep_level", "0, 1 or 2"),
        ({"hardware.gpu": None}, "hardware", "gpu_capacity_gib"),
    ],
)
def test_invalid_values_name_field_and_allowed(overrides: dict, field: str, fragment: str) -> None:
    with pytest.raises(InputError) as info:
        parse_spec(merged(BASE_SPEC, **overrides))
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith(field)
    assert fragment in text


def test_missing_model_is_named() -> None:
    data = merged(BASE_SPEC)
    del data["model"]
    with pytest.raises(InputError, match=r"^model: required field is missing$"):
        parse_spec(data)


def test_tp_must_divide_kv_heads() -> None:
    # Qwen2.5-1.5B: 12 attention heads, 2 KV heads. TP 3 divides 12 but neither divides 2
    # nor is a multiple of it.
    spec = parse_spec(merged(BASE_SPEC, **{"rollout.tensor_parallel_size": 3}))
    with pytest.raises(InputError, match=r"^rollout.tensor_parallel_size: 3 neither divides nor is a multiple of the 2 KV heads"):
        resolve(spec)


def test_tp_must_divide_attention_heads() -> None:
    spec = parse_spec(merged(BASE_SPEC, **{"hardware.gpus_per_node": 8, "rollout.tensor_parallel_size": 8}))
    with pytest.raises(InputError, match="does not divide the 12 attention heads"):
        resolve(spec)


def test_unknown_model_suggests_closest() -> None:
    spec = parse_spec(merged(BASE_SPEC, model="Qwen/Qwen2.5-7B-Instruk"))
    with pytest.raises(InputError) as info:
        resolve(spec)
    assert str(info.value).startswith("model:")
    assert "Qwen/Qwen2.5-7B-Instruct" in str(info.value)


def test_unknown_gpu_suggests_closest() -> None:
    spec = parse_spec(merged(BASE_SPEC, **{"hardware.gpu": "A100-80G"}))
    with pytest.raises(InputError) as info:
        resolve(spec)
    assert str(info.value).startswith("hardware.gpu:")
    assert "A100-80GB" in str(info.value)


def test_param_offload_needs_sharding() -> None:
    with pytest.raises(InputError, match="offload_params needs strategy zero3 or fsdp"):
        parse_spec(merged(BASE_SPEC, **{"distribution.strategy": "zero2", "distribution.offload_params": True}))


def test_separate_rollout_needs_a_training_gpu() -> None:
    with pytest.raises(InputError, match="leaves no training GPU"):
        parse_spec(merged(BASE_SPEC, **{"rollout.engine": "vllm_separate", "rollout.num_gpus": 4}))


def test_malformed_yaml_is_one_line_with_position(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: Qwen/Qwen2.5-1.5B-Instruct\nhardware: [unclosed\n")
    with pytest.raises(InputError) as info:
        read_yaml(bad)
    assert "malformed YAML at line" in str(info.value)
    assert "\n" not in str(info.value)


def test_top_level_must_be_mapping(tmp_path: Path) -> None:
    bad = tmp_path / "list.yaml"
    bad.write_text("- 1\n- 2\n")
    with pytest.raises(InputError, match="expected a mapping"):
        read_yaml(bad)


def test_missing_file() -> None:
    with pytest.raises(InputError, match="no such file"):
        read_yaml("/nonexistent/spec.yaml")


@pytest.mark.parametrize(
    "path", sorted(p for p in EXAMPLES.rglob("*.yaml") if "native" not in p.parts), ids=lambda p: p.name
)
def test_shipped_examples_load(path: Path) -> None:
    run = load_run(path)
    assert run.arch.num_layers > 0


def test_ignored_fields_are_warned_not_defaults() -> None:
    from oomless.spec.ignored import ignored_fields

    spec = parse_spec(merged(BASE_SPEC, **{"finetune.lora_rank": 16, "rollout.engine": "hf",
                                            "rollout.sleep_level": 0, "ray.memory_usage_threshold": 0.9}))
    messages = ignored_fields(spec)
    assert any(m.startswith("finetune.lora_rank is ignored") for m in messages)
    assert any(m.startswith("rollout.gpu_memory_utilization is ignored") for m in messages)
    assert any(m.startswith("ray.memory_usage_threshold is ignored") for m in messages)
    assert ignored_fields(parse_spec(BASE_SPEC)) == []


def test_relative_model_path_is_read_next_to_the_spec(tmp_path: Path) -> None:
    import json

    from tests.helpers import TINY_CONFIG

    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny" / "config.json").write_text(json.dumps(TINY_CONFIG))
    spec = tmp_path / "run.yaml"
    spec.write_text("model: tiny\nhardware: {gpu_capacity_gib: 10, gpus_per_node: 1}\nrollout: {engine: hf}\n")
    run = load_run(spec)
    assert run.arch.hidden_size == 8


@pytest.mark.parametrize(
    ("groups", "fragment"),
    [
        ([{"roles": ["actor", "actor", "vllm"], "gpus_per_node": 4}], "lists actor twice"),
        ([{"roles": ["reference", "vllm"], "gpus_per_node": 4}], "the actor must be placed"),
        ([{"roles": ["actor", "vllm"], "gpus_per_node": 8}], "use 8 GPUs per node; hardware.gpus_per_node is 4"),
        ([{"roles": ["actor"], "gpus_per_node": 4}], "no placement group holds vllm"),
        ([{"roles": ["actor", "critic", "vllm"], "gpus_per_node": 4}], "a critic is placed but algorithm is not ppo"),
    ],
)
def test_placement_groups_are_validated(groups: list, fragment: str) -> None:
    with pytest.raises(InputError, match=fragment):
        parse_spec(merged(BASE_SPEC, **{"placement.groups": groups}))
