"""`oomless watch` on real processes: a job whose host memory grows step by step is warned
about several steps before it crosses a limit, at the right step; a flat job is not; the job's
exit code comes back; bad input is one line with exit 2."""

from __future__ import annotations

import io
import sys
from pathlib import Path

from typer.testing import CliRunner

from oomless.cli.main import app
from oomless.errors import EXIT_BAD_INPUT
from oomless.telemetry import read_records
from oomless.watch.session import WatchOptions, run_job

JOB = Path(__file__).with_name("grow_job.py")
MiB = 1024**2
LIMIT = 640 * MiB
"""With 32 MiB more per step over a ~15 MiB interpreter, crossed near step 20 of 26."""


def watch(tmp_path: Path, mib_per_step: int, steps: int, exit_code: int = 0):
    options = WatchOptions(out_dir=tmp_path, interval_s=0.03, host_limit_bytes=LIMIT)
    lines: list[str] = []
    result = run_job([sys.executable, str(JOB), str(mib_per_step), str(steps), "0.12", str(exit_code)],
                     options, lines.append, sink=io.StringIO())
    return result, read_records(tmp_path / "telemetry.jsonl"), lines


def test_growth_is_forecast_at_the_right_step_several_steps_ahead(tmp_path: Path) -> None:
    result, records, lines = watch(tmp_path, 32, 26)
    crossed = min(r["step"] for r in records if r["phase"] == "step" and r["rss_bytes"] >= LIMIT)
    first = result.crossings[0]
    assert first.current_step <= crossed - 3, (first, crossed)
    assert abs(first.step - crossed) <= 1, (first.step, crossed)
    assert any(line.startswith("warning: host (process tree): +") for line in lines)
    assert {r["step"] for r in records} == set(range(0, 27))
    assert all(r["schema"] == 1 and r["device"] == "host" for r in records)


def test_a_flat_job_gets_no_warning_and_its_exit_code_back(tmp_path: Path) -> None:
    result, records, _ = watch(tmp_path, 0, 12, exit_code=7)
    assert result.exit_code == 7 and result.warnings == [] and result.crossings == []
    assert max(r["step"] for r in records) == 12


def test_a_missing_command_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["watch", "--out", str(tmp_path), "--", "no-such-program-oomless"])
    assert result.exit_code == EXIT_BAD_INPUT
    assert result.output.strip().splitlines() == ["error: COMMAND: 'no-such-program-oomless' not found; give a program on PATH or a path to one"]


def test_a_gone_pid_is_one_line_and_exit_2(tmp_path: Path) -> None:
    import subprocess

    done = subprocess.run([sys.executable, "-c", "pass"], check=True)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    result = CliRunner().invoke(app, ["watch", "--out", str(tmp_path), "--pid", str(gone.pid)])
    assert done.returncode == 0 and result.exit_code == EXIT_BAD_INPUT
    assert "no process" in result.output and len(result.output.strip().splitlines()) == 1


def test_the_cli_returns_the_job_exit_code(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["watch", "--interval", "0.05", "--out", str(tmp_path), "--",
                                      sys.executable, str(JOB), "0", "3", "0.05", "5"])
    assert result.exit_code == 5, result.output
    assert "step(s) watched" in result.output


def test_on_risk_checkpoint_signals_the_job_once(tmp_path: Path) -> None:
    options = WatchOptions(out_dir=tmp_path, interval_s=0.03, host_limit_bytes=LIMIT, on_risk="checkpoint")
    lines: list[str] = []
    output = io.StringIO()
    result = run_job([sys.executable, str(JOB), "32", "26", "0.12"], options, lines.append, sink=output)
    assert result.exit_code == 0 and result.crossings
    assert sum("sent SIGUSR1" in line for line in lines) == 1
    assert output.getvalue().count("checkpoint requested at step") == 1
    assert (tmp_path / "job.log").read_text().count("checkpoint requested") == 1


def test_attach_to_a_pid_follows_its_log_file(tmp_path: Path) -> None:
    import subprocess

    log = tmp_path / "train.log"
    log.write_text("")
    with log.open("a") as sink:
        job = subprocess.Popen([sys.executable, str(JOB), "32", "24", "0.12"], stdout=sink, stderr=subprocess.STDOUT)
    try:
        from oomless.watch.session import attach

        lines: list[str] = []
        options = WatchOptions(out_dir=tmp_path / "watch", interval_s=0.03, host_limit_bytes=LIMIT)
        result = attach(job.pid, log, options, lines.append)
    finally:
        job.wait(timeout=60)
    records = read_records(tmp_path / "watch" / "telemetry.jsonl")
    assert result.exit_code is None and max(r["step"] for r in records) == 24
    assert result.crossings and result.crossings[0].current_step < 20
