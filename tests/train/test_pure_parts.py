"""The torch-free parts of `oomless train`: spec → TRL arguments, launch files, batching, rewards."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oomless.errors import InputError
from oomless.spec.load import parse_spec
from oomless.spec.train_section import RewardSpec, TrainSection
from oomless.train import batching as B
from oomless.train import launch as L
from oomless.train import rewards as R
from oomless.train import settings as S
from tests.helpers import BASE_SPEC, merged

TRAIN = {"data": {"arithmetic": {"num_samples": 10}}, "rewards": ["accuracy"]}
CPU = S.Machine(device="cpu")
GPU = S.Machine(device="cuda", num_gpus=4, has_vllm=True, has_bitsandbytes=True)


def spec_of(**overrides):
    return parse_spec(merged({**BASE_SPEC, "train": TRAIN}, **overrides))


def test_train_section_needs_one_data_source_and_known_rewards() -> None:
    with pytest.raises(ValueError, match="exactly one of path, name, arithmetic"):
        TrainSection.model_validate({"data": {"path": "a.jsonl", "name": "gsm8k"}, "rewards": ["accuracy"]})
    with pytest.raises(ValueError, match="module:function"):
        TrainSection.model_validate({"data": {"path": "a.jsonl"}, "rewards": ["accurcy"]})
    section = TrainSection.model_validate({"data": {"path": "a.jsonl"}, "rewards": ["length", {"function": "m:f", "weight": 0.5}]})
    assert [r.function for r in section.rewards] == ["length", "m:f"]


def test_one_optimizer_step_is_one_trl_batch() -> None:
    spec = spec_of(**{"batch.micro_batch_size": 4, "batch.gradient_accumulation_steps": 4, "batch.num_generations": 8,
                      "batch.steps_per_generation": 8})
    kwargs = S.grpo_config_kwargs(spec, spec.train, GPU, "out", 10)
    assert kwargs["per_device_train_batch_size"] == 16 and kwargs["gradient_accumulation_steps"] == 1
    assert kwargs["steps_per_generation"] == 2  # 8 micro-steps per rollout = 2 optimizer steps
    assert kwargs["use_vllm"] and kwargs["vllm_mode"] == "colocate" and kwargs["vllm_enable_sleep_mode"]
    assert kwargs["vllm_gpu_memory_utilization"] == 0.4 and kwargs["bf16"] and not kwargs["use_cpu"]


def test_cpu_run_is_fp32_without_vllm() -> None:
    spec = spec_of(**{"rollout": {"engine": "hf"}})
    kwargs = S.grpo_config_kwargs(spec, spec.train, CPU, "out", 10)
    assert kwargs["use_cpu"] and not kwargs["bf16"] and not kwargs["use_vllm"]
    assert kwargs["model_init_kwargs"]["dtype"] == "float32"
    assert any("fp32" in n for n in S.notes(spec, CPU))


def test_qlora_loads_the_base_the_plan_sizes() -> None:
    """QLoRA on a GPU loads a 4-bit NF4, double-quantised base (what `frozen_weight_bytes`
    sizes), not the half-precision base a LoRA run loads."""
    kwargs = S.grpo_config_kwargs(spec_of(**{"finetune.method": "qlora"}), spec_of().train, GPU, "out", 10)
    quant = kwargs["model_init_kwargs"]["quantization_config"]
    assert quant.load_in_4bit and quant.bnb_4bit_quant_type == "nf4" and quant.bnb_4bit_use_double_quant
    assert str(quant.bnb_4bit_compute_dtype) == "torch.bfloat16" == "torch." + kwargs["model_init_kwargs"]["dtype"]
    single = S.grpo_config_kwargs(spec_of(**{"finetune.method": "qlora", "finetune.double_quant": False}), spec_of().train, GPU, "out", 10)
    assert not single["model_init_kwargs"]["quantization_config"].bnb_4bit_use_double_quant
    lora = S.grpo_config_kwargs(spec_of(**{"finetune.method": "lora"}), spec_of().train, GPU, "out", 10)
    assert "quantization_config" not in lora["model_init_kwargs"]


def test_batch_shapes_trl_cannot_run_are_bad_input() -> None:
    with pytest.raises(InputError, match="steps_per_generation"):
        S.batch_layout(spec_of(**{"batch.gradient_accumulation_steps": 4, "batch.steps_per_generation": 6}))
    with pytest.raises(InputError, match="num_generations"):
        S.batch_layout(spec_of(**{"batch.micro_batch_size": 3, "batch.gradient_accumulation_steps": 1, "batch.num_generations": 2}))


def test_qlora_vllm_and_8bit_adam_are_refused_on_cpu() -> None:
    spec = spec_of(**{"finetune.method": "qlora", "optimizer": "adamw_8bit"})
    lines = S.refusals(spec, CPU)
    assert any(line.startswith("finetune.method: qlora needs bitsandbytes and a CUDA GPU") for line in lines)
    assert any(line.startswith("rollout.engine: vllm_colocate needs vLLM") for line in lines)
    assert any(line.startswith("optimizer: adamw_8bit") for line in lines)
    assert S.refusals(spec, GPU) == []


def test_lora_arguments_follow_the_spec() -> None:
    spec = spec_of(**{"finetune": {"method": "lora", "lora_rank": 16, "lora_alpha": 32, "lora_targets": ["q_proj"]}})
    assert S.lora_kwargs(spec) == {"r": 16, "lora_alpha": 32, "lora_dropout": 0.0, "target_modules": ["q_proj"], "task_type": "CAUSAL_LM"}
    assert S.lora_kwargs(spec_of()) is None


def test_zero3_offload_becomes_a_deepspeed_file() -> None:
    spec = spec_of(**{"distribution": {"strategy": "zero3", "offload_optimizer": True, "offload_params": True}})
    ds = L.deepspeed_config(spec)
    zero = ds["zero_optimization"]
    assert zero["stage"] == 3 and zero["offload_optimizer"]["device"] == "cpu" and zero["offload_param"]["device"] == "cpu"
    assert zero["stage3_prefetch_bucket_size"] == 50_000_000 and ds["train_micro_batch_size_per_gpu"] == "auto"
    acc = L.accelerate_config(spec)
    assert acc["distributed_type"] == "DEEPSPEED" and acc["num_processes"] == 4
    assert set(L.launch_files(spec)) == {"accelerate.yaml", "deepspeed.json"}


def test_zero2_has_no_stage3_keys_and_fsdp_no_deepspeed_file() -> None:
    zero = L.deepspeed_config(spec_of(**{"distribution": {"strategy": "zero2"}}))["zero_optimization"]
    assert zero["stage"] == 2 and not any(k.startswith("stage3") for k in zero) and "offload_optimizer" not in zero
    fsdp = spec_of(**{"distribution": {"strategy": "fsdp", "offload_params": True}, "hardware.num_nodes": 2})
    acc = L.accelerate_config(fsdp)
    assert acc["distributed_type"] == "FSDP" and acc["fsdp_config"]["fsdp_offload_params"] and acc["num_processes"] == 8
    assert L.deepspeed_config(fsdp) is None and set(L.launch_files(fsdp)) == {"accelerate.yaml"}


@given(st.integers(1, 300), st.integers(1, 64))
def test_every_sample_is_in_exactly_one_micro_batch(n: int, micro: int) -> None:
    ranges = B.micro_batch_ranges(n, micro)
    assert [i for lo, hi in ranges for i in range(lo, hi)] == list(range(n))
    assert all(hi - lo <= micro for lo, hi in ranges)


@given(st.integers(2, 256), st.integers(1, 64), st.sampled_from(["grpo", "bnpo", "dr_grpo", "dapo"]))
def test_micro_batch_weights_rebuild_the_step_loss(n: int, micro: int, loss_type: str) -> None:
    tokens = [1 + (7 * i) % 5 for i in range(n)]  # tokens per completion
    ranges = B.micro_batch_ranges(n, micro)
    weights = [B.loss_weight(loss_type, hi - lo, n, sum(tokens[lo:hi]), sum(tokens)) for lo, hi in ranges]
    if loss_type == "dapo":
        assert weights == [1.0] * len(ranges)  # each micro-batch already divides by the step's token count
    else:
        assert math.isclose(sum(weights), 1.0)


def test_halving_keeps_the_effective_batch() -> None:
    split = B.halve(8, 16)
    assert (split.micro_batch_size_after, split.gradient_accumulation_before, split.gradient_accumulation_after) == (4, 2, 4)
    assert B.halve(1, 16) is None


def test_accuracy_compares_answers_mathematically() -> None:
    completions = ["7", "<answer>7</answer>", "07", "8", [{"role": "assistant", "content": "7"}], "seven"]
    assert R.accuracy(completions, answer=["7"] * 6) == [1.0, 1.0, 1.0, 0.0, 1.0, 0.0]
    assert R.answers_match("\\frac{1}{2}", "0.5")  # math-verify
    assert R.accuracy(["3"], answer=[None]) == [None]


def test_format_and_length_rewards() -> None:
    assert R.format_reward(["<think>a</think> <answer>1</answer>", "1"]) == [1.0, 0.0]
    assert R.format_reward(["12", "1a"], pattern=r"\d+", value=0.5) == [0.5, 0.0]
    # DAPO: free up to 6 tokens, -1/2 per token until 8, -1 beyond
    assert R.length_reward([[0] * 6, [0] * 7, [0] * 8, [0] * 9], max_tokens=8, cache_tokens=2) == [0.0, -0.5, -1.0, -1.0]


def test_custom_reward_is_imported_from_the_spec_folder(tmp_path: Path) -> None:
    (tmp_path / "my_rewards.py").write_text("def short(completions, **kw):\n    return [1.0 / (1 + len(c)) for c in completions]\n")
    func = R.build_reward(RewardSpec(function="my_rewards:short"), 16, tmp_path)
    assert func(["", "abc"]) == [1.0, 0.25]
    with pytest.raises(InputError, match="has no function 'nope'"):
        R.build_reward(RewardSpec(function="my_rewards:nope"), 16, tmp_path)


def test_liger_kernels_without_the_fused_loss_is_refused() -> None:
    """TRL's `use_liger_kernel` turns on Liger's model kernels and its fused GRPO loss together:
    a plan with the kernels but not the loss would assume kernels the run does not apply."""
    lines = S.refusals(spec_of(**{"liger_kernels": True, "logits": "full_bf16"}), GPU)
    assert any(line.startswith("liger_kernels: TRL applies Liger's model kernels only with its fused loss") for line in lines)
    assert not any(line.startswith("liger_kernels") for line in S.refusals(spec_of(**{"liger_kernels": True, "logits": "fused"}), GPU))
