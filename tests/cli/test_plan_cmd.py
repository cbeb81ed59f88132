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
    assert doc["worst_case"]["fits"] == all(c["ok"] for c in constraints)
    risk_accepted = doc["batch_risk"] is not None and doc["batch_risk"]["accepted"]
    assert doc["fits"] == (doc["worst_case"]["fits"] or (doc["verdict"] == "fits_typical" and risk_accepted))
    assert doc["verdict"] in ("fits", "fits_typical", "does_not_fit")
    assert doc["violations"] == [c for c in constraints if not c["ok"]]
    assert doc["binding"] in constraints
    assert doc["margin_bytes"] == doc["binding"]["margin_bytes"]
    if doc["worst_case"]["fits"]:
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


# --- typical vs worst (issue 14) ------------------------------------------------------------

RARE_TAIL = {
    "model": "Qwen/Qwen2.5-7B-Instruct",
    "hardware": {"gpu": "A100-80GB", "gpus_per_node": 8},
    "attention": "flash_attention_2",
    "batch": {"micro_batch_size": 3, "gradient_accumulation_steps": 1},
    "lengths": {
        "max_prompt_tokens": 1024, "max_completion_tokens": 32768, "typical_completion_tokens": 1500,
        "completion_percentiles": {90: 4000, 99: 7000, 99.99: 9000}, "completion_clip_fraction": 1e-7,
    },
    "rollout": {"engine": "vllm_colocate", "gpu_memory_utilization": 0.3, "sleep_level": 1},
}
"""Padded 3 × 33,792 tokens do not fit an 80 GB card; 3 × 10,024 do. 24 sequences a step; a
completion above 9,000 tokens has a chance of at most 1e-4 each."""


@pytest.mark.parametrize(("steps", "code"), [(100, EXIT_DOES_NOT_FIT), (10, EXIT_FITS)])
def test_fits_on_typical_batches_answers_from_the_run_length(runner: CliRunner, tmp_path: Path, steps: int, code: int) -> None:
    import yaml

    spec = tmp_path / "tail.yaml"
    spec.write_text(yaml.safe_dump({**RARE_TAIL, "schedule": {"max_steps": steps}}), encoding="utf-8")
    result = runner.invoke(app, ["plan", str(spec), "--json"])
    assert result.exit_code == code, result.output
    doc = json.loads(result.stdout)
    assert doc["verdict"] == "fits_typical" and doc["worst_case"]["fits"] is False and doc["typical"]["fits"] is True
    risk = doc["batch_risk"]
    per_step = 1 - (1 - 1e-4) ** 24  # every one of 24 sequences at most p99.99 = 9,000 tokens
    assert risk["per_step"] == pytest.approx(per_step)
    assert risk["per_run"] == pytest.approx(1 - (1 - per_step) ** steps)
    assert risk["expected_first_failing_step"] == pytest.approx(1 / per_step)
    assert risk["fitting_lengths"]["completion_tokens"] == 9000
    assert doc["violations"], "the worst case stays reported beside the verdict"
    human = " ".join(runner.invoke(app, ["plan", str(spec)]).stdout.split())
    assert "FITS ON TYPICAL BATCHES" in human and "expected first at step" in human


def test_without_a_run_length_the_worst_batch_is_assumed_to_come(runner: CliRunner, tmp_path: Path) -> None:
    import yaml

    spec = tmp_path / "tail.yaml"
    spec.write_text(yaml.safe_dump(RARE_TAIL), encoding="utf-8")
    result = runner.invoke(app, ["plan", str(spec), "--json"])
    assert result.exit_code == EXIT_DOES_NOT_FIT
    doc = json.loads(result.stdout)
    assert doc["verdict"] == "fits_typical" and doc["fits"] is False and doc["batch_risk"]["per_run"] is None
