"""`oomless chart RUN`: the run chart from a watched job's telemetry (and bad input in one line)."""

from __future__ import annotations

import io
import sys
from pathlib import Path

from typer.testing import CliRunner

from oomless.cli.main import app
from oomless.errors import EXIT_BAD_INPUT
from oomless.watch.session import WatchOptions, run_job

JOB = Path(__file__).with_name("grow_job.py")


def test_chart_of_a_watched_run(tmp_path: Path) -> None:
    options = WatchOptions(out_dir=tmp_path, interval_s=0.03, host_limit_bytes=2**30)
    run_job([sys.executable, str(JOB), "8", "6", "0.05"], options, lambda line: None, sink=io.StringIO())
    result = CliRunner().invoke(app, ["chart", str(tmp_path)])
    assert result.exit_code == 0, result.output
    page = (tmp_path / "memory.html").read_text(encoding="utf-8")
    assert "<svg" in page and "host memory" in page


def test_chart_without_telemetry_is_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["chart", str(tmp_path)])
    assert result.exit_code == EXIT_BAD_INPUT
    assert len(result.output.strip().splitlines()) == 1 and "no telemetry" in result.output


def test_chart_of_another_schema_names_the_line(tmp_path: Path) -> None:
    (tmp_path / "telemetry.jsonl").write_text('{"schema": 9, "step": 1, "phase": "step", "peak_bytes": 1}\n')
    result = CliRunner().invoke(app, ["chart", str(tmp_path)])
    assert result.exit_code == EXIT_BAD_INPUT and "telemetry.jsonl:1" in result.output


def test_doctor_reads_a_watched_run(tmp_path: Path) -> None:
    """Growth from step 1 of a job that adds 16 MiB per step; the last step holds the peak."""
    options = WatchOptions(out_dir=tmp_path, interval_s=0.03)
    run_job([sys.executable, str(JOB), "16", "12", "0.08"], options, lambda line: None, sink=io.StringIO())
    result = CliRunner().invoke(app, ["doctor", str(tmp_path)])
    assert result.exit_code == 1, result.output  # no out-of-memory message in the log
    assert "measured (telemetry):" in result.output
    assert "growth: host (process tree) grew from step" in result.output
    done = CliRunner().invoke(app, ["doctor", str(tmp_path), "--json"])
    import json

    doc = json.loads(done.stdout)
    assert doc["telemetry"]["growth"][0]["start_step"] <= 3
    assert doc["telemetry"]["peak"]["step"] >= 11
