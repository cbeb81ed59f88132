"""The fast evaluator against `make_plan`: its additive predictions of every constraint and of
the step time are exact on random configurations of the seed regions."""

from __future__ import annotations

import random

import pytest

from oomless.fit.probe import Context, Margin, slack_vector
from oomless.fit.search import FitOptions, _Search
from oomless.fit.space import math_levels
from oomless.perf.step import estimate_plan
from oomless.spec.load import load_run, read_yaml
from tests.helpers import EXAMPLES

SEEDS = ["quickstart.yaml", "seeds/s0-before.yaml", "seeds/s1-before.yaml", "seeds/s2-before.yaml", "seeds/s4-before.yaml"]
SAMPLES_PER_REGION = 8


def _regions(name: str):
    path = EXAMPLES / name
    run = load_run(path)
    search = _Search(run, read_yaml(path), path.parent, FitOptions(margin=Margin(fraction=0.05)))
    return search, [region for _, region in search.regions(math_levels(run.spec, run.arch, frozenset())[0][0])]


@pytest.mark.parametrize("name", SEEDS)
def test_additive_predictions_match_make_plan(name: str) -> None:
    search, regions = _regions(name)
    rng = random.Random(1)
    for region in regions:
        sizes = [len(f.options) for f in region.factors]
        checked = 0
        for _ in range(10 * SAMPLES_PER_REGION):
            choice = tuple(rng.randrange(n) for n in sizes)
            plan = search.ctx.plan(region.spec(choice))
            if plan.engine is not None and plan.engine.kv_cache_bytes < 0:
                continue  # no KV cache: vLLM's KV check fails, which is predicted exactly
            checked += 1
            assert slack_vector(plan, search.ctx.margin) == region.slack(choice), (name, choice)
            assert (plan.engine.kv_cache_bytes if plan.engine else 0) == region.kv(choice)
            predicted = region.train_seconds(*choice[:2]) + region.engine_seconds(choice[2:])
            assert predicted == pytest.approx(estimate_plan(plan, search.ctx.perf).total_s), (name, choice)
            if checked == SAMPLES_PER_REGION:
                break


@pytest.mark.parametrize("name", ["quickstart.yaml", "seeds/s1-before.yaml", "seeds/s0-before.yaml"])
def test_verification_finds_nothing_to_distrust_on_these_seeds(name: str) -> None:
    _, regions = _regions(name)
    for region in regions:
        assert region.verify() == set()


def test_margin_is_bytes_or_a_fraction_of_capacity() -> None:
    assert Margin(num_bytes=5).of(100) == 5
    assert Margin(fraction=0.1).of(1000) == 100
    assert Context.__dataclass_fields__  # the context is a plain frozen record
