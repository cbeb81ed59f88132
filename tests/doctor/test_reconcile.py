"""A diagnosed log against the plan of the same run; fixes realised against the spec; the
optional `oomless fit` hook."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from oomless.doctor import diagnose, read_log
from oomless.doctor import fit_hook
from oomless.doctor import fixes as F
from oomless.doctor.reconcile import reconcile
from oomless.spec.load import parse_spec, resolve
from tests.doctor.corpus import LOGS
from tests.helpers import BASE_SPEC, merged, plan_of

A100 = BASE_SPEC  # Qwen2.5-1.5B full FT, ZeRO-3, 4 × A100-80GB, vLLM colocated at 0.4 with sleep level 1
RTX_3090_7B_LORA = merged(
    BASE_SPEC, model="Qwen/Qwen2-7B-Instruct", **{
        "hardware.gpu": "RTX-3090", "finetune.method": "lora", "distribution.strategy": "zero2",
        "rollout.gpu_memory_utilization": 0.9, "rollout.sleep_level": 0,
    },
)


def _diagnosis(stem: str):
    return diagnose(read_log(next(LOGS.glob(f"{stem}*.log"))))


def test_torch_oom_against_a_plan_that_fits_names_the_missing_bytes() -> None:
    d = _diagnosis("02-")  # verl logprob OOM on an 80 GB card
    r = reconcile(d, plan_of(A100))
    assert r is not None and (r.device, r.device_role, r.phase, r.predicted_fits) == ("gpu", "train", "logprob", True)
    n = d.primary.numbers
    assert r.logged_capacity_bytes == n["capacity_bytes"]
    assert r.logged_used_bytes == n["capacity_bytes"] - n["free_bytes"]
    assert r.logged_demand_bytes == r.logged_used_bytes + n["requested_bytes"]
    assert r.verdict.startswith("The plan predicts logprob fits") and "misses about" in r.verdict
    assert r.top_components and r.top_components[0][1] >= r.top_components[-1][1]


def test_other_hardware_is_not_compared() -> None:
    r = reconcile(_diagnosis("02-"), plan_of(RTX_3090_7B_LORA))
    assert r is not None and r.verdict.startswith("Not comparable")
    assert any("earlier" in note for note in r.notes)  # this plan already breaks at load


def test_vllm_startup_check_against_plans_that_pass_and_fail() -> None:
    d = _diagnosis("34-")  # 24 GB card, utilization 0.97
    failing = reconcile(d, plan_of(RTX_3090_7B_LORA))
    assert failing is not None and failing.predicted_fits is False and failing.verdict.startswith("Consistent")
    passing = reconcile(d, plan_of(A100))
    assert passing is not None and passing.predicted_fits is True and "passes" in passing.verdict
    hf = reconcile(d, plan_of(merged(A100, **{"rollout.engine": "hf", "rollout.sleep_level": 0})))
    assert hf is not None and "no vLLM engine" in hf.verdict


def test_host_kinds_compare_host_ram() -> None:
    r = reconcile(_diagnosis("40-"), plan_of(A100))  # Ray OOM on a 503 GiB node
    assert r is not None and r.device == "host" and r.predicted_limit_bytes is not None
    assert "host RAM per node" in r.verdict and r.logged_used_bytes == _diagnosis("40-").primary.numbers["node_used_bytes"]
    unknown = reconcile(_diagnosis("48-"), plan_of(merged(A100, **{"hardware.host_ram_gib": None})))
    assert unknown is not None and unknown.predicted_fits is None and "host_ram_gib" in unknown.verdict


def test_host_kill_explained_by_growth_over_the_steps() -> None:
    """A plan whose phases fit but whose host RAM crosses the limit at some step (vLLM 0.7.x's
    n > 1 leak over the run) explains a Ray kill: consistent, no missing gap handed to fit."""
    from tests.planner.test_seeds_and_phases import plan_file

    leaking = plan_file("s2-before.yaml")
    assert leaking.timeline.crossing_step is not None
    r = reconcile(_diagnosis("40-"), leaking)
    assert r is not None and r.verdict.startswith("Consistent") and f"step ~{leaking.timeline.crossing_step}" in r.verdict
    assert r.phase == "steps" and r.predicted_fits is False and r.gap_bytes == 0
    assert "vLLM 0.7.3" in r.verdict
    still = reconcile(_diagnosis("40-"), plan_of_file_with_no_leak())
    assert still is not None and not still.verdict.startswith("Consistent") and still.gap_bytes > 0


def plan_of_file_with_no_leak():
    from tests.planner.test_seeds_and_phases import plan_of_file_with

    return plan_of_file_with("s2-before.yaml", **{"rollout.vllm_version": None})


def _spec(**overrides: Any):
    return resolve(parse_spec(merged(A100, **overrides))).spec


def test_realise_turns_halving_into_numbers_and_drops_what_is_done() -> None:
    spec = _spec(**{"batch.micro_batch_size": 4, "batch.gradient_accumulation_steps": 2})
    assert F.realise(F.MICRO_BATCH, spec).change == "4 → 2, batch.gradient_accumulation_steps 2 → 4"
    assert F.realise(F.MICRO_BATCH, _spec(**{"batch.micro_batch_size": 1})) is None
    assert F.realise(F.CHECKPOINTING, spec) is None  # already on
    assert F.realise(F.ZERO3, spec) is None  # already zero3
    assert F.realise(F.SLEEP_1, spec) is None  # already level 1
    assert F.realise(F.SLEEP_2, spec).change == "1 → 2"
    assert F.realise(F.LOGPROB_BATCH, spec).change == "4 → 2"  # defaults to the micro-batch
    assert F.realise(F.EXPANDABLE, spec) is F.EXPANDABLE
    hf = _spec(**{"rollout.engine": "hf", "rollout.sleep_level": 0})
    assert F.realise(F.UTIL_LOWER, hf) is None and F.realise(F.OFFLOAD_MODEL, hf) is None


class _Run:
    spec = _spec()
    arch = gpu = None
    archs: dict = {}


def test_fit_hook_degrades_when_fit_is_missing_or_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fit_hook.importlib.util, "find_spec", lambda name: None)
    missing = fit_hook.propose_fit(_Run())
    assert not missing.available and "not part of this installation" in missing.note

    def boom(*args: Any) -> None:
        raise RuntimeError("half written")

    monkeypatch.setattr(fit_hook.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setitem(sys.modules, "oomless.fit.search", types.SimpleNamespace(fit=boom, FitOptions=dict))
    failed = fit_hook.propose_fit(_Run())
    assert not failed.available and "RuntimeError: half written" in failed.note


def test_fit_hook_reports_the_changes_of_the_best_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    best = types.SimpleNamespace(changes={"rollout.sleep_level": (1, 2), "batch.micro_batch_size": (2, 1)})
    fake = types.SimpleNamespace(fit=lambda run, raw, base, options: types.SimpleNamespace(best=best), FitOptions=dict)
    monkeypatch.setattr(fit_hook.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setitem(sys.modules, "oomless.fit.search", fake)
    proposal = fit_hook.propose_fit(_Run())
    assert proposal.available and proposal.changes == (("batch.micro_batch_size", 2, 1), ("rollout.sleep_level", 1, 2))
    nothing = types.SimpleNamespace(fit=lambda *a: types.SimpleNamespace(best=None), FitOptions=dict)
    monkeypatch.setitem(sys.modules, "oomless.fit.search", nothing)
    assert "no configuration" in fit_hook.propose_fit(_Run()).note
