"""Safer-only fit (doctor's call after a crash): a measured gap as an absolute margin, and no
safety setting of the crashed run lowered unless its plan keeps the gap free on top of the
margin, and then named in `Choice.lowers_safety`."""

from __future__ import annotations

import functools
from pathlib import Path

from oomless.fit.probe import Margin, slack_vector
from oomless.fit.safety import lowered_settings
from oomless.fit.search import FitOptions, FitResult, fit
from oomless.planner.plan import make_plan
from oomless.spec.load import parse_spec, resolve
from oomless.units import gib_to_bytes
from tests.helpers import BASE_SPEC, merged

GAP = gib_to_bytes(6)
# Full fine-tuning of 1.5B on 4 × A100-40GB, vLLM colocated and sleeping, recomputation on:
# fit's fastest answers turn recomputation off, the riskier direction after a crash.
DATA = merged(BASE_SPEC, **{"hardware.gpu": "A100-40GB", "batch.micro_batch_size": 4, "batch.gradient_accumulation_steps": 2,
                            "lengths.max_completion_tokens": 1024, "rollout.gpu_memory_utilization": 0.3})


def _spec(**overrides: object):
    return parse_spec(merged(DATA, **overrides))


@functools.lru_cache(maxsize=None)
def _fit(safer: bool) -> FitResult:
    run = resolve(parse_spec(DATA))
    options = FitOptions(margin_bytes=GAP, keep_safety_of=run.spec) if safer else FitOptions()
    return fit(run, DATA, Path.cwd(), options)


def _choices(result: FitResult) -> list:
    return ([result.best] if result.best else []) + list(result.alternatives)


def test_lowered_settings_name_each_riskier_direction_and_nothing_else() -> None:
    kept = _spec()
    assert lowered_settings(kept, kept) == ()
    riskier = _spec(**{"gradient_checkpointing": False, "distribution.strategy": "zero2", "rollout.sleep_level": 0,
                       "rollout.gpu_memory_utilization": 0.5, "batch.micro_batch_size": 8, "logits": "full_fp32"})
    names = {item.split(" ")[0] for item in lowered_settings(kept, riskier)}
    assert names == {"gradient_checkpointing", "distribution.strategy", "rollout.sleep_level",
                     "rollout.gpu_memory_utilization", "batch.micro_batch_size", "logits"}
    safer = _spec(**{"distribution.offload_optimizer": True, "rollout.sleep_level": 2, "rollout.gpu_memory_utilization": 0.2,
                     "batch.micro_batch_size": 1, "logits": "fused", "distribution.strategy": "fsdp"})
    assert lowered_settings(kept, safer) == ()
    assert "distribution.offload_optimizer true → false" in lowered_settings(safer, kept)


def test_settings_that_mean_nothing_in_the_new_layout_are_not_compared() -> None:
    kept = _spec()
    separate = _spec(**{"rollout.engine": "vllm_separate", "rollout.sleep_level": 0, "rollout.num_gpus": 1,
                        "rollout.gpu_memory_utilization": 0.9})
    # sleep levels and utilization compare only between engines that share the trainer's GPUs.
    assert lowered_settings(kept, separate) == ()
    generate = _spec(**{"rollout.engine": "hf", "rollout.sleep_level": 0})
    assert lowered_settings(kept, generate) == ()


def test_margin_is_the_larger_of_bytes_and_fraction_plus_the_extra() -> None:
    assert Margin(num_bytes=5, fraction=0.1).of(1000) == 100
    assert Margin(num_bytes=500, fraction=0.1).of(1000) == 500
    assert Margin(num_bytes=5, fraction=0.1, extra_bytes=7).of(1000) == 107
    options = FitOptions(margin=Margin(fraction=0.05), margin_bytes=GAP)
    assert options.effective_margin.of(gib_to_bytes(80)) == GAP
    assert options.lowering_margin.of(gib_to_bytes(80)) == int(0.05 * gib_to_bytes(80)) + GAP
    # vLLM's KV-cache check keeps the margin asked for, not the gap the trainer's side showed.
    assert options.effective_margin.requested(gib_to_bytes(80)) == int(0.05 * gib_to_bytes(80))


def test_unconstrained_fit_would_lower_safety_here() -> None:
    # The case is only a test of keep_safety_of if the plain search takes the riskier direction.
    plain = _fit(False)
    run = plain.input_run
    assert plain.best is not None and lowered_settings(run.spec, plain.best.run.spec)
    assert all(c.lowers_safety == () for c in _choices(plain))


def test_safer_fit_never_lowers_silently_and_every_answer_keeps_the_gap() -> None:
    result = _fit(True)
    kept = result.input_run.spec
    options = FitOptions(margin_bytes=GAP, keep_safety_of=kept)
    assert result.best is not None
    assert result.best.lowers_safety == ()  # a configuration that lowers nothing fits, so it comes first
    for choice in _choices(result):
        run = resolve(parse_spec(choice.data))
        plan = make_plan(run.spec, run.arch, run.gpu, run.archs)
        assert min(slack_vector(plan, options.effective_margin)) >= 0
        lowered = lowered_settings(kept, run.spec)
        assert len(lowered) == len(choice.lowers_safety)
        if lowered:
            assert min(slack_vector(plan, options.lowering_margin)) >= 0
            assert all("gap" in reason for reason in choice.lowers_safety)
    ranks = [bool(c.lowers_safety) for c in _choices(result)]
    assert ranks == sorted(ranks)  # everything that lowers a setting is listed after what does not
