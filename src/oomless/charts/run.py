"""The run chart: measured against planned peak memory per phase, over a run's steps.

`oomless train` appends one JSON object per line (JSONL) per step and phase:

    {"step": 12, "phase": "train", "peak_bytes": 20512342016, "planned_bytes": 22020096000}

- `step`: int ≥ 0, the optimizer step the phase belongs to;
- `phase`: a phase name of the plan (`load`, `rollout`, `logprob`, `train`, ...);
- `peak_bytes`: int ≥ 0, the measured peak of that phase on one GPU
  (`torch.cuda.max_memory_reserved` after a reset at the phase's start, or NVML);
- `planned_bytes`: int ≥ 0 or null, the plan's peak of that phase on the same device role.

Other keys (rank, device_role, time, ...) are ignored. Several records for one (step, phase)
(one per rank) count as their maximum. Bytes are integers; GiB appear only on the axis.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..telemetry import OVER_PLAN_TOLERANCE, is_over_plan
from ..units import GiB, MiB, format_bytes
from .files import check_outputs, write_atomically

PHASE_COLOURS = {
    "load": "#999999", "rollout": "#cc79a7", "logprob": "#56b4e9", "critic_train": "#e69f00",
    "train": "#d55e00", "optimizer": "#009e73", "weight_sync": "#0072b2",
}
EXTRA_COLOURS = ("#6b4c2a", "#f0e442", "#000000")
ABOVE_PLAN = f"over plan (>{100 * OVER_PLAN_TOLERANCE:.0f} %)"
RED = "#c0392b"
WIDTH_PX, HEIGHT_PX = 1100, 520
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 60, 170, 50, 44


@dataclass(frozen=True)
class RunRecord:
    step: int
    phase: str
    peak_bytes: int
    planned_bytes: int | None


@dataclass(frozen=True)
class PhaseSeries:
    phase: str
    colour: str
    steps: tuple[int, ...]
    peak_bytes: tuple[int, ...]
    planned_bytes: tuple[int | None, ...]

    @property
    def over_plan(self) -> tuple[int, ...]:
        """Steps where the measured peak is over the plan (`oomless.telemetry.is_over_plan`, the
        rule `oomless train`'s table counts by)."""
        return tuple(s for s, m, p in zip(self.steps, self.peak_bytes, self.planned_bytes) if is_over_plan(m, p))


def _count(value: Any, key: str, where: str, nullable: bool = False) -> int | None:
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        allowed = "an integer ≥ 0" + (" or null" if nullable else "")
        raise InputError(f"{where}: {key}", f"got {value!r}; allowed {allowed}")
    return value


def parse_record(obj: Any, where: str) -> RunRecord:
    """One record; `where` names it in errors (e.g. "run.jsonl line 3")."""
    if not isinstance(obj, dict):
        raise InputError(where, f"expected a JSON object, got {type(obj).__name__}")
    for key in ("step", "phase", "peak_bytes"):
        if key not in obj:
            raise InputError(where, f"missing {key!r}; a record needs step, phase, peak_bytes, planned_bytes")
    if not isinstance(obj["phase"], str) or not obj["phase"]:
        raise InputError(f"{where}: phase", f"got {obj['phase']!r}; allowed a phase name such as 'train'")
    return RunRecord(
        step=_count(obj["step"], "step", where), phase=obj["phase"],
        peak_bytes=_count(obj["peak_bytes"], "peak_bytes", where),
        planned_bytes=_count(obj.get("planned_bytes"), "planned_bytes", where, nullable=True),
    )


def read_records(path: Path) -> list[RunRecord]:
    """Records of a JSONL file (blank lines skipped)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise InputError("records", f"cannot read {path}: {err}") from None
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            raise InputError(f"{path} line {number}", f"not JSON: {err.msg}") from None
        out.append(parse_record(obj, f"{path} line {number}"))
    return out


def phase_series(records: Iterable[RunRecord]) -> tuple[PhaseSeries, ...]:
    """One series per phase, plan order first, steps ascending, ranks merged by maximum."""
    merged: dict[tuple[str, int], tuple[int, int | None]] = {}
    for r in records:
        peak, planned = merged.get((r.phase, r.step), (0, None))
        plans = [p for p in (planned, r.planned_bytes) if p is not None]
        merged[(r.phase, r.step)] = (max(peak, r.peak_bytes), max(plans) if plans else None)
    phases = sorted({p for p, _ in merged}, key=lambda p: (list(PHASE_COLOURS).index(p) if p in PHASE_COLOURS else 99, p))
    out = []
    for i, phase in enumerate(phases):
        steps = sorted(s for p, s in merged if p == phase)
        colour = PHASE_COLOURS.get(phase) or EXTRA_COLOURS[i % len(EXTRA_COLOURS)]
        out.append(PhaseSeries(phase, colour, tuple(steps), tuple(merged[(phase, s)][0] for s in steps),
                               tuple(merged[(phase, s)][1] for s in steps)))
    return tuple(out)


def _extent(series: Sequence[PhaseSeries], capacity_bytes: int | None) -> int:
    values = [v for ser in series for v in (*ser.peak_bytes, *ser.planned_bytes) if v is not None]
    return int(max(values + [capacity_bytes or 0, 1]) * 1.1)


def axis_unit(top_bytes: int) -> tuple[int, str]:
    """GiB for GPU-sized runs, MiB below 1 GiB (a tiny CPU run), so the axis has readable ticks."""
    return (GiB, "GiB") if top_bytes >= GiB else (MiB, "MiB")


def run_figure(series: Sequence[PhaseSeries], title: str, capacity_bytes: int | None) -> Any:
    """The run chart as one matplotlib figure (drawn to PNG and to the HTML page's SVG). Each
    line carries a gid (`measured:PHASE`, `planned:PHASE`, `over-plan:PHASE`), which the SVG
    writes as the id of its group."""
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    from .png import FONT_PT, new_figure, place

    fig = new_figure(WIDTH_PX, HEIGHT_PX)
    ax = place(fig, 0, 0, WIDTH_PX, HEIGHT_PX, (MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM))
    top = _extent(series, capacity_bytes)
    unit_bytes, unit = axis_unit(top)
    ax.set_ylim(0, top / unit_bytes)
    ax.yaxis.set_major_locator(MaxNLocator(nbins=8))
    ax.xaxis.set_major_locator(MaxNLocator(nbins=12, integer=True))
    ax.set_title(title, loc="left", fontsize=FONT_PT + 3, fontweight="bold")
    ax.set_xlabel("step", fontsize=FONT_PT + 1)
    ax.set_ylabel(unit, fontsize=FONT_PT + 1)
    ax.tick_params(labelsize=FONT_PT + 0.5)
    ax.grid(axis="y", color="#e6e6e6")
    handles = []
    for ser in series:
        marker = "o" if len(ser.steps) == 1 else None  # a phase measured once (load) is a dot, not an invisible line
        ax.plot(ser.steps, [v / unit_bytes for v in ser.peak_bytes], color=ser.colour, linewidth=2, marker=marker,
                gid=f"measured:{ser.phase}")
        planned = [(s, v / unit_bytes) for s, v in zip(ser.steps, ser.planned_bytes) if v is not None]
        if planned:
            ax.plot(*zip(*planned), color=ser.colour, linewidth=1.4, linestyle="--", marker=marker and "_",
                    gid=f"planned:{ser.phase}")
        over = [(s, v / unit_bytes) for s, v in zip(ser.steps, ser.peak_bytes) if s in ser.over_plan]
        if over:
            ax.plot(*zip(*over), linestyle="none", marker="o", color=RED, markersize=5, gid=f"over-plan:{ser.phase}")
        handles.append(Line2D([], [], color=ser.colour, linewidth=2, label=ser.phase))
    if capacity_bytes:
        ax.axhline(capacity_bytes / unit_bytes, color=RED, linestyle="--", linewidth=1.4, gid="capacity")
        handles.append(Line2D([], [], color=RED, linestyle="--", label=f"GPU {format_bytes(capacity_bytes)}"))
    handles += [
        Line2D([], [], color="#555555", linewidth=2, label="measured"),
        Line2D([], [], color="#555555", linewidth=1.4, linestyle="--", label="planned"),
        Line2D([], [], color=RED, linestyle="none", marker="o", label=ABOVE_PLAN),
    ]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=FONT_PT + 0.5, frameon=False)
    return fig


def write_run_chart(
    records: Iterable[RunRecord | dict[str, Any]], html: Path | None = None, png: Path | None = None,
    title: str = "Peak GPU memory per phase: measured vs planned", capacity_bytes: int | None = None,
) -> None:
    """Draw the run chart; records are `RunRecord`s or dicts of the documented shape."""
    parsed = [r if isinstance(r, RunRecord) else parse_record(r, f"record {i}") for i, r in enumerate(records)]
    if not parsed:
        raise InputError("records", "no records to draw")
    check_outputs({"--html": html, "--png": png})
    series = phase_series(parsed)
    from .png import png_bytes, svg_text

    figure = run_figure(series, title, capacity_bytes)
    if html is not None:
        from .html import page, safe_svg

        data = [vars(r) for r in parsed]
        text = page("run.html.j2", title, "oomless-run", data, _version(), svg=safe_svg(svg_text(figure, "run")))
        write_atomically(Path(html), text.encode("utf-8"))
    if png is not None:
        write_atomically(Path(png), png_bytes(figure))


def _version() -> str:
    from .. import __version__

    return __version__
