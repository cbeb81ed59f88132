"""What a real TRL GRPO step on an H200 showed (benchmarks/results/gpu/): under plain DDP with
mixed precision the model is held in fp32 (torch AMP, `roles.amp_fp32_params`), HF generation
keeps autocast's bf16 weight casts through each forward, and torch's foreach AdamW holds one
copy of the parameters it steps (`states.optimizer_step_temporary_bytes`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from oomless.memory import params as P
from oomless.memory import states as S
from oomless.spec.load import parse_spec, resolve
from tests.helpers import plan_of

ROOT = Path(__file__).resolve().parents[2]
GIB = 1 << 30
BASE = {"model": "Qwen/Qwen2.5-0.5B-Instruct", "hardware": {"gpu": "H100", "gpus_per_node": 1},
        "batch": {"micro_batch_size": 8, "num_generations": 8}, "rollout": {"engine": "hf"}, "kl_beta": 0.0,
        "distribution": {"strategy": "ddp"},
        "lengths": {"max_prompt_tokens": 32, "max_completion_tokens": 256}}


def phase(spec: dict, name: str) -> dict[str, int]:
    plan = plan_of(spec)
    found = next(p for g in plan.devices if g.role == "train" for p in g.phases if p.name == name)
    return {c.name: c.num_bytes for c in found.components}


def num_params() -> int:
    return P.num_parameters(resolve(parse_spec(BASE)).arch)


def test_ddp_amp_holds_fp32_weights_and_grads_and_no_16_bit_copy() -> None:
    psi = num_params()
    load, train = phase(BASE, "load"), phase(BASE, "train")
    assert load["policy.weights"] == psi * 4 and "policy.master_weights" not in load
    assert train["policy.grads"] == psi * 4
    pure = phase({**BASE, "precision": "bf16"}, "train")
    assert pure["policy.weights"] == psi * 2 and pure["policy.grads"] == psi * 2
    zero = phase({**BASE, "distribution": {"strategy": "zero2"}}, "load")
    assert zero["policy.weights"] == psi * 2  # DeepSpeed keeps the 16-bit copy beside its fp32 master


def test_trl_builds_the_reference_in_the_policy_dtype_under_amp() -> None:
    psi = num_params()
    kl = {**BASE, "kl_beta": 0.04}
    assert phase(kl, "load")["reference.weights"] == psi * 4
    assert phase({**kl, "precision": "bf16"}, "load")["reference.weights"] == psi * 2
    assert phase({**kl, "distribution": {"strategy": "zero2"}}, "load")["reference.weights"] == psi * 2  # DeepSpeed casts it


def test_foreach_adamw_steps_with_one_copy_of_the_parameters() -> None:
    psi = num_params()
    assert phase(BASE, "optimizer")["optimizer.step_temporaries"] == psi * 4  # unset under DDP: torch's foreach
    assert "optimizer.step_temporaries" not in phase({**BASE, "optimizer_implementation": "fused"}, "optimizer")
    loop = phase({**BASE, "optimizer_implementation": "for_loop"}, "optimizer")["optimizer.step_temporaries"]
    arch = resolve(parse_spec(BASE)).arch
    assert loop == 2 * arch.vocab_size * arch.hidden_size * 4 < psi * 4  # sqrt and quotient of the embedding
    assert phase({**BASE, "precision": "bf16"}, "optimizer")["optimizer.step_temporaries"] == psi * 2
    assert "optimizer.step_temporaries" not in phase({**BASE, "optimizer": "adamw_8bit"}, "optimizer")


@pytest.mark.parametrize("strategy, expected", [("zero2", None), ("fsdp", "foreach")])
def test_sharded_steps(strategy: str, expected: str | None) -> None:
    spec = {**BASE, "hardware": {"gpu": "H100", "gpus_per_node": 4}, "distribution": {"strategy": strategy}}
    got = phase(spec, "optimizer").get("optimizer.step_temporaries", 0)
    psi = num_params()
    assert got == (-(-psi // 4) * 4 if expected else 0)  # DeepSpeed's own optimizer under ZeRO: none
    client = phase({**spec, "optimizer_implementation": "foreach"}, "optimizer")["optimizer.step_temporaries"]
    assert client == -(-psi // 4) * 4  # HF's torch AdamW wrapped by ZeRO steps the flat fp32 partition
    assert "optimizer.step_temporaries" not in phase({**spec, "distribution": {"strategy": strategy, "offload_optimizer": True},
                                                      "optimizer_implementation": "foreach"}, "optimizer")


def test_hf_generation_under_amp_keeps_the_autocast_weight_casts() -> None:
    arch = resolve(parse_spec(BASE)).arch
    rollout = phase(BASE, "rollout")
    assert rollout["generate.autocast_weight_cache"] == S.autocast_weight_cache_bytes(arch)
    assert S.autocast_weight_cache_bytes(arch) == (S.num_quantizable_parameters(arch) + arch.vocab_size * arch.hidden_size) * 2
    assert "generate.autocast_weight_cache" not in phase({**BASE, "precision": "bf16"}, "rollout")
    assert "generate.autocast_weight_cache" not in phase({**BASE, "distribution": {"strategy": "zero3"}}, "rollout")
    lora = {**BASE, "finetune": {"method": "lora"}}  # only the fp32 adapters are cast (`roles.adapter_bytes`)
    assert phase(lora, "rollout")["generate.autocast_weight_cache"] == S.num_trainable_parameters(arch, parse_spec(lora).finetune) * 2
    assert "generate.autocast_weight_cache" not in phase({**lora, "finetune": {"method": "qlora"}}, "rollout")


def test_the_h200_measurements_agree_with_the_plan_within_7_percent() -> None:
    """The committed H200 run: allocated peaks of load, the step-2 rollout and the optimizer
    step against each committed spec's plan as the run's telemetry compares them (less what
    allocator statistics cannot see: the CUDA context)."""
    from oomless.train.telemetry import planned_phases

    folder = ROOT / "benchmarks" / "results" / "gpu"
    for model in ("Qwen2.5-0.5B-Instruct", "Qwen2.5-1.5B-Instruct", "Qwen2.5-3B-Instruct"):
        records = [json.loads(line) for line in (folder / model / "telemetry.jsonl").read_text().splitlines()]
        steady = {r["phase"]: r["peak_allocated_bytes"] for r in records if r["step"] in (0, 2)}
        spec = yaml.safe_load((folder / model / "spec.yaml").read_text())
        spec["model"] = f"Qwen/{model}"
        planned = planned_phases(plan_of(spec), "cuda")
        for name in ("load", "rollout", "optimizer"):
            error = (planned[name].planned_bytes - steady[name]) / steady[name]
            assert abs(error) < 0.07, (model, name, planned[name].planned_bytes / GIB, steady[name] / GIB)
