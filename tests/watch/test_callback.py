"""The drop-in callback inside a real TRL GRPOTrainer run on the CPU (tiny-arith model), watched by
`oomless watch`: its plan-vs-measured metrics reach a TensorBoard event file, and its step and
phase marks split the watch's telemetry into the run's steps and phases."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from oomless.telemetry import read_records
from oomless.watch.session import WatchOptions, run_job
from tests.helpers import EXAMPLES

pytest.importorskip("trl")
pytest.importorskip("tensorboard")

JOB = Path(__file__).with_name("trl_job.py")
STEPS = 3


def scalars(event_dir: Path) -> dict[str, list[float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    files = sorted(event_dir.rglob("events.out.tfevents.*"))
    assert files, f"no TensorBoard event file under {event_dir}"
    out: dict[str, list[float]] = {}
    for path in files:
        acc = EventAccumulator(str(path))
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            out.setdefault(tag, []).extend(e.value for e in acc.Scalars(tag))
    return out


def test_callback_metrics_reach_tensorboard_and_marks_split_the_watch(tmp_path: Path) -> None:
    options = WatchOptions(out_dir=tmp_path / "watch", interval_s=0.05)
    lines: list[str] = []
    log = io.StringIO()
    result = run_job([sys.executable, str(JOB), str(tmp_path), str(STEPS), str(EXAMPLES / "tiny-arith.yaml")],
                     options, lines.append, sink=log)
    assert result.exit_code == 0, log.getvalue()[-3000:]

    tags = scalars(tmp_path / "run")
    for name in ("step_peak_gib", "host_rss_gib", "train_peak_gib", "train_planned_gib", "train_over_plan", "rollout_peak_gib"):
        assert len(tags.get(f"train/oomless/{name}", [])) >= STEPS, (name, sorted(tags))
    assert all(0 < v < 64 for v in tags["train/oomless/step_peak_gib"])
    assert tags["train/oomless/train_planned_gib"][0] == pytest.approx(tags["train/oomless/train_planned_gib"][-1])

    records = read_records(tmp_path / "watch" / "telemetry.jsonl")
    assert {r["step"] for r in records} == set(range(0, STEPS + 1))
    phases = {r["phase"] for r in records if r["step"] > 0}
    assert {"rollout", "train"} <= phases, phases
    assert all(r["schema"] == 1 and r["peak_bytes"] > 0 for r in records)
    assert "[oomless] step 1 phase rollout" in log.getvalue()
