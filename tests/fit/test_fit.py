"""`fit` on the seed cases and on random specs: what it returns fits with the margin in its
own plan, changes no math knob unless allowed, and keeps the completions per step and per
rollout."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oomless.fit.probe import Margin, slack_vector
from oomless.fit.search import FitOptions, FitResult, fit, fit_file
from oomless.planner.plan import make_plan
from oomless.planner.roles import placement_groups
from oomless.spec.load import parse_spec, resolve
from oomless.spec.run import Role, RunSpec
from oomless.units import gib_to_bytes
from tests.helpers import BASE_SPEC, EXAMPLES, merged

MATH_FIELDS = {"finetune.method", "finetune.lora_rank", "lengths.max_prompt_tokens", "lengths.max_completion_tokens",
               "batch.num_generations", "vision.max_pixels", "kl_beta", "hardware.gpus_per_node", "hardware.num_nodes"}
MARGIN = Margin(fraction=0.05)


@functools.lru_cache(maxsize=None)
def _fit_seed(name: str) -> FitResult:
    return fit_file(EXAMPLES / "seeds" / name, FitOptions(margin=MARGIN))


def _completions(spec: RunSpec) -> tuple[int, int]:
    """(per optimizer step, per rollout) over all training ranks."""
    ranks = sum(g.gpus_per_node for g in placement_groups(spec) if Role.actor in g.roles) * spec.hardware.num_nodes
    per_step = ranks * spec.batch.micro_batch_size * spec.batch.gradient_accumulation_steps
    return per_step, per_step * spec.steps_per_generation // spec.batch.gradient_accumulation_steps


def assert_sound(result: FitResult, margin: Margin, base_dir: Path, allowed: frozenset[str] = frozenset()) -> None:
    best = result.best
    assert best is not None
    for choice in (best, *result.alternatives):
        # The written spec, planned from scratch, fits with the margin.
        run = resolve(parse_spec(choice.data), base_dir)
        plan = make_plan(run.spec, run.arch, run.gpu, run.archs)
        assert plan.fits
        assert min(slack_vector(plan, margin)) >= 0
        moved_math = {f for f in choice.changes if f in MATH_FIELDS}
        assert not moved_math - {f for f in MATH_FIELDS if f.split(".")[-1] in _allowed_fields(allowed)}
        if "num_generations" not in allowed:
            assert _completions(run.spec) == _completions(result.input_run.spec)


def _allowed_fields(allowed: frozenset[str]) -> set[str]:
    names = {"lora_rank": {"lora_rank"}, "lengths": {"max_prompt_tokens", "max_completion_tokens"},
             "num_generations": {"num_generations"}, "max_pixels": {"max_pixels"}, "beta": {"kl_beta"},
             "method": {"method"}, "gpus": {"gpus_per_node", "num_nodes"}}
    return {f for a in allowed for f in names[a]}


@pytest.mark.parametrize("name", ["s0-before.yaml", "s1-before.yaml", "s3-before.yaml", "s4-before.yaml"])
def test_seed_before_cases_get_a_fitting_configuration(name: str) -> None:
    result = _fit_seed(name)
    assert not result.input_plan.fits
    assert_sound(result, MARGIN, EXAMPLES / "seeds")
    assert result.best is not None and result.best.changes


def test_s1_is_fixed_by_moving_the_engine_off_the_crowded_gpu() -> None:
    best = _fit_seed("s1-before.yaml").best
    assert best is not None
    assert "placement.groups" in best.changes or "rollout.engine" in best.changes


def test_a_spec_that_already_is_best_comes_back_unchanged() -> None:
    # fit's own answer is best for itself: fitting it again changes nothing.
    first = _fit_seed("s3-after.yaml").best
    assert first is not None
    again = fit(first.run, first.data, EXAMPLES / "seeds", FitOptions(margin=MARGIN, top_k=0))
    assert again.best is not None and again.best.changes == {}


def test_nothing_fits_on_a_gpu_too_small_for_the_weights() -> None:
    data = merged(BASE_SPEC, model="Qwen/Qwen2.5-7B-Instruct", **{"hardware.gpu": None, "hardware.gpu_capacity_gib": 4.0})
    run = resolve(parse_spec(data))
    result = fit(run, data, Path.cwd(), FitOptions(margin=MARGIN))
    assert result.best is None and result.alternatives == ()


def test_allowed_lengths_move_only_when_needed_and_only_lengths() -> None:
    # 1.5B full fine-tuning with 32k + 32k-token sequences on 4 × 24 GiB needs shorter sequences.
    data = merged(BASE_SPEC, **{"hardware.gpu": "RTX-4090", "lengths.max_prompt_tokens": 32768,
                                "lengths.max_completion_tokens": 32768, "kl_beta": 0.0})
    run = resolve(parse_spec(data))
    strict = fit(run, data, Path.cwd(), FitOptions(margin=MARGIN))
    allowed = fit(run, data, Path.cwd(), FitOptions(margin=MARGIN, allow=frozenset({"lengths"}), top_k=1))
    assert strict.best is None
    assert_sound(allowed, MARGIN, Path.cwd(), frozenset({"lengths"}))
    assert allowed.stats.math_level >= 1


MODELS = st.sampled_from(["Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-1.5B-Instruct", "meta-llama/Llama-3.2-1B-Instruct"])


@st.composite
def specs(draw: st.DrawFn) -> dict:
    engine = draw(st.sampled_from(["hf", "vllm_colocate", "vllm_separate"]))
    return merged(BASE_SPEC, model=draw(MODELS), **{
        "hardware.gpu": draw(st.sampled_from(["RTX-4090", "A10", "L40S", "A100-40GB"])),
        "finetune.method": draw(st.sampled_from(["full", "lora"])),
        "distribution.strategy": draw(st.sampled_from(["zero2", "zero3", "fsdp"])),
        "batch.micro_batch_size": draw(st.sampled_from([1, 2, 4, 8])),
        "batch.gradient_accumulation_steps": draw(st.sampled_from([1, 2, 4])),
        "lengths.max_completion_tokens": draw(st.sampled_from([256, 1024, 4096])),
        "rollout.engine": engine,
        "rollout.sleep_level": 0 if engine != "vllm_colocate" else draw(st.sampled_from([0, 1])),
        "rollout.gpu_memory_utilization": draw(st.sampled_from([0.3, 0.5, 0.9])),
    })


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs(), st.sampled_from([Margin(num_bytes=gib_to_bytes(1)), Margin(fraction=0.1)]))
def test_whatever_fit_returns_fits_with_the_margin_and_keeps_the_maths(data: dict, margin: Margin) -> None:
    run = resolve(parse_spec(data))
    result = fit(run, data, Path.cwd(), FitOptions(margin=margin, top_k=2))
    if result.best is not None:
        assert_sound(result, margin, Path.cwd())
