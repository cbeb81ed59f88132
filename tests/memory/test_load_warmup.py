"""transformers' caching-allocator warm-up before a QLoRA load (`memory.load_warmup`): the block
is sized from the 16-bit model in 4.51-4.57, and it is what an H100 replay of TRL's QLoRA notebook
with the run's releases allocated (benchmarks/results/gpu-qlora-notebook)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oomless.memory import params as P
from oomless.memory.load_warmup import quantized_load_warmup_bytes
from oomless.spec.load import parse_spec, resolve
from oomless.spec.run import Finetune
from tests.helpers import component, phase_peak, plan_of

ROOT = Path(__file__).resolve().parents[2]
QLORA = Finetune(method="qlora")


def arch_of(model: str):
    return resolve(parse_spec({"model": model, "hardware": {"gpu": "H100"}})).arch


def test_untied_head_is_skipped_from_4_54_and_a_tied_one_counted_twice_before() -> None:
    untied, tied = arch_of("Qwen/Qwen2-7B-Instruct"), arch_of("Qwen/Qwen2.5-1.5B-Instruct")
    vh_untied = P.num_embedding_parameters(untied)
    assert quantized_load_warmup_bytes(untied, QLORA, "4.57.3") == P.num_parameters(untied) - vh_untied
    assert quantized_load_warmup_bytes(untied, QLORA, "4.53.3") == P.num_parameters(untied)
    assert quantized_load_warmup_bytes(tied, QLORA, "4.57.3") == P.num_parameters(tied)
    assert quantized_load_warmup_bytes(tied, QLORA, "4.51.0") == P.num_parameters(tied) + P.num_embedding_parameters(tied)


@pytest.mark.parametrize("version", [None, "4.50.3", "5.0.0", "5.24.0"])
def test_no_block_beyond_the_weights_outside_those_releases(version: str | None) -> None:
    assert quantized_load_warmup_bytes(arch_of("Qwen/Qwen2-7B-Instruct"), QLORA, version) == 0


def test_only_a_base_quantized_as_it_loads() -> None:
    arch = arch_of("Qwen/Qwen2-7B-Instruct")
    assert quantized_load_warmup_bytes(arch, Finetune(method="lora"), "4.57.3") == 0
    assert quantized_load_warmup_bytes(arch, Finetune(method="full"), "4.57.3") == 0


def test_the_h100_replay_allocated_the_block() -> None:
    probe = json.loads((ROOT / "benchmarks" / "results" / "gpu-qlora-notebook" / "probe-prompt400.json").read_text())
    assert probe["versions"]["transformers"] == "4.57.3"
    loaded = next(s for s in probe["stages"] if s["stage"] == "from_pretrained")
    block = quantized_load_warmup_bytes(arch_of("Qwen/Qwen2-7B-Instruct"), QLORA, probe["versions"]["transformers"])
    assert abs(loaded["max_allocated_bytes"] - block) <= 0.001 * block


def test_the_load_phase_peaks_at_the_block_and_matches_the_replay() -> None:
    """The notebook's run planned with transformers 4.57: the load phase (less the CUDA context)
    against `max_memory_reserved()` after the trainer was built, on the H100 replay; without the
    release stated the block is not planned."""
    probe = json.loads((ROOT / "benchmarks" / "results" / "gpu-qlora-notebook" / "probe-prompt400.json").read_text())
    built = next(s for s in probe["stages"] if s["stage"] == "trainer_built")["max_reserved_bytes"]
    spec = {"model": "Qwen/Qwen2-7B-Instruct", "hardware": {"gpu": "T4", "gpus_per_node": 1},
            "finetune": {"method": "qlora", "lora_rank": 32,
                         "lora_targets": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]},
            "distribution": {"strategy": "ddp"}, "optimizer": "adamw_8bit", "rollout": {"engine": "hf"},
            "batch": {"micro_batch_size": 8, "num_generations": 8}, "gradient_checkpointing": True,
            "lengths": {"max_prompt_tokens": 400, "max_completion_tokens": 256}, "transformers_version": "4.57.3"}
    plan = plan_of(spec)
    load = phase_peak(plan, "load") - component(plan, "load", "cuda_context")
    assert component(plan, "load", "model_loading.allocator_warmup") > 0
    assert abs(load - built) <= 0.04 * built
    without = plan_of({k: v for k, v in spec.items() if k != "transformers_version"})
    assert phase_peak(without, "load") < phase_peak(plan, "load")
