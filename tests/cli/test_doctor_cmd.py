"""`oomless doctor`: exit codes, the human and JSON outputs, stdin, and one-line bad-input errors."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

from typer.testing import CliRunner

from oomless.cli.doctor_cmd import EXIT_DIAGNOSED, EXIT_NOT_RECOGNISED
from oomless.cli.main import app
from oomless.errors import EXIT_BAD_INPUT
from tests.cli.conftest import QUICKSTART, oomless_command, run_oomless
from tests.doctor.corpus import LOGS
from tests.helpers import ROOT

LOGPROB_LOG = next(LOGS.glob("02-*.log"))
STARTUP_LOG = next(LOGS.glob("34-*.log"))
DOC_KEYS = {"schema_version", "oomless_version", "recognised", "diagnosis", "frameworks", "findings", "reconciliation", "fit", "warnings",
            "checked_fixes", "gap_bytes"}


def test_a_known_error_is_diagnosed_with_phase_cause_and_fixes() -> None:
    done = run_oomless("doctor", str(LOGPROB_LOG))
    assert done.returncode == EXIT_DIAGNOSED, done.stderr
    assert "torch_gpu_oom (current) at line 13" in done.stdout
    assert "phase:  logprob" in done.stdout and "cause:" in done.stdout
    assert "batch.logprob_micro_batch_size" in done.stdout


def test_json_document(runner: CliRunner) -> None:
    result = runner.invoke(app, ["doctor", str(STARTUP_LOG), "--json"])
    assert result.exit_code == EXIT_DIAGNOSED, result.output
    doc = json.loads(result.stdout)
    assert set(doc) == DOC_KEYS and doc["recognised"] is True
    main = doc["diagnosis"]
    assert (main["kind"], main["phase"], main["phase_detail"]) == ("vllm_startup_free_memory", "load", "engine_start")
    assert main["numbers"]["requested_bytes"] == 24_996_709_663 and isinstance(main["numbers"]["free_bytes"], int)
    assert main["fixes"][0] == {
        "knob": "rollout.gpu_memory_utilization", "change": "lower to 0.92", "keeps_maths": True,
        "reason": "the engine reserves utilization × total; the rest of the GPU is everyone else's",
    }
    assert doc["reconciliation"] is None and doc["fit"] is None


def test_with_a_spec_the_log_meets_the_plan(runner: CliRunner) -> None:
    result = runner.invoke(app, ["doctor", str(LOGPROB_LOG), "--spec", str(QUICKSTART), "--json"])
    assert result.exit_code == EXIT_DIAGNOSED, result.output
    doc = json.loads(result.stdout)
    rec = doc["reconciliation"]
    assert rec["phase"] == "logprob" and rec["device"] == "gpu" and isinstance(rec["predicted_bytes"], int)
    assert set(doc["fit"]) == {"available", "note", "changes", "margin_bytes", "predicted_peak_bytes", "free_bytes",
                               "lowers_safety", "native"}  # whatever state `oomless fit` is in
    human = runner.invoke(app, ["doctor", str(LOGPROB_LOG), "--spec", str(QUICKSTART)])
    assert "  plan:   " in human.stdout


def test_nothing_recognised_exits_1(tmp_path: Path) -> None:
    log = tmp_path / "fine.log"
    log.write_text("step 10 loss 0.3\nstep 11 loss 0.29\n")
    done = run_oomless("doctor", str(log), "--json")
    assert done.returncode == EXIT_NOT_RECOGNISED
    assert json.loads(done.stdout)["diagnosis"] is None


def test_standard_input() -> None:
    done = subprocess.run([*oomless_command(), "doctor", "-"], input=STARTUP_LOG.read_text(), cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == EXIT_DIAGNOSED and "vllm_startup_free_memory" in done.stdout


def test_bad_input_is_one_line_and_exit_2(write_spec: Callable[..., Path], tmp_path: Path) -> None:
    for args in (
        ["doctor", str(tmp_path / "missing.log")],
        ["doctor", str(tmp_path)],
        ["doctor", str(LOGPROB_LOG), "--spec", str(QUICKSTART), "--from", "swift", str(QUICKSTART)],
        ["doctor", str(LOGPROB_LOG), "--spec", str(write_spec(kl_bta=0.1))],
        ["doctor", str(LOGPROB_LOG), "--from", "nosuch", str(QUICKSTART)],
    ):
        done = run_oomless(*args)
        assert done.returncode == EXIT_BAD_INPUT, (args, done.stdout)
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr


def test_hardware_flags_without_from_are_ignored_with_a_warning() -> None:
    done = run_oomless("doctor", str(LOGPROB_LOG), "--gpu", "A100-80GB")
    assert done.returncode == EXIT_DIAGNOSED and "ignored without --from" in done.stderr
