"""When does memory that grows step by step cross its limit?

Per-step peaks are fitted over a sliding window with the Theil–Sen estimator: the slope is the
median of the slopes between every pair of points, the intercept the median of
``peak - slope × step``. It ignores up to ~29 % of outliers (a long batch, a checkpoint save)
where least squares would be pulled by a single spike.
Source: H. Theil (1950), P. K. Sen (1968), "Estimates of the regression coefficient based on
Kendall's tau", JASA 63(324).

A trend is reported only when it is real growth, not noise:
- at least `MIN_POINTS` steps in the window;
- the pairwise slopes agree: at least `MIN_RISING_PAIRS` of them are positive (Kendall's
  tau ≥ 0.4, a monotone trend);
- the slope is at least `MIN_GROWTH_BYTES_PER_STEP`.
The crossing step is the first step at which the fitted line reaches the limit; it is
reported when it comes before the run's last step (known from the spec's `schedule.max_steps`
or the progress bar's total), else within `DEFAULT_HORIZON_STEPS` of the current step.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

WINDOW_STEPS = 20
"""Steps in the sliding window: long enough to average several batches, short enough to
follow a change in trend within a few minutes of a typical run."""
MIN_POINTS = 5
MIN_RISING_PAIRS = 0.7
"""Share of point pairs whose slope is positive (0.7 ⇔ Kendall's tau ≥ 0.4)."""
MIN_GROWTH_BYTES_PER_STEP = 1024**2
"""1 MiB per step: below the resolution of RSS and NVML readings across a step."""
DEFAULT_HORIZON_STEPS = 1000
"""How far ahead to warn when the run's length is unknown (about one epoch of a typical
GRPO run: 1,000 steps of 8 prompts is 8,000 prompts)."""


@dataclass(frozen=True)
class Trend:
    slope_bytes_per_step: float
    intercept_bytes: float
    rising_share: float

    def at(self, step: float) -> float:
        return self.intercept_bytes + self.slope_bytes_per_step * step


@dataclass(frozen=True)
class Crossing:
    what: str
    """The series, e.g. "host" or "gpu0"."""
    limit_bytes: int
    step: int
    """First step whose fitted peak reaches the limit."""
    trend: Trend
    seconds_left: float | None
    """Expected time until then, from the median step time; None when unknown."""
    current_step: int


def fit(points: Sequence[tuple[int, int]]) -> Trend | None:
    """Theil–Sen fit of (step, peak) points; None with fewer than two distinct steps."""
    slopes = [
        (y2 - y1) / (x2 - x1)
        for i, (x1, y1) in enumerate(points)
        for x2, y2 in points[i + 1:]
        if x2 != x1
    ]
    if not slopes:
        return None
    slope = statistics.median(slopes)
    intercept = statistics.median(y - slope * x for x, y in points)
    rising = sum(1 for s in slopes if s > 0) / len(slopes)
    return Trend(slope, intercept, rising)


def growing(trend: Trend | None) -> bool:
    return (
        trend is not None
        and trend.rising_share >= MIN_RISING_PAIRS
        and trend.slope_bytes_per_step >= MIN_GROWTH_BYTES_PER_STEP
    )


def forecast(what: str, peaks: Sequence[tuple[int, int]], limit_bytes: int, last_step: int | None,
             seconds_per_step: float | None) -> Crossing | None:
    """The step at which the series ``peaks`` (per-step peaks, oldest first) crosses
    ``limit_bytes``, when it grows and does so before ``last_step`` (else within the default
    horizon); None otherwise."""
    window = list(peaks[-WINDOW_STEPS:])
    if len(window) < MIN_POINTS:
        return None
    trend = fit(window)
    if trend is None or not growing(trend):
        return None
    current = window[-1][0]
    step = math.ceil((limit_bytes - trend.intercept_bytes) / trend.slope_bytes_per_step)
    step = max(step, current + 1)
    end = last_step if last_step is not None else current + DEFAULT_HORIZON_STEPS
    if step > end:
        return None
    seconds = (step - current) * seconds_per_step if seconds_per_step else None
    return Crossing(what, limit_bytes, step, trend, seconds, current)


def describe(crossing: Crossing) -> str:
    """"host: +64 MiB/step, crosses the limit of 16.00 GiB at step ~24 (in ~3 min)"."""
    from ..units import format_bytes

    rate = format_bytes(int(crossing.trend.slope_bytes_per_step))
    when = f" (in ~{_duration(crossing.seconds_left)})" if crossing.seconds_left is not None else ""
    return (f"{crossing.what}: +{rate}/step, crosses the limit of {format_bytes(crossing.limit_bytes)} "
            f"at step ~{crossing.step}{when}")


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"
