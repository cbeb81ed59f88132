"""The run folder's files without training: atomic writes, complete checkpoints, the one
over-plan rule (train's table, warnings and the run chart agree), rate-limited warnings."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oomless.charts.run import RunRecord, phase_series
from oomless.telemetry import is_over_plan, read_records
from oomless.train import files as F
from oomless.train.report import plan_vs_actual_rows
from oomless.train.telemetry import WARN_INTERVAL_SECONDS, PlannedPhase, Telemetry, memory_metrics
from oomless.units import GiB, MiB


def telemetry(tmp_path: Path, peaks: list[int], planned: int, clock: list[float], warnings: list[str]) -> Telemetry:
    """A Telemetry whose `train` phase measures ``peaks`` in turn, against ``planned`` bytes."""
    it = iter(peaks)
    return Telemetry(tmp_path / "telemetry.jsonl", {"train": PlannedPhase("train", planned, planned)},
                     measure=lambda: {"peak_bytes": next(it)}, reset=lambda: None, warn=warnings.append,
                     clock=lambda: clock[0])


def run_steps(t: Telemetry, num_steps: int, clock: list[float], seconds_per_step: float) -> None:
    for step in range(1, num_steps + 1):
        with t.phase("train", step):
            pass
        t.flush()
        clock[0] += seconds_per_step


@given(st.lists(st.integers(0, 3 * GiB), min_size=1, max_size=30), st.integers(1, 2 * GiB))
def test_table_and_chart_count_the_same_steps_over_plan(peaks: list[int], planned: int) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        t = telemetry(Path(folder), peaks, planned, [0.0], [])
        run_steps(t, len(peaks), [0.0], 1.0)
        records = read_records(Path(folder) / "telemetry.jsonl")
    row = plan_vs_actual_rows(t.summaries)[0]
    chart = phase_series([RunRecord(r["step"], r["phase"], r["peak_bytes"], r["planned_bytes"]) for r in records])[0]
    assert row["num_steps_over_plan"] == len(chart.over_plan) == sum(is_over_plan(p, planned) for p in peaks)
    assert row["over_plan"] == is_over_plan(max(peaks), planned)


def test_over_plan_warnings_are_in_binary_units_and_rate_limited(tmp_path: Path) -> None:
    planned = 100 * MiB
    rising = [planned * 2 + i * MiB for i in range(600)]  # every step over plan, each a new high
    warnings: list[str] = []
    clock = [0.0]
    t = telemetry(tmp_path, rising, planned, clock, warnings)
    run_steps(t, 600, clock, seconds_per_step=1.0)
    assert len(warnings) == 600 // WARN_INTERVAL_SECONDS  # once a minute, not once a step
    assert "peaked at 200.0 MiB, 100 % over its planned 100.0 MiB (1/1 steps over plan" in warnings[0]
    assert not any(re.search(r"\d B\b", w) for w in warnings)  # no raw byte counts
    flat: list[str] = []
    clock = [0.0]
    t = telemetry(tmp_path / "flat", [planned * 2] * 600, planned, clock, flat)
    run_steps(t, 600, clock, seconds_per_step=1.0)
    assert len(flat) == 1  # no new high: warned once


def test_memory_metrics_for_loggers_are_per_phase_in_gib() -> None:
    metrics = memory_metrics({"train": {"peak_bytes": 3 * GiB, "planned_bytes": 2 * GiB},
                              "load": {"peak_bytes": GiB // 2, "planned_bytes": None}})
    assert metrics == {"memory/train_peak_gib": 3.0, "memory/train_planned_gib": 2.0,
                       "memory/train_measured_over_planned": 1.5, "memory/load_peak_gib": 0.5}


def test_jsonl_appends_replace_the_file_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "events.jsonl"
    F.append_jsonl(path, [{"step": 1}])
    F.append_jsonl(path, [{"step": 2}, {"step": 3}], schema=True)
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert lines == [{"step": 1}, {"schema": 1, "step": 2}, {"schema": 1, "step": 3}]

    def failing_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError):
        F.append_jsonl(path, [{"step": 4}])
    assert [json.loads(x) for x in path.read_text().splitlines()] == lines  # the old file, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["events.jsonl"]  # no temporary left behind


def test_resume_skips_a_checkpoint_cut_off_while_saving(tmp_path: Path) -> None:
    for step, complete in ((2, True), (4, True), (6, False)):
        folder = tmp_path / f"checkpoint-{step}"
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(b"x")
        if complete:
            (folder / F.TRAINER_STATE).write_text("{}")
    (tmp_path / "checkpoint-notanumber").mkdir()
    checkpoint, incomplete = F.last_complete_checkpoint(tmp_path)
    assert checkpoint == tmp_path / "checkpoint-4" and incomplete == [tmp_path / "checkpoint-6"]
    assert F.last_complete_checkpoint(tmp_path / "missing") == (None, [])


def test_a_folder_is_replaced_whole_or_not_at_all(tmp_path: Path) -> None:
    target = tmp_path / "final"
    target.mkdir()
    (target / "old.bin").write_bytes(b"old")

    def fails(folder: Path) -> None:
        folder.mkdir()
        (folder / "half.bin").write_bytes(b"x")
        raise OSError("disk full")

    with pytest.raises(OSError):
        F.replace_folder(target, fails)
    assert [p.name for p in target.iterdir()] == ["old.bin"]
    assert [p.name for p in tmp_path.iterdir()] == ["final"]  # the half-written folder is gone

    def writes(folder: Path) -> None:
        folder.mkdir()
        (folder / "new.bin").write_bytes(b"new")

    F.replace_folder(target, writes)
    assert [p.name for p in target.iterdir()] == ["new.bin"]
    assert [p.name for p in tmp_path.iterdir()] == ["final"]


def test_report_to_names_known_installed_loggers(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from oomless.errors import InputError
    from oomless.train.run import TrainOptions, check_options

    check_options(TrainOptions(report_to=("tensorboard",)))  # installed with the test extras
    with pytest.raises(InputError, match="'tensorbord' is not a logger TRL reports to; allowed: none, all, tensorboard"):
        check_options(TrainOptions(report_to=("tensorbord",)))
    with pytest.raises(InputError, match="'none' and 'all' stand alone"):
        check_options(TrainOptions(report_to=("none", "wandb")))
    with pytest.raises(InputError, match="exclude each other"):
        check_options(TrainOptions(resume=True, overwrite=True))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(InputError, match=r"--report-to: wandb is not installed: pip install wandb"):
        check_options(TrainOptions(report_to=("wandb",)))
