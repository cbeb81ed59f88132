"""Per-step, per-phase peaks from a stream of samples and log events, and the limits each
series is held against.

`StepBook` receives samples (`add`) and step/phase changes (`enter`); when a step ends it
returns that step's records in the telemetry schema (`oomless.telemetry`) and appends the
step's peaks to one series per limit (host, each GPU) for the forecast.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from .sample import Sample

DEFAULT_PHASE = "step"
"""The phase of a job whose log names none."""
LOAD_PHASE = "load"
"""Everything before the first step line: loading models, starting engines."""


@dataclass(frozen=True)
class Limit:
    what: str
    """Series name shown to the user: "host (process tree)", "host (node)", "gpu0"."""
    limit_bytes: int
    source: str
    """Where the limit comes from, e.g. "--host-limit", "Ray memory_usage_threshold 0.95"."""


@dataclass
class _PhaseAcc:
    started: float
    tree: int = 0
    node_used: int = 0
    available: int | None = None
    gpu: list[int] = field(default_factory=list)
    seconds: float = 0.0

    def add(self, sample: Sample, gpu: tuple[int, ...]) -> None:
        self.tree = max(self.tree, sample.tree_bytes)
        self.node_used = max(self.node_used, sample.host_used_bytes)
        self.available = sample.host_available_bytes if self.available is None else min(self.available, sample.host_available_bytes)
        if len(self.gpu) < len(gpu):
            self.gpu.extend([0] * (len(gpu) - len(self.gpu)))
        for i, value in enumerate(gpu):
            self.gpu[i] = max(self.gpu[i], value)


def planned_for(phase: str, planned: dict[str, int]) -> int | None:
    """The plan's bytes for ``phase``; for a job whose log names no phase ("step"), the plan's
    largest phase after loading."""
    if phase in planned:
        return planned[phase]
    if phase == DEFAULT_PHASE:
        return max((v for k, v in planned.items() if k != LOAD_PHASE), default=None)
    return None


def gpu_figures(sample: Sample) -> tuple[int, ...]:
    """Per GPU: the watched tree's memory where the driver reports it, else the device's used."""
    return tuple(mine if mine is not None else used for used, mine in zip(sample.gpu_used_bytes, sample.gpu_tree_bytes))


@dataclass
class StepBook:
    node_series: bool
    """Hold the node's used RAM (True) or the process tree's (False) against the host limit."""
    planned: dict[str, int] = field(default_factory=dict)
    """Planned bytes per phase on a training GPU, when a plan is known."""
    planned_host: dict[str, int] = field(default_factory=dict)
    """Planned host bytes per phase of a node (held against the watched tree: the job on this node)."""
    step: int = 0
    phase: str = LOAD_PHASE
    host_peaks: list[tuple[int, int]] = field(default_factory=list)
    gpu_peaks: list[list[tuple[int, int]]] = field(default_factory=list)
    step_seconds: list[float] = field(default_factory=list)
    _phases: dict[str, _PhaseAcc] = field(default_factory=dict)
    _step_started: float | None = None
    _last_time: float | None = None

    def add(self, sample: Sample) -> None:
        if self._step_started is None:
            self._step_started = sample.time
        acc = self._phases.setdefault(self.phase, _PhaseAcc(sample.time))
        acc.add(sample, gpu_figures(sample))
        if self._last_time is not None:
            acc.seconds += sample.time - self._last_time
        self._last_time = sample.time

    def enter(self, step: int | None, phase: str | None, now: float) -> list[dict[str, Any]]:
        """Move to ``step`` (and/or ``phase``); the finished step's records, if one ended."""
        records: list[dict[str, Any]] = []
        if step is not None and step != self.step:
            records = self.close(now)
            self.step, self._step_started = step, now
            self.phase = phase or DEFAULT_PHASE
        elif phase is not None:
            self.phase = phase
        return records

    def close(self, now: float) -> list[dict[str, Any]]:
        """End the current step: its records, and its peaks appended to the series."""
        if not self._phases:
            return []
        records = [self._record(name, acc) for name, acc in self._phases.items()]
        accs = list(self._phases.values())
        if self.step > 0:  # the load phase grows by design; trends are over training steps
            self.host_peaks.append((self.step, max(a.node_used if self.node_series else a.tree for a in accs)))
            width = max(len(a.gpu) for a in accs)
            while len(self.gpu_peaks) < width:
                self.gpu_peaks.append([])
            for i in range(width):
                self.gpu_peaks[i].append((self.step, max(a.gpu[i] for a in accs if len(a.gpu) > i)))
            if self._step_started is not None:
                self.step_seconds.append(max(0.0, now - self._step_started))
        self._phases.clear()
        return records

    def seconds_per_step(self) -> float | None:
        return statistics.median(self.step_seconds[-20:]) if self.step_seconds else None

    def _record(self, name: str, acc: _PhaseAcc) -> dict[str, Any]:
        on_gpu = bool(acc.gpu)
        planned = planned_for(name, self.planned if on_gpu else self.planned_host)
        return {
            "step": self.step, "phase": name,
            "peak_bytes": max(acc.gpu) if on_gpu else acc.tree,
            "device": "cuda" if on_gpu else "host",
            "planned_bytes": planned, "planned_total_bytes": planned,
            "rss_bytes": acc.tree, "host_used_bytes": acc.node_used, "host_available_bytes": acc.available,
            "gpu_peak_bytes": list(acc.gpu), "seconds": round(acc.seconds, 3),
        }
