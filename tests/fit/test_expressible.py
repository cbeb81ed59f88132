"""`fit --from FW`: the search keeps to what the framework's files can say, and a framework that
generates every micro-step keeps doing so at any batch split."""

from __future__ import annotations

from oomless.fit.layouts import batch_splits
from oomless.fit.search import FitOptions, fit_file
from oomless.spec.load import parse_spec
from oomless.spec.run import RolloutEngine, RunSpec, Strategy
from tests.helpers import BASE_SPEC, EXAMPLES, merged

S3 = EXAMPLES / "seeds" / "s3-before.yaml"
"""VLM-R1's seed: HF generate, and a plain fit moves it to vLLM (which VLM-R1 cannot launch)."""


def test_rollout_every_micro_step_keeps_whole_groups_and_one_rollout_per_micro_step() -> None:
    spec = parse_spec(merged(BASE_SPEC, **{"batch.micro_batch_size": 16, "batch.gradient_accumulation_steps": 1,
                                           "batch.num_generations": 4}))
    plain = batch_splits(spec, 1, 1)
    grouped = batch_splits(spec, 1, 1, group=4)
    assert any(s["batch.micro_batch_size"] % 4 for s in plain), "the plain splits cut groups"
    assert [s["batch.micro_batch_size"] for s in grouped] == [16, 8, 4]
    for s in grouped:
        assert s["batch.micro_batch_size"] * s["batch.gradient_accumulation_steps"] == 16
        assert s["batch.steps_per_generation"] == (1 if s["batch.gradient_accumulation_steps"] > 1 else None)


def _hf_without_zero1(spec: RunSpec) -> bool:
    return spec.rollout.engine == RolloutEngine.hf and spec.distribution.strategy != Strategy.zero1


def test_fit_returns_only_what_the_check_accepts() -> None:
    free = fit_file(S3, FitOptions())
    assert free.best is not None and not _hf_without_zero1(free.best.run.spec), "the unrestricted answer must break the check"
    seen: list[RunSpec] = []

    def check(spec: RunSpec) -> bool:
        seen.append(spec)
        return _hf_without_zero1(spec)

    kept = fit_file(S3, FitOptions(expressible=check, rollout_every_micro_step=True))
    assert kept.best is not None and seen
    assert kept.stats.counts.space < free.stats.counts.space
    for choice in (kept.best, *kept.alternatives):
        spec = choice.run.spec
        assert _hf_without_zero1(spec)
        assert spec.batch.micro_batch_size % spec.batch.num_generations == 0 and spec.steps_per_generation == 1


def test_a_framework_without_sleep_level_2_is_offered_level_1() -> None:
    """Level 2 is the only level a plain search tries (it frees as much as level 1, for less
    time); kept to a framework that cannot say it, the engine still sleeps, at level 1."""
    free = fit_file(EXAMPLES / "seeds" / "s1-before.yaml", FitOptions())
    assert free.best is not None and free.best.run.spec.rollout.sleep_level == 2
    kept = fit_file(EXAMPLES / "seeds" / "s1-before.yaml", FitOptions(expressible=lambda s: s.rollout.sleep_level != 2))
    assert kept.best is not None
    levels = {c.run.spec.rollout.sleep_level for c in (kept.best, *kept.alternatives)}
    assert 2 not in levels and 1 in levels
