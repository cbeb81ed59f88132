"""Growth over steps (issue 14): each term derived by hand, the crossing step, and the
timeline of a real plan with the vLLM 0.7.x leak switched on by version."""

from __future__ import annotations

import copy

import pytest
import yaml

from oomless.planner.plan import make_plan
from oomless.spec.load import parse_spec, resolve
from oomless.memory import growth as G
from oomless.planner.timeline import host_timeline, prompts_per_node_per_round, rounds_in

GiB = 1 << 30


@pytest.mark.parametrize(("version", "leaks"), [("0.7.0", True), ("0.7.3", True), ("0.8.0", False),
                                                ("0.6.6", False), (None, False), ("not-a-version", False)])
def test_leaking_vllm_versions(version: str | None, leaks: bool) -> None:
    assert G.is_leaking_vllm(version) is leaks


def test_qwen_pixel_values_by_hand() -> None:
    # one 1,337-patch image: 1,337 rows of 3 × 2 × 14 × 14 = 1,176 float32 values
    assert G.pixel_value_bytes_per_image(1337, 14, 2, 3) == 1337 * 1176 * 4


def test_retained_request_bytes_by_hand() -> None:
    # pixels once, then 5 sequences of (100 + 50) ids at 44 B each
    assert G.retained_request_bytes(100, 50, 5, 1000) == 1000 + 5 * 150 * 44


def test_checkpoint_save_host_bytes() -> None:
    assert G.checkpoint_save_host_bytes(14 * GiB, 10 * GiB, 8, rank0_on_node=True, save_only_model=False) == 94 * GiB
    assert G.checkpoint_save_host_bytes(14 * GiB, 10 * GiB, 8, rank0_on_node=True, save_only_model=True) == 14 * GiB
    assert G.checkpoint_save_host_bytes(14 * GiB, 10 * GiB, 8, rank0_on_node=False, save_only_model=True) == 0


@pytest.mark.parametrize(("base", "growth", "limit", "horizon", "spike", "every", "expected"), [
    (100, 10, 150, 100, 0, None, 7),     # 100 + 10·(s−1) > 150 first at s = 7
    (100, 10, 150, 5, 0, None, None),    # beyond the horizon
    (160, 0, 150, 10, 0, None, 1),       # over from the start
    (100, 0, 150, 10, 60, 4, 4),         # the first save crosses
    (100, 0, 150, 10, 40, 4, None),      # saves stay under, nothing grows
    (100, 5, 150, 100, 30, 4, 8),        # save at 8: 100 + 35 + 30 > 150 (step 4: 145 + ... = 145 ≤ 150)
])
def test_first_step_over(base: int, growth: int, limit: int, horizon: int, spike: int, every: int | None,
                         expected: int | None) -> None:
    got = G.first_step_over(base, growth, limit, horizon, spike, every)
    assert got == expected
    if got is not None:  # brute force agrees
        def at(s: int) -> int:
            return base + growth * (s - 1) + (spike if every and s % every == 0 else 0)
        assert at(got) > limit and all(at(s) <= limit for s in range(1, got))


def _plan(overrides: dict) -> object:
    with open("examples/seeds/s2-after.yaml", encoding="utf-8") as f:
        data = yaml.safe_load(f)
    data["rollout"].pop("vllm_version", None)  # the seed's environment; each test sets its own
    data["schedule"].pop("max_steps", None)
    for dotted, value in overrides.items():
        node = data
        *path, last = dotted.split(".")
        for key in path:
            node = node.setdefault(key, {})
        node[last] = value
    run = resolve(parse_spec(copy.deepcopy(data)))
    return make_plan(run.spec, run.arch, run.gpu, run.archs)


def test_no_version_no_leak_and_no_horizon_no_verdict() -> None:
    timeline = host_timeline(_plan({}))
    assert timeline.growth == () and timeline.crossing_step is None and "not judged" in timeline.message()


def test_vllm_0_7_leak_grows_with_prompts_and_crosses_within_the_run() -> None:
    one = {"batch.steps_per_generation": 1, "batch.gradient_accumulation_steps": 1}  # one micro-batch a round
    small = host_timeline(_plan({"rollout.vllm_version": "0.7.3", "schedule.max_steps": 60, **one}))
    big_plan = _plan({"rollout.vllm_version": "0.7.3", "schedule.max_steps": 60,
                      "batch.steps_per_generation": 64, "batch.gradient_accumulation_steps": 16})
    big = host_timeline(big_plan)
    assert small.growth and big.growth
    assert big.growth_bytes_per_step > small.growth_bytes_per_step
    assert prompts_per_node_per_round(big_plan) == 64 * 8 // 5
    assert rounds_in(big_plan.spec, 60) == 15  # 4 optimizer steps per round
    if big.crossing_step is not None:
        assert big.host_bytes_at(big.crossing_step) > big.limit_bytes
        assert "crosses the limit" in big.message()
    fixed = host_timeline(_plan({"rollout.vllm_version": "0.8.5", "schedule.max_steps": 60}))
    assert fixed.growth == ()


def test_checkpoint_saves_enter_the_timeline() -> None:
    one = {"batch.steps_per_generation": 1, "batch.gradient_accumulation_steps": 1}  # a round per optimizer step
    timeline = host_timeline(_plan({"schedule.max_steps": 100, "schedule.save_steps": 10, **one}))
    assert timeline.save_every == 10 and timeline.save_bytes > 0
    four = host_timeline(_plan({"schedule.max_steps": 100, "schedule.save_steps": 12}))  # the seed: 4 steps a round
    assert four.save_every == 3
    only_model = host_timeline(_plan({"schedule.max_steps": 100, "schedule.save_steps": 10, "schedule.save_only_model": True, **one}))
    assert 0 < only_model.save_bytes < timeline.save_bytes


def test_a_crossing_within_the_run_is_the_verdict_and_named_in_json() -> None:
    from oomless.planner.report import plan_to_dict

    plan = _plan({"rollout.vllm_version": "0.7.3", "rollout.samples_per_request": 5, "schedule.max_steps": 200,
                  "batch.steps_per_generation": 320, "batch.gradient_accumulation_steps": 80})
    assert plan.timeline is not None and plan.timeline.crossing_step is not None
    assert not plan.fits and plan.binding.phase == "steps"
    assert plan.binding.first_step == plan.timeline.crossing_step
    doc = plan_to_dict(plan)
    assert doc["timeline"]["crossing_step"] == plan.timeline.crossing_step
    assert doc["timeline"]["growth"][0]["source"].startswith("vllm#14353")
    short = _plan({"rollout.vllm_version": "0.7.3", "schedule.max_steps": 1})
    assert short.timeline.crossing_step is None


def test_spmd_engines_hold_the_leak_in_every_tp_rank() -> None:
    """Colocated SPMD engines (external launcher) keep one copy per TP rank; a server engine one."""
    base = {"rollout.vllm_version": "0.7.3", "schedule.max_steps": 60}
    tp2 = host_timeline(_plan({**base, "rollout.tensor_parallel_size": 2}))
    tp1 = host_timeline(_plan({**base, "rollout.tensor_parallel_size": 1}))
    assert tp2.growth_bytes_per_step == 2 * tp1.growth_bytes_per_step
    assert "held by each of 2 TP ranks" in tp2.growth[0].name
    assert G.vllm_v0_parallel_sampling_leak_bytes_per_step(10, 7, 4) == 280


def test_peak_over_the_horizon_is_the_last_step_or_the_last_save() -> None:
    from oomless.planner.timeline import Growth, Timeline

    def tl(horizon: int | None, every: int | None, save: int) -> Timeline:
        return Timeline(horizon, 100, 1000, (Growth("g", 10, "s"),), every, save, None)

    assert tl(None, 5, 50).peak_bytes() is None
    assert tl(12, None, 0).peak_bytes() == 100 + 10 * 11  # the last step
    assert tl(12, 5, 50).peak_bytes() == 100 + 10 * 9 + 50  # step 10 saves: 240 > step 12's 210
    assert tl(12, 5, 5).peak_bytes() == 100 + 10 * 11  # a small spike: the last step is larger
    assert tl(4, 5, 500).peak_bytes() == 100 + 10 * 3  # no save within the horizon


def test_fit_judges_growth_over_the_steps() -> None:
    """A configuration whose phases fit but whose host RAM crosses the limit over the run's steps
    is not offered (fit's slack includes the timeline's peak)."""
    from oomless.fit.probe import slack_vector
    from oomless.fit.search import FitOptions

    plan = _plan({"rollout.vllm_version": "0.7.3", "schedule.max_steps": 240})
    assert plan.timeline.crossing_step is not None
    assert min(slack_vector(plan, FitOptions().effective_margin)) < 0
    short = _plan({"rollout.vllm_version": "0.7.3", "schedule.max_steps": 4})
    assert short.timeline.crossing_step is None
    assert len(slack_vector(short, FitOptions().effective_margin)) == len(slack_vector(plan, FitOptions().effective_margin))


def test_extras_over_base_give_the_peak_over_the_largest_phase() -> None:
    from oomless.planner.timeline import Growth, Timeline

    for horizon, every, save in ((12, 5, 50), (12, 5, 5), (10, 5, 50), (4, 5, 500), (12, None, 0), (None, 5, 50)):
        tl = Timeline(horizon, 100, 1000, (Growth("g", 10, "s"),), every, save, None)
        extras = tl.extras_over_base()
        assert (tl.peak_bytes() is None) == (extras == ())
        if extras:
            assert tl.base_bytes + max(extras) == tl.peak_bytes()
