"""ms-swift PPO scripts (`swift rlhf --rlhf_type ppo`, adapters/swift/ppo.py): TRL's PPOTrainer
under ms-swift — four models, HF generation, the value model from --reward_model, LoRA on it
when the policy has LoRA — read, planned, patched without vLLM, and exported back."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from oomless.adapters import HardwareFlags, import_native
from oomless.adapters.swift.writer import export_files
from oomless.catalog.resolve import _catalog_dir
from oomless.errors import InputError
from oomless.spec.load import parse_spec
from tests.adapters.swift_cases import imported, script
from tests.helpers import plan_of

POLICY = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.fixture
def reward_dir(tmp_path: Path) -> str:
    folder = tmp_path / "skywork-rm"
    folder.mkdir()
    shutil.copy(Path(str(_catalog_dir())) / "meta-llama--Llama-3.1-8B.json", folder / "config.json")
    return str(folder)


def ppo(reward: str, **flags) -> dict:
    return {"rlhf_type": "ppo", "model": POLICY, "reward_model": reward, "tuner_type": "full", "deepspeed": "zero3",
            "per_device_train_batch_size": 1, "gradient_accumulation_steps": 2, "max_length": 2048,
            "response_length": 512, **flags}


def test_a_full_ppo_script_holds_four_models_and_generates_with_hf(reward_dir: str) -> None:
    spec, ignored, _ = imported(script(ppo(reward_dir, use_vllm="true", kl_coef=0.1), {"NPROC_PER_NODE": 8}, pre=""))
    assert spec["algorithm"] == "ppo" and spec["kl_beta"] == 0.1
    assert spec["critic"] == {"model": reward_dir, "wrapped_with_actor": True}
    assert spec["reward_model"] == {"model": reward_dir}
    assert spec["rollout"] == {"engine": "hf", "keeps_generation_scores": True, "recompute_old_logprobs": False}
    assert spec["batch"] == {"micro_batch_size": 1, "gradient_accumulation_steps": 2, "num_generations": 1,
                             "logprob_micro_batch_size": 2}
    assert spec["lengths"] == {"max_prompt_tokens": 2048, "max_completion_tokens": 512}
    assert any(line.startswith("--use_vllm: no effect with --rlhf_type ppo") for line in ignored)
    plan = plan_of(spec)
    assert {r.value for r in plan.models} == {"actor", "reference", "critic", "reward"}


def test_a_lora_ppo_script_gives_the_value_model_lora(reward_dir: str) -> None:
    spec, _, _ = imported(script(ppo(reward_dir, tuner_type="lora", deepspeed="zero2"), {"NPROC_PER_NODE": 4}))
    assert spec["critic"] == {"model": reward_dir, "wrapped_with_actor": True, "lora": True}
    assert "recompute_old_logprobs" not in spec["rollout"]
    plan = plan_of(spec)
    assert plan.models[next(r for r in plan.models if r.value == "critic")].num_trainable < 10**8


@pytest.mark.parametrize(("flags", "field"), [
    ({"reward_model": None}, "--reward_model"),
    ({"num_mini_batches": 3}, "--num_mini_batches"),
])
def test_bad_ppo_scripts_name_the_flag(reward_dir: str, flags: dict, field: str) -> None:
    args = {k: v for k, v in ppo(reward_dir, **flags).items() if v is not None}
    with pytest.raises(InputError) as err:
        imported(script(args, {"NPROC_PER_NODE": 8}))
    assert err.value.field == field


def test_two_reward_models_are_refused(reward_dir: str) -> None:
    with pytest.raises(InputError, match="PPO takes one"):
        imported(script(ppo([reward_dir, reward_dir]), {"NPROC_PER_NODE": 8}))


def test_fit_is_offered_no_vllm_engine_for_ppo(tmp_path: Path, reward_dir: str) -> None:
    path = tmp_path / "ppo.sh"
    path.write_text(script(ppo(reward_dir), {"NPROC_PER_NODE": 8}), encoding="utf-8")
    assert import_native("swift", path, HardwareFlags(gpu="A100-80GB")).idle_engine == {}
    grpo = tmp_path / "grpo.sh"
    grpo.write_text(script({"model": POLICY, "num_generations": 4, "max_length": 1024}, {"NPROC_PER_NODE": 4}),
                    encoding="utf-8")
    assert import_native("swift", grpo, HardwareFlags(gpu="A100-80GB")).idle_engine  # GRPO may turn vLLM on


def test_a_ppo_spec_exports_to_a_script_that_reads_back(reward_dir: str) -> None:
    spec, _, _ = imported(script(ppo(reward_dir), {"NPROC_PER_NODE": 8}))
    files = export_files(parse_spec(spec))
    text = next(iter(v for k, v in files.items() if k.endswith(".sh")))
    assert "--rlhf_type ppo" in text and "--kl_coef 0.05" in text and "--num_generations" not in text
    assert text.splitlines()[1].startswith("# PPO of")


def test_a_ppo_spec_with_vllm_is_not_written_for_ms_swift(reward_dir: str) -> None:
    spec, _, _ = imported(script(ppo(reward_dir), {"NPROC_PER_NODE": 8}))
    spec["rollout"] = {"engine": "vllm_colocate"}
    with pytest.raises(InputError, match="rollout.engine|transformers"):
        export_files(parse_spec(spec))
