"""VLM-R1 adapter: the native S3 torchrun launches are the seed specs; export, round trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oomless.errors import InputError
from tests.adapters.native_helpers import NATIVE, check_golden, imported, round_trip, seed_spec

HW = {"gpu": "H20"}


@pytest.mark.parametrize("case", ["before", "after"])
def test_native_s3_is_the_seed_spec(case: str) -> None:
    assert imported("vlmr1", NATIVE / f"s3-{case}.sh", **HW) == seed_spec(f"s3-{case}.yaml")


def test_deepspeed_json_next_to_the_script_is_read(tmp_path: Path) -> None:
    (tmp_path / "ds.json").write_text(json.dumps({"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}))
    script = tmp_path / "run.sh"
    script.write_text("torchrun --nproc_per_node=2 src/open_r1/grpo_jsonl.py --deepspeed ds.json "
                      "--model_name_or_path Qwen/Qwen2.5-VL-3B-Instruct --per_device_train_batch_size 2 --num_generations 8 "
                      "--use_peft true --lora_r 64 --lora_alpha 128 --gradient_accumulation_steps 4\n")
    spec = imported("vlmr1", script, **HW)
    assert spec.distribution.strategy.value == "zero2" and spec.distribution.offload_optimizer
    assert (spec.batch.micro_batch_size, spec.batch.gradient_accumulation_steps, spec.steps_per_generation) == (16, 4, 1)
    assert spec.finetune.method.value == "lora" and spec.finetune.lora_rank == 64


@pytest.mark.parametrize(("flags", "field"), [
    ("--per_device_train_batch_size four", "--per_device_train_batch_size"),
    ("--use_vllm true", "--use_vllm"),
    ("--attn_implementation flash_attention_9", "--attn_implementation"),
])
def test_bad_flags(tmp_path: Path, flags: str, field: str) -> None:
    script = tmp_path / "run.sh"
    script.write_text(f"torchrun --nproc_per_node=2 src/open_r1/grpo_jsonl.py --model_name_or_path Qwen/Qwen2.5-VL-3B-Instruct {flags}\n")
    with pytest.raises(InputError) as err:
        imported("vlmr1", script, **HW)
    assert err.value.field == field


@pytest.mark.parametrize("case", ["before", "after"])
def test_export_round_trips(tmp_path: Path, case: str) -> None:
    spec = imported("vlmr1", NATIVE / f"s3-{case}.sh", **HW)
    assert round_trip("vlmr1", spec, tmp_path, **HW) == [spec]
    if case == "before":
        check_golden(tmp_path / "run_vlmr1.sh", "vlmr1/run_vlmr1.sh")
        check_golden(tmp_path / "zero3.json", "vlmr1/zero3.json")


@pytest.mark.parametrize("case", ["before", "after"])
def test_yaml_seed_spec_round_trips(tmp_path: Path, case: str) -> None:
    seed = seed_spec(f"s3-{case}.yaml")
    assert round_trip("vlmr1", seed, tmp_path, **HW) == [seed]


def test_export_refuses_vllm_and_ray(tmp_path: Path) -> None:
    from oomless.adapters import export_native

    with pytest.raises(InputError) as err:
        export_native("vlmr1", seed_spec("s4-before.yaml"), tmp_path, force=False)
    assert err.value.field == "rollout.engine"


def test_export_refuses_a_rollout_spanning_micro_steps(tmp_path: Path) -> None:
    """VLM-R1 generates every micro-step: accumulation without steps_per_generation 1 would
    read back as a different run."""
    from oomless.adapters import export_native

    seed = seed_spec("s3-before.yaml")
    spanning = seed.model_copy(update={"batch": seed.batch.model_copy(update={"micro_batch_size": 4, "gradient_accumulation_steps": 4})})
    with pytest.raises(InputError) as err:
        export_native("vlmr1", spanning, tmp_path, force=False)
    assert err.value.field == "batch.steps_per_generation"
    per_micro_step = spanning.model_copy(update={"batch": spanning.batch.model_copy(update={"steps_per_generation": 1})})
    assert round_trip("vlmr1", per_micro_step, tmp_path / "ok", **HW) == [per_micro_step]
