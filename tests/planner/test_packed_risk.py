"""Issue 14: the chance that a packed micro-batch's sum exceeds what the plan allows
(planner/packed_risk.py), against hand cases and Monte Carlo draws of laws the knots allow."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oomless.catalog.resolve import load_model
from oomless.planner import packed_risk as PR
from oomless.planner.risk import batch_risk, knots, length_knots, packed_sums
from oomless.spec.load import parse_spec
from tests.helpers import BASE_SPEC, merged, plan_of

DATA = {"lengths.max_prompt_tokens": 512, "lengths.max_completion_tokens": 1024,
        "lengths.typical_prompt_tokens": 110, "lengths.prompt_percentiles": {99: 200}, "lengths.data_max_prompt_tokens": 250,
        "lengths.typical_completion_tokens": 250, "lengths.completion_percentiles": {90: 400, 99: 700}}
PACKED = {**DATA, "batch.padding_free": True, "attention": "flash_attention_2", "batch.micro_batch_size": 64,
          "batch.gradient_accumulation_steps": 5, "batch.num_generations": 5, "schedule.max_steps": 58,
          "hardware.gpu": "H100-80GB", "hardware.gpus_per_node": 1, "distribution.strategy": "fsdp",
          "finetune.method": "lora", "finetune.lora_rank": 32, "gradient_checkpointing": True,
          "logits": "bf16_flash_ce_entropy", "rollout.gpu_memory_utilization": 0.15}


def test_dominating_law_by_hand() -> None:
    k = knots(1000, 200, {90: 500, 99: 800})
    law = PR.dominating_atoms(k.points)
    assert [v for v, _ in law] == [200, 500, 800, 1000]
    assert [p for _, p in law] == pytest.approx([0.5, 0.4, 0.09, 0.01])
    assert PR.mean(PR.dominating_atoms(k.points)) == pytest.approx(100 + 200 + 72 + 10)


def test_comonotone_sum_adds_quantiles_at_each_level() -> None:
    prompt = ((100, 0.5), (300, 0.5))
    completion = ((10, 0.9), (1000, 0.1))
    # levels 0.5, 0.9, 1: (100 + 10), (300 + 10), (300 + 1000)
    law = PR.comonotone_sum(prompt, completion)
    assert [v for v, _ in law] == [110, 310, 1300]
    assert [p for _, p in law] == pytest.approx([0.5, 0.4, 0.1])


def test_tail_is_zero_past_every_row_at_its_limit_and_one_below_nothing() -> None:
    law = ((100, 0.9), (1000, 0.1))
    assert PR.sum_tail(law, 8, 1, 8000) == 0.0
    assert PR.sum_tail(law, 8, 1, -1) == 1.0
    assert 0 < PR.sum_tail(law, 8, 1, 2000) < 1


def _draw_groups(rng: random.Random, law: PR.Atoms, rows: int, group: int) -> list[int]:
    """Rows of one prompt share one length (the comonotone worst case); prompts independent."""
    values, weights = zip(*law)
    out: list[int] = []
    while len(out) < rows:
        out += [rng.choices(values, weights)[0]] * group
    return out[:rows]


@settings(max_examples=25, deadline=None, derandomize=True)
@given(mass=st.floats(0.01, 0.3), rows=st.integers(4, 48), group=st.sampled_from([1, 2, 4]), over=st.floats(1.05, 2.0))
def test_sum_tail_bounds_the_frequency_seen(mass: float, rows: int, group: int, over: float) -> None:
    law = ((200, 1 - mass), (1500, mass))
    threshold = over * rows * PR.mean(law)
    rng = random.Random(7)
    draws = 4000
    seen = sum(sum(_draw_groups(rng, law, rows, group)) > threshold for _ in range(draws)) / draws
    assert seen <= PR.sum_tail(law, rows, group, threshold) + 3 * (0.25 / draws) ** 0.5  # sampling error


@settings(max_examples=20, deadline=None, derandomize=True)
@given(mass=st.floats(0.02, 0.3), batch=st.integers(2, 16), times=st.integers(2, 6), over=st.floats(1.0, 2.5))
def test_longest_share_tail_bounds_the_longest_rows_put_together(mass: float, batch: int, times: int, over: float) -> None:
    law = ((300, 1 - mass), (1200, mass))
    share, threshold = batch * times, over * batch * PR.mean(law)
    rng = random.Random(11)
    draws = 3000
    seen = sum(sum(sorted(_draw_groups(rng, law, share, 1))[-batch:]) > threshold for _ in range(draws)) / draws
    assert seen <= PR.longest_share_tail(law, batch, share, 1, threshold) + 3 * (0.25 / draws) ** 0.5
    # the longest rows together are never likelier to stay under a bound than one block of rows
    assert PR.longest_share_tail(law, batch, share, 1, threshold) >= PR.sum_tail(law, batch, 1, threshold) - 1e-12


def test_packed_rows_fit_where_every_row_short_did_not() -> None:
    packed = plan_of(merged(BASE_SPEC, **PACKED))
    padded_risk = plan_of(merged(BASE_SPEC, **{**PACKED, "batch.padding_free": False}))
    assert not packed.worst_fits and packed.verdict == "fits_typical"
    assert packed.risk is not None and packed.risk.accepted and packed.fits
    # the plan asks for a micro-batch's sum only: the chance is far below "all 320 rows under p99"
    assert packed.risk.per_step < 1e-3 < 1 - 0.99**320
    assert not padded_risk.fits


def test_sorted_shares_are_riskier_than_the_data_order() -> None:
    data_order = plan_of(merged(BASE_SPEC, **PACKED))
    spec = merged(BASE_SPEC, **{**PACKED, "batch.length_sorted_micro_batches": True})
    sorted_share = plan_of(spec)
    assert sorted_share.risk is not None and data_order.risk is not None
    assert sorted_share.risk.per_step > data_order.risk.per_step
    # with the share's 128-row micro-batches half of it, the longest half cannot stay near the mean
    bigger = plan_of(merged(spec, **{"batch.micro_batch_size": 128, "rollout.gpu_memory_utilization": 0.3}))
    assert bigger.verdict == "fits_typical" and not bigger.fits


def test_only_packed_text_with_vllm_takes_the_sum_bound() -> None:
    arch = load_model("Qwen/Qwen2.5-1.5B-Instruct")
    assert packed_sums(parse_spec(merged(BASE_SPEC, **PACKED)), arch)
    hf = parse_spec(merged(BASE_SPEC, **PACKED, **{"rollout": {"engine": "hf"}}))
    assert not packed_sums(hf, arch)  # HF generate pads its rows to the longest
    padded = parse_spec(merged(BASE_SPEC, **{**PACKED, "batch.padding_free": False, "batch.max_tokens_per_gpu": 8192}))
    assert not packed_sums(padded, arch)
    assert batch_risk(padded, arch, 16, lambda x: True).per_step is None


def test_longer_than_splits_the_length_between_prompt_and_completion() -> None:
    prompt, completion = ((100, 0.9), (500, 0.1)), ((200, 0.5), (1000, 0.5))
    assert PR.longer_than(prompt, completion, 1500) == 0.0
    assert PR.longer_than(prompt, completion, 1100) == pytest.approx(0.1)  # P > 100 or C > 1000: only the prompt's tail
    # P + C > 400 needs P > 100 or C > 300 (0.1 + 0.5), or P > 200 or C > 200: no dependence assumed
    assert PR.longer_than(prompt, completion, 400) == pytest.approx(0.6)
    assert PR.longer_than(prompt, completion, 50) == 1.0


BUDGET = {**PACKED, "batch.max_tokens_per_gpu": 70000, "batch.micro_batch_size": 15, "batch.gradient_accumulation_steps": 6,
          "rollout.gpu_memory_utilization": 0.4}


def test_a_token_budget_gets_a_chance_not_the_assumed_worst() -> None:
    plan = plan_of(merged(BASE_SPEC, **BUDGET))
    # 70,000 tokens + one sequence of 1,536 does not fit; 90 rows a GPU a step hold ~46,000 on average
    assert not plan.worst_fits and plan.risk is not None and plan.risk.per_step is not None
    assert plan.risk.packed_mean_tokens is not None and plan.risk.packed_mean_tokens < 512 + 1024
    assert plan.risk.accepted and plan.fits
    # more rows a step make a share past the budget likelier: the chance rises, the verdict turns
    more = plan_of(merged(BASE_SPEC, **{**BUDGET, "batch.gradient_accumulation_steps": 10}))
    assert more.risk is not None and more.risk.per_step > plan.risk.per_step and not more.fits


def test_typical_packed_batch_is_the_dominating_mean() -> None:
    plan = plan_of(merged(BASE_SPEC, **PACKED))
    # prompt: 0.5·110 + 0.49·200 + 0.01·250 (the data's longest) = 155.5; completion 0.5·250 + 0.4·400 + 0.09·700 + 0.01·1024
    assert plan.typical is not None
    assert plan.typical.shape.lengths.prompt_tokens == 156
    assert plan.typical.shape.lengths.completion_tokens == 359


def _verl_sorted_minibatch_totals(rng: random.Random, law: PR.Atoms, share: int, rows: int, group: int) -> list[int]:
    """verl `_balance_batch` (>= 0.6.1) on one rank: the share sorted, evens rising then odds
    falling (the longest in the middle), cut into mini-batches of ``rows`` in that order."""
    lengths = sorted(_draw_groups(rng, law, share, group))
    ordered = lengths[::2] + lengths[1::2][::-1]
    return [sum(ordered[i:i + rows]) for i in range(0, share, rows)]


def test_a_sorted_share_under_a_budget_is_bounded_by_its_longest_rows() -> None:
    """A budget's mini-batch of a sorted share holds the share's longest rows (review finding):
    the bound must cover the frequency verl's own ordering gives on a law the knots allow."""
    spec = merged(BASE_SPEC, **{**BUDGET, "batch.steps_per_generation": 18, "batch.length_sorted_micro_batches": True,
                                "batch.logprob_max_tokens_per_gpu": 250_000})
    plan = plan_of(spec)
    assert plan.risk is not None and plan.risk.per_step is not None and plan.risk.packed_mean_tokens is not None
    low, rows, share = plan.risk.packed_mean_tokens, 15 * 6, 15 * 18
    parsed = parse_spec(spec)
    dims = length_knots(parsed, load_model(parsed.model))
    law = PR.comonotone_sum(*(PR.dominating_atoms(dims[d].points) for d in ("prompt", "completion")))
    rng = random.Random(5)
    draws = 2000
    seen = sum(max(_verl_sorted_minibatch_totals(rng, law, share, rows, 5)) > low * rows for _ in range(draws)) / draws
    assert plan.risk.per_step >= seen
    unsorted = plan_of(merged(spec, **{"batch.length_sorted_micro_batches": False}))
    assert unsorted.risk is not None and unsorted.risk.per_step <= plan.risk.per_step
