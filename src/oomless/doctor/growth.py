"""What a run's telemetry says before the crash: the step where memory began to grow, how fast,
and the phase that peaked. Pure: records in (`oomless.telemetry`, as `oomless train` and
`oomless watch` write them), findings out.

Growth onset: each series (the devices' ``peak_bytes``; the host's ``rss_bytes`` when the
records measure a GPU or CPU tensors) is reduced to one peak per step (steps > 0: the load
phase grows by design), smoothed by a running median of `SMOOTHING_STEPS` (a checkpoint spike
does not move it), then fitted with a hinge — flat until step k, a line from k on — by least
squares for every k; the k of least squared error is where growth began. It is reported only
when the fitted slope after k is real growth by the watch's own test
(`oomless.watch.forecast.growing`: enough steps, a monotone trend, ≥ 1 MiB/step by Theil–Sen).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..watch.forecast import MIN_POINTS, fit, growing

SMOOTHING_STEPS = 3
MAX_STEPS_FITTED = 500
"""The last steps searched for an onset (the hinge search is quadratic in steps)."""


@dataclass(frozen=True)
class Growth:
    series: str
    start_step: int
    bytes_per_step: float
    first_bytes: int
    last_bytes: int
    last_step: int


@dataclass(frozen=True)
class PeakPhase:
    phase: str
    step: int
    peak_bytes: int
    device: str
    planned_bytes: int | None


@dataclass(frozen=True)
class TelemetryFindings:
    num_steps: int
    peak: PeakPhase
    growth: tuple[Growth, ...]


def per_step_peaks(records: Iterable[dict[str, Any]], key: str) -> list[tuple[int, int]]:
    """(step, largest ``key`` of the step) for steps > 0, ascending."""
    out: dict[int, int] = {}
    for r in records:
        value = r.get(key)
        if r["step"] > 0 and isinstance(value, int):
            out[r["step"]] = max(out.get(r["step"], 0), value)
    return sorted(out.items())


def running_median(values: Sequence[int], width: int = SMOOTHING_STEPS) -> list[float]:
    half = width // 2
    return [statistics.median(values[max(0, i - half): i + half + 1]) for i in range(len(values))]


def hinge_onset(points: Sequence[tuple[int, float]]) -> int:
    """The step k minimising the squared error of ``y = c + b·max(0, s - k)``."""
    best_step, best_error = points[0][0], None
    for k, _ in points[: len(points) - MIN_POINTS + 1] or points[:1]:
        xs = [max(0, s - k) for s, _ in points]
        ys = [y for _, y in points]
        mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
        sxx = sum((x - mean_x) ** 2 for x in xs)
        b = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
        c = mean_y - b * mean_x
        error = sum((y - c - b * x) ** 2 for x, y in zip(xs, ys))
        if best_error is None or error < best_error * (1 - 1e-9):  # ties: the earlier step
            best_step, best_error = k, error
    return best_step


def find_growth(series: str, peaks: Sequence[tuple[int, int]]) -> Growth | None:
    peaks = list(peaks[-MAX_STEPS_FITTED:])
    if len(peaks) < MIN_POINTS:
        return None
    smooth = list(zip((s for s, _ in peaks), running_median([p for _, p in peaks])))
    start = hinge_onset(smooth)
    after = [(s, p) for s, p in peaks if s >= start][-200:]
    trend = fit(after)
    if len(after) < MIN_POINTS or not growing(trend):
        return None
    first = next(p for s, p in peaks if s == start)
    return Growth(series, start, trend.slope_bytes_per_step, first, peaks[-1][1], peaks[-1][0])


def peak_phase(records: Sequence[dict[str, Any]]) -> PeakPhase:
    """The record of the largest peak (GPU records first when there are any)."""
    gpu = [r for r in records if r.get("device") == "cuda"]
    top = max(gpu or records, key=lambda r: (r["peak_bytes"], -r["step"]))
    planned = top.get("planned_bytes")
    return PeakPhase(top["phase"], top["step"], top["peak_bytes"], str(top.get("device") or "unknown"),
                     planned if isinstance(planned, int) else None)


def telemetry_findings(records: Sequence[dict[str, Any]]) -> TelemetryFindings | None:
    if not records:
        return None
    devices = {r.get("device") for r in records}
    growth = []
    for device in sorted(d for d in devices if d):
        label = "host (process tree)" if device == "host" else device
        g = find_growth(label, per_step_peaks([r for r in records if r.get("device") == device], "peak_bytes"))
        if g is not None:
            growth.append(g)
    if devices - {"host"}:
        g = find_growth("host (process RSS)", per_step_peaks(records, "rss_bytes"))
        if g is not None:
            growth.append(g)
    steps = {r["step"] for r in records if r["step"] > 0}
    return TelemetryFindings(len(steps), peak_phase(records), tuple(growth))


def describe(findings: TelemetryFindings) -> list[str]:
    """A few lines for the terminal."""
    from ..units import format_bytes

    p = findings.peak
    plan = f" (plan {format_bytes(p.planned_bytes)})" if p.planned_bytes else ""
    lines = [f"peak:   {p.phase} at step {p.step}, {format_bytes(p.peak_bytes)} on {p.device}{plan}; {findings.num_steps} step(s) measured"]
    for g in findings.growth:
        lines.append(f"growth: {g.series} grew from step {g.start_step} at +{format_bytes(int(g.bytes_per_step))}/step "
                     f"({format_bytes(g.first_bytes)} → {format_bytes(g.last_bytes)} at step {g.last_step})")
    if not findings.growth:
        lines.append("growth: none (no series grew step over step)")
    return lines


def findings_to_dict(findings: TelemetryFindings) -> dict[str, Any]:
    from dataclasses import asdict

    return {"num_steps": findings.num_steps, "peak": asdict(findings.peak), "growth": [asdict(g) for g in findings.growth]}
