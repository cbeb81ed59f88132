"""`oomless plan`: exit codes, and the `--json` document's stable keys and internal consistency."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from oomless.cli.main import app
from oomless.errors import EXIT_BAD_INPUT, EXIT_DOES_NOT_FIT, EXIT_FITS
from oomless.planner.plan import make_plan
from oomless.planner.report import plan_to_dict
from oomless.spec.load import load_run
from tests.cli.conftest import QUICKSTART, S1_AFTER, S1_BEFORE, run_oomless
from tests.helpers import EXAMPLES

ALL_EXAMPLES = sorted(p for p in EXAMPLES.rglob("*.yaml") if "native" not in p.parts)  # native: framework configs
PHASES_WITHOUT_KL = ["load", "rollout", "train", "optimizer", "weight_sync"]
PHASES_WITH_KL = ["load", "rollout", "logprob", "train", "optimizer", "weight_sync"]


def plan_json(runner: CliRunner, spec: Path) -> dict[str, Any]:
    result = runner.invoke(app, ["plan", str(spec), "--json"])
    assert result.exit_code in (EXIT_FITS, EXIT_DOES_NOT_FIT), result.output
    return json.loads(result.stdout)


# --- exit codes -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "code"),
    [(QUICKSTART, EXIT_FITS), (S1_BEFORE, EXIT_DOES_NOT_FIT), (S1_AFTER, EXIT_FITS)],
    ids=["quickstart-fits", "s1-before-does-not-fit", "s1-after-fits"],
)
def test_exit_code_says_whether_it_fits(runner: CliRunner, spec: Path, code: int) -> None:
    for args in (["plan", str(spec)], ["plan", str(spec), "--json"]):
        result = runner.invoke(app, args)
        assert result.exit_code == code, result.output
        assert result.stderr == ""


def test_installed_script_exit_codes() -> None:
    assert run_oomless("plan", str(QUICKSTART)).returncode == EXIT_FITS
    assert run_oomless("plan", str(S1_BEFORE), "--json").returncode == EXIT_DOES_NOT_FIT
    assert run_oomless("plan", "no-such-spec.yaml").returncode == EXIT_BAD_INPUT


@pytest.mark.parametrize("args", [["plan"], ["plan", str(QUICKSTART), "--bogus"], ["nonsense"]])
def test_usage_errors_exit_bad_input(runner: CliRunner, args: list[str]) -> None:
    assert runner.invoke(app, args).exit_code == EXIT_BAD_INPUT


def test_human_output_states_the_verdict(runner: CliRunner) -> None:
    fits = runner.invoke(app, ["plan", str(QUICKSTART)])
    broken = runner.invoke(app, ["plan", str(S1_BEFORE)])
    assert "FITS" in fits.stdout and "DOES NOT FIT" not in fits.stdout
    assert "DOES NOT FIT" in broken.stdout
    assert "GiB" in fits.stdout
    assert re.search(r"\d (GB|MB)\b", fits.stdout) is None  # binary units, labelled GiB/MiB


# --- the JSON document ---------------------------------------------------------------------


def test_json_has_the_stable_keys(runner: CliRunner) -> None:
    doc = plan_json(runner, QUICKSTART)
    assert isinstance(doc["fits"], bool)
    assert {"phase", "device", "component"} <= doc["binding"].keys()
    assert doc["binding"]["device"] in ("gpu", "host")
    assert {"capacity_bytes", "peak_bytes", "phases"} <= doc["gpu"].keys()
    assert {"capacity_bytes", "limit_bytes", "peak_bytes", "components"} <= doc["host"].keys()
    for phase in doc["gpu"]["phases"]:
        assert {"name", "peak_bytes", "components"} <= phase.keys()
        assert all(isinstance(k, str) and type(v) is int for k, v in phase["components"].items())
    assert all(type(v) is int for v in doc["host"]["components"].values())


def test_json_phase_names_follow_kl_beta(runner: CliRunner, write_spec: Callable[..., Path]) -> None:
    with_kl = plan_json(runner, QUICKSTART)  # kl_beta 0.04
    without_kl = plan_json(runner, write_spec(kl_beta=0.0))
    assert [p["name"] for p in with_kl["gpu"]["phases"]] == PHASES_WITH_KL
    assert [p["name"] for p in without_kl["gpu"]["phases"]] == PHASES_WITHOUT_KL


@pytest.mark.parametrize("spec", ALL_EXAMPLES, ids=lambda p: p.stem)
def test_json_is_internally_consistent(runner: CliRunner, spec: Path) -> None:
    doc = plan_json(runner, spec)
    gpu, host = doc["gpu"], doc["host"]
    phase_lists = [gpu["phases"]] + [d["phases"] for d in gpu["devices"]] + [host["phases"]]
    for phase in (p for phases in phase_lists for p in phases):
        assert phase["peak_bytes"] == sum(phase["components"].values()), phase["name"]
    assert gpu["peak_bytes"] == max(p["peak_bytes"] for p in gpu["phases"])
    assert gpu["peak_bytes"] == max(d["peak_bytes"] for d in gpu["devices"])
    for device in gpu["devices"]:
        assert device["peak_bytes"] == max(p["peak_bytes"] for p in device["phases"])
    assert host["peak_bytes"] == sum(host["components"].values())
    assert host["peak_bytes"] == max(p["peak_bytes"] for p in host["phases"])
    constraints = doc["constraints"]
    for c in constraints:
        assert c["margin_bytes"] == c["available_bytes"] - c["required_bytes"]
        assert c["ok"] == (c["margin_bytes"] >= 0)
    assert doc["fits"] == all(c["ok"] for c in constraints)
    assert doc["violations"] == [c for c in constraints if not c["ok"]]
    assert doc["binding"] in constraints
    assert doc["margin_bytes"] == doc["binding"]["margin_bytes"]
    if doc["fits"]:
        assert doc["binding"]["margin_bytes"] == min(c["margin_bytes"] for c in constraints)


def test_json_matches_the_library(runner: CliRunner) -> None:
    run = load_run(S1_AFTER)
    assert plan_json(runner, S1_AFTER) == plan_to_dict(make_plan(run.spec, run.arch, run.gpu, run.archs))


def test_s1_before_breaks_at_load_and_s1_after_fits(runner: CliRunner) -> None:
    before = plan_json(runner, S1_BEFORE)
    after = plan_json(runner, S1_AFTER)
    assert before["fits"] is False
    assert before["binding"]["phase"] == "load"
    assert before["binding"]["ok"] is False
    assert after["fits"] is True
    assert after["violations"] == []


def test_ignored_option_warns_on_stderr_and_in_json(runner: CliRunner, write_spec: Callable[..., Path]) -> None:
    spec = write_spec(**{"finetune.lora_rank": 16})  # quickstart is full fine-tuning
    human = runner.invoke(app, ["plan", str(spec)])
    as_json = runner.invoke(app, ["plan", str(spec), "--json"])
    for result in (human, as_json):
        assert result.exit_code == EXIT_FITS, result.output
        assert result.stderr.splitlines() == ["warning: finetune.lora_rank is ignored: finetune.method is full"]
    assert json.loads(as_json.stdout)["warnings"] == ["finetune.lora_rank is ignored: finetune.method is full"]
    assert plan_json(runner, QUICKSTART)["warnings"] == []
