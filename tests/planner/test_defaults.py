"""A spec that leaves vLLM's utilization unset beside the trainer is planned at the largest that
fits with the margin, and the plan says so; a given utilization, and a separate engine's
default, are left alone."""

from __future__ import annotations

import pytest

from oomless.planner.defaults import (
    DEFAULT_MARGIN_FRACTION, UTILIZATION_STEP, VLLM_DEFAULT_UTILIZATION, kv_holds_a_sequence, room_for_trainer,
)
from oomless.planner.plan import Plan
from tests.helpers import plan_of

# Issue 16's minimal spec: vLLM's own 0.9 beside a ZeRO-3 trainer does not fit.
MINIMAL = {"model": "Qwen/Qwen2.5-7B-Instruct", "hardware": {"gpu": "H100", "gpus_per_node": 8}}


def _with(data: dict, **rollout: object) -> dict:
    return {**data, "rollout": {**data.get("rollout", {}), **rollout}}


def _fits_with_margin(plan: Plan) -> bool:
    return room_for_trainer(plan, DEFAULT_MARGIN_FRACTION) and kv_holds_a_sequence(plan)


def test_the_minimal_spec_fits_at_the_largest_utilization_that_does() -> None:
    plan = plan_of(MINIMAL)
    chosen = plan.spec.rollout.gpu_memory_utilization
    assert plan.fits and _fits_with_margin(plan)
    assert chosen < VLLM_DEFAULT_UTILIZATION
    assert plan.notes == (f"rollout.gpu_memory_utilization not set: chose {chosen}, the largest that fits beside "
                          f"the trainer with a {DEFAULT_MARGIN_FRACTION:.0%} margin",)
    above = plan_of(_with(MINIMAL, gpu_memory_utilization=round(chosen + UTILIZATION_STEP, 2)))
    assert not room_for_trainer(above, DEFAULT_MARGIN_FRACTION)
    assert not plan_of(_with(MINIMAL, gpu_memory_utilization=VLLM_DEFAULT_UTILIZATION)).fits  # the old default


def test_the_chosen_plan_is_the_plan_of_the_chosen_value() -> None:
    plan = plan_of(MINIMAL)
    given = plan_of(_with(MINIMAL, gpu_memory_utilization=plan.spec.rollout.gpu_memory_utilization))
    assert given.notes == ()
    assert [c.required_bytes for c in given.constraints] == [c.required_bytes for c in plan.constraints]


@pytest.mark.parametrize("rollout", [{"gpu_memory_utilization": 0.9}, {"engine": "vllm_separate", "num_gpus": 2},
                                     {"engine": "hf"}])
def test_a_given_utilization_or_a_layout_without_a_shared_gpu_is_left_alone(rollout: dict) -> None:
    plan = plan_of(_with(MINIMAL, **rollout))
    assert plan.notes == ()
    assert plan.spec.rollout.gpu_memory_utilization == rollout.get("gpu_memory_utilization", VLLM_DEFAULT_UTILIZATION)


def test_when_nothing_fits_the_plan_says_so_and_leaves_the_trainer_the_most_room() -> None:
    data = {"model": "Qwen/Qwen2.5-7B-Instruct", "hardware": {"gpu": "RTX-4090", "gpus_per_node": 1}}
    plan = plan_of(data)
    assert not plan.fits
    (note,) = plan.notes
    assert "no utilization fits beside the trainer" in note
    chosen = plan.spec.rollout.gpu_memory_utilization
    assert kv_holds_a_sequence(plan)
    below = round(chosen - UTILIZATION_STEP, 2)
    assert below <= 0 or not kv_holds_a_sequence(plan_of(_with(data, gpu_memory_utilization=below)))


def test_when_only_a_typical_batch_can_fit_the_largest_utilization_for_it_is_chosen() -> None:
    # 30k-token completion limit, typically 1.5k: the longest batch fits at no utilization.
    data = {"model": "Qwen/Qwen2.5-7B-Instruct", "hardware": {"gpu": "A100-80GB", "gpus_per_node": 8},
            "batch": {"micro_batch_size": 1, "gradient_accumulation_steps": 16}, "logits": "fused",
            "lengths": {"max_prompt_tokens": 1024, "max_completion_tokens": 30000, "typical_completion_tokens": 1500,
                        "completion_clip_fraction": 0.001}}
    plan = plan_of(data)
    (note,) = plan.notes
    assert "typical batch" in note and plan.verdict == "fits_typical"
    chosen = plan.spec.rollout.gpu_memory_utilization
    assert plan.typical is not None and room_for_trainer(plan.typical, DEFAULT_MARGIN_FRACTION)
    above = plan_of(_with(data, gpu_memory_utilization=round(chosen + UTILIZATION_STEP, 2)))
    assert above.typical is not None and not room_for_trainer(above.typical, DEFAULT_MARGIN_FRACTION)
