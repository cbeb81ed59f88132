"""LoRA/QLoRA adapters under torch AMP (plain DDP, mixed precision) are held in one dtype with no
other copy (`roles.adapter_bytes`): fp32 by PEFT's default, bf16 where TRL casts a QLoRA run's.
Measured on an H100 with TRL 1.16 (benchmarks/results/gpu-lora, gpu-qlora): the resident bytes
the run's telemetry recorded are the plan's to the byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oomless.memory import states as S
from oomless.spec.load import parse_spec, resolve
from tests.helpers import plan_of

ROOT = Path(__file__).resolve().parents[2]
LORA = {"method": "lora", "lora_rank": 32,
        "lora_targets": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]}
BASE = {"model": "Qwen/Qwen2.5-1.5B-Instruct", "hardware": {"gpu": "H100", "gpus_per_node": 1},
        "batch": {"micro_batch_size": 8, "num_generations": 8}, "rollout": {"engine": "hf"}, "kl_beta": 0.0,
        "distribution": {"strategy": "ddp"}, "optimizer": "adamw",
        "lengths": {"max_prompt_tokens": 32, "max_completion_tokens": 256}}


def components(spec: dict, name: str) -> dict[str, int]:
    plan = plan_of(spec)
    found = next(p for g in plan.devices if g.role == "train" for p in g.phases if p.name == name)
    return {c.name: c.num_bytes for c in found.components}


def with_finetune(**finetune) -> dict:
    return {**BASE, "finetune": {**LORA, **finetune}}


@pytest.mark.parametrize(("method", "dtype", "per_param"), [("lora", None, 4), ("qlora", None, 2), ("lora", "bf16", 2), ("qlora", "fp32", 4)])
def test_adapters_are_held_once_in_their_dtype(method: str, dtype: str | None, per_param: int) -> None:
    spec = with_finetune(method=method, **({"adapter_dtype": dtype} if dtype else {}))
    run = resolve(parse_spec(spec))
    psi_t = S.num_trainable_parameters(run.arch, run.spec.finetune)
    frozen = S.frozen_weight_bytes(run.arch, run.spec.finetune)
    train = components(spec, "train")
    assert train["policy.weights"] == frozen + psi_t * per_param
    assert "policy.master_weights" not in train
    assert train["policy.grads"] == psi_t * per_param
    assert train["policy.optimizer_states"] == psi_t * 2 * per_param  # torch AdamW: m and v in the parameter dtype


def test_zero_and_pure_bf16_keep_their_own_layouts() -> None:
    for other in ({"distribution": {"strategy": "zero2"}}, {"precision": "bf16"}):
        spec = {**with_finetune(method="qlora"), **other}
        assert "policy.master_weights" in components(spec, "train") or other.get("precision") == "bf16"
        run = resolve(parse_spec(spec))
        psi_t = S.num_trainable_parameters(run.arch, run.spec.finetune)
        assert components(spec, "train")["policy.grads"] <= psi_t * 2


@pytest.mark.parametrize("folder", ["gpu-lora", "gpu-qlora"])
def test_the_h100_runs_held_what_the_plan_says(folder: str) -> None:
    """The measured runs' resident parameters and gradients (telemetry `resident_bytes`, read from
    the model after its step) equal the plan's policy weights and gradients. QLoRA's weights
    within 2 %: bitsandbytes keeps each NF4 weight's absmax and double-quantisation constants
    (0.127 of the plan's 4.127 bits per weight, QLoRA paper §3) in its `quant_state`, which is
    allocated on the GPU but not a parameter the telemetry's PARAM counts."""
    import yaml

    run_dir = ROOT / "benchmarks" / "results" / folder / "Qwen2.5-1.5B-Instruct"
    spec = yaml.safe_load((run_dir / "spec.yaml").read_text())
    spec["model"] = "Qwen/Qwen2.5-1.5B-Instruct"
    records = [json.loads(line) for line in (run_dir / "telemetry.jsonl").read_text().splitlines() if line.strip()]
    train = next(r for r in records if r["phase"] == "train" and r["step"] == 2)
    planned = components(spec, "train")
    assert planned["policy.grads"] == train["resident_bytes"]["GRAD"]
    assert abs(planned["policy.weights"] - train["resident_bytes"]["PARAM"]) <= 0.02 * train["resident_bytes"]["PARAM"]


def test_bf16_adapters_save_no_fp32_copy_of_their_inputs() -> None:
    """PEFT's `_cast_input_dtype` copies the layer input to fp32 for fp32 adapters; for bf16 ones
    (TRL's QLoRA) it returns the input itself, so only dropout makes a new tensor."""
    from oomless.memory import params as P
    from oomless.planner.gpu_terms import lora_per_token

    def per_token(**finetune) -> tuple[int, int]:
        spec = parse_spec(with_finetune(**finetune))
        arch = resolve(spec).arch
        d_in = sum(s.in_features for s in P.decoder_linear_shapes(arch) if S.is_lora_target(s.name, spec.finetune.lora_targets))
        return lora_per_token(spec, arch), d_in

    fp32, d_in = per_token(method="lora", lora_dropout=0.05)
    assert fp32 == 5 * d_in + 7 * 4 * 32
    bf16, _ = per_token(method="qlora", lora_dropout=0.05)
    assert bf16 == 3 * d_in + 7 * 2 * 32
    assert per_token(method="qlora", lora_dropout=0.0)[0] == 7 * 2 * 32
