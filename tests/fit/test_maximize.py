"""`fit --maximize`: the largest value of a field that fits with the margin, held and with knobs."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomless.errors import InputError
from oomless.fit.maximize import maximize
from oomless.fit.probe import slack_vector
from oomless.fit.search import FitOptions
from oomless.planner.plan import make_plan
from oomless.spec.load import parse_spec, resolve
from tests.helpers import BASE_SPEC, merged

# 1.5B full fine-tuning on 4 × 24 GiB: the completion length is bounded by memory.
DATA = merged(BASE_SPEC, **{"hardware.gpu": "RTX-4090", "kl_beta": 0.0, "rollout.gpu_memory_utilization": 0.3})
OPTIONS = FitOptions()
PATH = "lengths.max_completion_tokens"


def _fits(value: int) -> bool:
    run = resolve(parse_spec(merged(DATA, **{PATH: value})))
    plan = make_plan(run.spec, run.arch, run.gpu, run.archs)
    return plan.fits and min(slack_vector(plan, OPTIONS.effective_margin)) >= 0


def test_held_answer_is_the_boundary_to_the_token() -> None:
    run = resolve(parse_spec(DATA))
    result = maximize(run, DATA, Path.cwd(), PATH, OPTIONS, with_knobs=False)
    value = result.held.value
    assert value is not None and value > DATA["lengths"]["max_completion_tokens"]
    assert _fits(value) and not _fits(value + 1)
    assert result.num_plans < 64  # doubling then bisection, not a scan


def test_with_knobs_reaches_at_least_the_held_value_and_its_answer_fits_there() -> None:
    run = resolve(parse_spec(DATA))
    result = maximize(run, DATA, Path.cwd(), PATH, OPTIONS)
    assert result.held.value is not None and result.with_knobs is not None
    assert result.with_knobs >= result.held.value
    choice = result.choice
    assert choice is not None and choice.changes_training == ()
    assert choice.run.spec.lengths.max_completion_tokens == result.with_knobs
    assert min(slack_vector(choice.plan, OPTIONS.effective_margin)) >= 0


@pytest.mark.parametrize("path", ["model", "batch", "batch.nope", "gradient_checkpointing"])
def test_a_field_that_is_not_a_number_is_one_line(path: str) -> None:
    run = resolve(parse_spec(DATA))
    with pytest.raises(InputError) as err:
        maximize(run, DATA, Path.cwd(), path, OPTIONS, with_knobs=False)
    assert err.value.field == "--maximize" and "\n" not in err.value.message
