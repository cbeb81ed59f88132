"""The issue-14 spec fields: defaults, bounds, and the cross-field rules (one InputError line each)."""

from __future__ import annotations

import pytest

from oomless.catalog.resolve import load_model
from oomless.errors import InputError
from oomless.spec.load import check_against_arch, parse_spec
from tests.helpers import BASE_SPEC, merged


def test_new_fields_default_to_todays_behaviour() -> None:
    spec = parse_spec(BASE_SPEC)
    assert spec.batch.padding_free is False
    assert spec.batch.max_tokens_per_gpu is None and spec.batch.logprob_max_tokens_per_gpu is None
    assert spec.distribution.sequence_parallel_size == 1
    assert spec.schedule.max_steps is None and spec.schedule.save_steps is None
    assert spec.schedule.save_only_model is False
    assert spec.lengths.typical_prompt == spec.lengths.max_prompt_tokens
    assert spec.lengths.typical_completion == spec.lengths.max_completion_tokens
    assert spec.lengths.completion_percentiles is None and spec.vision.pixels_percentiles is None
    assert spec.batch.token_budget_balance == "tokens" and spec.batch.logprob_token_budget is None
    assert spec.rollout.recompute_old_logprobs is None


def test_percentiles_accept_fractional_levels() -> None:
    spec = parse_spec(merged(BASE_SPEC, **{"lengths.completion_percentiles": {90: 300, 99.9: 500}}))
    assert spec.lengths.completion_percentiles == {90: 300, 99.9: 500}


@pytest.mark.parametrize(
    ("overrides", "field", "fragment"),
    [
        ({"batch.max_tokens_per_gpu": 0}, "batch.max_tokens_per_gpu", "greater than or equal to 1"),
        ({"batch.logprob_max_tokens_per_gpu": -1}, "batch.logprob_max_tokens_per_gpu", "greater than or equal to 1"),
        ({"distribution.sequence_parallel_size": 0}, "distribution.sequence_parallel_size", "greater than or equal to 1"),
        ({"schedule.max_steps": 0}, "schedule.max_steps", "greater than or equal to 1"),
        ({"schedule.save_steps": 0}, "schedule.save_steps", "greater than or equal to 1"),
        ({"schedule.every": 3}, "schedule.every", "allowed here: max_steps, save_steps, save_only_model"),
        ({"lengths.typical_completion_tokens": 10**6}, "lengths", "exceeds max_completion_tokens"),
        ({"lengths.completion_clip_fraction": 1.5}, "lengths.completion_clip_fraction", "less than or equal to 1"),
        ({"vision.typical_images_per_prompt": 5}, "vision", "exceeds images_per_prompt"),
        ({"distribution.sequence_parallel_size": 64}, "spec", "exceeds the"),
        ({"lengths.completion_percentiles": {90: 400, 99: 300}}, "lengths", "p99=300 is below p90=400"),
        ({"lengths.completion_percentiles": {99: 10**6}}, "lengths", "exceeds the limit"),
        ({"lengths.prompt_percentiles": {100: 5}}, "lengths.prompt_percentiles", "less than 100"),
        ({"lengths.typical_prompt_tokens": 100, "lengths.prompt_percentiles": {50: 90}}, "lengths", "differs from the typical"),
        ({"lengths.completion_percentiles": {99: 100}, "lengths.completion_clip_fraction": 0.05}, "lengths", "puts 5 % at it"),
        ({"vision.max_pixels": 1000, "vision.pixels_percentiles": {90: 2000}}, "vision", "exceeds the limit"),
        ({"batch.token_budget_balance": "flops"}, "batch.token_budget_balance", "tokens"),
        ({"lengths.mean_completion_tokens": 600}, "lengths", "exceeds max_completion_tokens=512"),
        ({"lengths.mean_prompt_tokens": 0}, "lengths.mean_prompt_tokens", "greater than 0"),
        ({"lengths.mean_completion_tokens": 10, "lengths.completion_clip_fraction": 0.5}, "lengths",
         "below the 0.5 of completions at max_completion_tokens=512 alone"),
    ],
)
def test_bad_values_are_one_line(overrides: dict, field: str, fragment: str) -> None:
    with pytest.raises(InputError) as info:
        parse_spec(merged(BASE_SPEC, **overrides))
    text = str(info.value)
    assert "\n" not in text and text.startswith(field) and fragment in text


def test_sequence_parallel_must_divide_attention_heads() -> None:
    arch = load_model("Qwen/Qwen2.5-7B-Instruct")  # 28 heads
    spec = parse_spec(merged(BASE_SPEC, **{"distribution.sequence_parallel_size": 8, "hardware.gpus_per_node": 8}))
    with pytest.raises(InputError, match="does not divide the 28 attention heads"):
        check_against_arch(spec, arch)
    ok = parse_spec(merged(BASE_SPEC, **{"distribution.sequence_parallel_size": 4, "hardware.gpus_per_node": 8}))
    check_against_arch(ok, arch)
