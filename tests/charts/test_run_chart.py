"""The run chart (measured vs planned peak per phase over steps) on synthetic records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oomless.charts.run import RunRecord, phase_series, read_records, write_run_chart
from oomless.errors import InputError
from oomless.units import GiB
from tests.charts.conftest import assert_not_blank, parse_html, png_pixels

PLANNED = {"rollout": 30 * GiB, "train": 36 * GiB, "optimizer": 25 * GiB}


def _records() -> list[dict]:
    """Three phases over 20 steps, two ranks each; train is 20 % over its plan at step 7 on rank 1
    and 5 % over (within the tolerance, not over plan) at step 9 on rank 0."""
    out = []
    for step in range(20):
        for phase, planned in PLANNED.items():
            for rank in (0, 1):
                peak = planned - (step % 5 + rank) * GiB // 4
                if (phase, step, rank) == ("train", 7, 1):
                    peak = planned + planned // 5
                if (phase, step, rank) == ("train", 9, 0):
                    peak = planned + planned // 20
                out.append({"step": step, "phase": phase, "peak_bytes": peak, "planned_bytes": planned, "rank": rank})
    return out


def test_series_merge_ranks_by_maximum_in_phase_order() -> None:
    records = [RunRecord(r["step"], r["phase"], r["peak_bytes"], r["planned_bytes"]) for r in _records()]
    series = phase_series(records)
    assert [s.phase for s in series] == ["rollout", "train", "optimizer"]  # the plan's time order
    train = series[1]
    assert train.steps == tuple(range(20))
    assert train.peak_bytes[0] == PLANNED["train"]  # rank 0 at step 0 is the larger
    assert train.peak_bytes[7] == PLANNED["train"] * 6 // 5
    assert train.peak_bytes[9] > PLANNED["train"]
    assert train.over_plan == (7,)  # step 9 is within the tolerance (oomless.telemetry.is_over_plan)
    assert series[0].over_plan == series[2].over_plan == ()


def test_png_and_html_of_synthetic_records(tmp_path: Path) -> None:
    records = _records()
    write_run_chart(records, html=tmp_path / "run.html", png=tmp_path / "run.png", capacity_bytes=40 * GiB)
    data = (tmp_path / "run.png").read_bytes()
    size, pixels = png_pixels(data)
    assert size == (1100, 520)
    assert_not_blank(data, min_colours=30, min_inked=0.01)
    assert (192, 57, 43) in set(pixels)  # the red of the over-plan dot and the capacity line
    page = parse_html((tmp_path / "run.html").read_text(encoding="utf-8"))
    embedded = json.loads(page.scripts["oomless-run"])
    assert embedded == [{k: r[k] for k in ("step", "phase", "peak_bytes", "planned_bytes")} for r in records]
    groups = [a["id"] for tag, a in page.elements if tag == "g" and a.get("id", "").split(":")[0] in ("measured", "planned", "over-plan")]
    assert sorted(groups) == sorted([f"{kind}:{p}" for p in PLANNED for kind in ("measured", "planned")] + ["over-plan:train"])


def test_a_tiny_run_gets_a_mib_axis_with_ticks(tmp_path: Path) -> None:
    from matplotlib.ticker import MaxNLocator  # noqa: F401  (the charts extra)

    from oomless.charts.run import axis_unit, phase_series, run_figure
    from oomless.units import MiB

    records = [RunRecord(0, "load", 300 * 1024, 450 * 1024)] + [
        RunRecord(s, "train", 2 * MiB, int(1.8 * MiB)) for s in range(1, 7)]
    series = phase_series(records)
    assert axis_unit(3 * MiB) == (MiB, "MiB") and axis_unit(3 * GiB) == (GiB, "GiB")
    ax = run_figure(series, "tiny", None).axes[0]
    assert ax.get_ylabel() == "MiB"
    ticks = [t for t in ax.get_yticks() if 0 <= t <= ax.get_ylim()[1]]
    assert len(ticks) >= 4  # not one tick at 0 GiB
    load = next(line for line in ax.get_lines() if line.get_gid() == "measured:load")
    assert load.get_marker() == "o"  # one point is drawn as a dot


def test_records_from_jsonl_and_their_errors(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text('{"step": 0, "phase": "train", "peak_bytes": 5, "planned_bytes": null}\n\n'
                    '{"step": 1, "phase": "train", "peak_bytes": 6, "planned_bytes": 7}\n', encoding="utf-8")
    assert read_records(path) == [RunRecord(0, "train", 5, None), RunRecord(1, "train", 6, 7)]
    path.write_text('{"step": 0, "phase": "train", "peak_bytes": 5}\n{"step": 1, "phase": "train", "peak_bytes": -1}\n',
                    encoding="utf-8")
    with pytest.raises(InputError, match=r"line 2: peak_bytes: got -1; allowed an integer ≥ 0"):
        read_records(path)
    path.write_text("{not json\n", encoding="utf-8")
    with pytest.raises(InputError, match="line 1: not JSON"):
        read_records(path)
    with pytest.raises(InputError, match="missing 'peak_bytes'"):
        write_run_chart([{"step": 0, "phase": "train"}], png=tmp_path / "x.png")
    with pytest.raises(InputError, match="no records"):
        write_run_chart([], png=tmp_path / "x.png")
