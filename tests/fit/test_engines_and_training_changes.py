"""The rollout engine is searched (HF generate beside vLLM), the fine-tuning method and the GPU
count move only with --allow and are labelled as changing the training, and every answer
carries its predicted peak per phase."""

from __future__ import annotations

from pathlib import Path

from oomless.fit.search import FitOptions, fit
from oomless.fit.space import CHANGES_THE_TRAINING, math_levels
from oomless.catalog.resolve import load_model
from oomless.spec.load import parse_spec, resolve
from oomless.spec.run import RolloutEngine
from tests.fit.test_fit import MARGIN, assert_sound

# Issue 16's "LoRA Qwen2.5-7B on one RTX 4090" spec, as given there.
LORA_4090 = {
    "model": "Qwen/Qwen2.5-7B-Instruct", "hardware": {"gpu": "RTX-4090", "gpus_per_node": 1, "host_ram_gib": 64},
    "finetune": {"method": "lora", "lora_rank": 16},
    "batch": {"micro_batch_size": 4, "gradient_accumulation_steps": 4, "num_generations": 4},
    "lengths": {"max_prompt_tokens": 512, "max_completion_tokens": 1024}, "kl_beta": 0.0,
    "rollout": {"engine": "vllm_colocate", "gpu_memory_utilization": 0.3},
}


def test_lora_7b_on_one_4090_gets_a_fitting_answer_by_moving_generation() -> None:
    run = resolve(parse_spec(LORA_4090))
    result = fit(run, LORA_4090, Path.cwd(), FitOptions(margin=MARGIN, top_k=2))
    assert not result.input_plan.fits
    assert_sound(result, MARGIN, Path.cwd())
    best = result.best
    assert best is not None and best.changes_training == ()
    assert best.run.spec.rollout.engine == RolloutEngine.hf  # vLLM's copy of the weights does not fit beside LoRA's
    assert not [w for w in best.run.warnings if "is ignored" in w]  # vLLM-only keys are removed, not left ignored
    peaks = best.phase_peaks
    assert {phase for device, phase, _, _ in peaks if device == "train"} >= {"rollout", "train", "optimizer"}
    assert all(peak <= capacity for device, _, peak, capacity in peaks if device != "host")


def test_method_moves_only_when_allowed_and_says_it_changes_the_training() -> None:
    spec = parse_spec({**LORA_4090, "finetune": {"method": "full"}})
    arch = load_model(spec.model)
    assert len(math_levels(spec, arch, frozenset())) == 1
    levels = math_levels(spec, arch, frozenset({"method"}))
    methods = [s.overrides["finetune.method"].value for level in levels[1:] for s in level]
    assert methods == ["lora", "qlora"]  # mildest first
    assert all(s.label.startswith(CHANGES_THE_TRAINING) for level in levels[1:] for s in level)


def test_more_gpus_keep_the_completions_per_step() -> None:
    spec = parse_spec(LORA_4090)
    levels = math_levels(spec, load_model(spec.model), frozenset({"gpus"}))
    counts = [(s.overrides["hardware.num_nodes"], s.overrides["hardware.gpus_per_node"]) for level in levels[1:] for s in level]
    assert counts == [(1, 2), (1, 4), (1, 8)]


def test_one_training_change_is_tried_before_several() -> None:
    spec = parse_spec({**LORA_4090, "finetune": {"method": "full"}})
    levels = math_levels(spec, load_model(spec.model), frozenset({"method", "gpus"}))
    combined = [any(" + " in s.label for s in level) for level in levels[1:]]
    assert combined[0] is False and any(combined)
    for i, is_combined in enumerate(combined):
        if is_combined:  # one setting moving every knob, right after those knobs moved alone
            assert len(levels[1 + i]) == 1 and combined[i - 1] is False


def test_full_7b_on_one_4090_fits_only_with_a_labelled_method_change() -> None:
    data = {**LORA_4090, "finetune": {"method": "full"}}
    run = resolve(parse_spec(data))
    allowed = frozenset({"method"})
    result = fit(run, data, Path.cwd(), FitOptions(margin=MARGIN, allow=allowed, top_k=1))
    assert_sound(result, MARGIN, Path.cwd(), allowed)
    assert result.best is not None and "finetune.method" in result.best.changes_training
    assert result.best.region.startswith(CHANGES_THE_TRAINING)
    assert result.stats.math_level >= 1
