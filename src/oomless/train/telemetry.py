"""Per-phase memory telemetry of a training run, checked against the plan.

One JSON object per line, per optimizer step and phase, in the one telemetry schema
(`oomless.telemetry`, versioned; the shape `oomless.charts.run` reads):

    {"step": 3, "phase": "train", "peak_bytes": 5349376, "planned_bytes": 4983000,
     "planned_total_bytes": 542000000, "rss_bytes": 812000000, "device": "cpu", ...}

- `peak_bytes`: on CPU the peak of live tensor bytes (`LiveTensorBytes`) during the phase; on a
  GPU `torch.cuda.max_memory_reserved` after a reset at the phase's start (allocated and NVML's
  used bytes are recorded beside it).
- `planned_bytes`: the plan's peak of that phase on a training GPU, less the components the
  measurement cannot see: on CPU every OTHER component (CUDA context, NCCL, allocator slack,
  vLLM reservations); on a GPU the OTHER components except allocator fragmentation, which
  reserved memory includes. `planned_total_bytes` is the plan's whole phase peak.
- `rss_bytes`, `host_available_bytes`: process RSS and host RAM (psutil) at the phase's end.
- `resident_bytes`: {PARAM, GRAD, OPT} bytes of the model and optimizer on the training device
  at the phase's end (the category vocabulary of `oomless.memory.components`).

A phase measured over its plan (`oomless.telemetry.is_over_plan`, the rule the table and the
run chart share) is warned about in GiB: the first time, then at most once per
`WARN_INTERVAL_SECONDS` per phase and only when its peak is a new high.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..memory.components import Category
from ..planner.plan import Plan
from ..telemetry import OVER_PLAN_TOLERANCE, is_over_plan
from ..units import GiB, format_bytes
from .files import append_jsonl, write_text

WARN_INTERVAL_SECONDS = 60.0
"""Least time between two over-plan warnings of one phase: a run over plan at every step warns
about once a minute, not once a step."""
VISIBLE_OTHER_ON_GPU = frozenset({"allocator_fragmentation"})
"""OTHER components that `max_memory_reserved` includes: the allocator's cached free blocks."""


@dataclass(frozen=True)
class PlannedPhase:
    name: str
    planned_bytes: int
    planned_total_bytes: int


def planned_phases(plan: Plan, device: str) -> dict[str, PlannedPhase]:
    """The train GPU's phases as this device can measure them (see the module doc)."""
    group = next((g for g in plan.devices if g.role == "train"), plan.devices[0])
    out = {}
    for phase in group.phases:
        hidden = sum(
            c.num_bytes for c in phase.components
            if c.category == Category.OTHER and (device != "cuda" or c.name not in VISIBLE_OTHER_ON_GPU)
        )
        out[phase.name] = PlannedPhase(phase.name, phase.peak_bytes - hidden, phase.peak_bytes)
    return out


@dataclass
class PhaseSummary:
    name: str
    planned_bytes: int | None
    peak_bytes: int = 0
    num_steps: int = 0
    num_over_plan: int = 0
    seconds: float = 0.0

    @property
    def ratio(self) -> float | None:
        return self.peak_bytes / self.planned_bytes if self.planned_bytes else None


@dataclass
class Telemetry:
    """Measures phases, appends their records to ``path``, and warns when one exceeds the plan."""

    path: Path
    planned: dict[str, PlannedPhase]
    measure: Callable[[], dict[str, Any]]
    """Peak and live bytes of the training device since the last `reset`."""
    reset: Callable[[], None]
    resident: Callable[[], dict[str, int]] = dict
    host: Callable[[], dict[str, int]] = dict
    warn: Callable[[str], None] = print
    clock: Callable[[], float] = time.monotonic
    summaries: dict[str, PhaseSummary] = field(default_factory=dict)
    latest: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The last written record of each phase (what a `report_to` logger is sent)."""
    _warned: dict[str, tuple[float, int]] = field(default_factory=dict)
    """Per phase: when the last over-plan warning was given, and the peak it named."""
    _pending: dict[tuple[int, str], dict[str, Any]] = field(default_factory=dict)
    _active: str | None = None

    @contextmanager
    def phase(self, name: str, step: int) -> Iterator[dict[str, Any]]:
        """Measure ``name`` at optimizer step ``step``; the yielded dict adds keys to its
        record. A phase entered inside another is part of the outer one. Entering the same
        phase twice in a step merges both into one record (peak: the larger)."""
        if self._active is not None:
            yield {}
            return
        self._active = name
        self.reset()
        extras: dict[str, Any] = {}
        start = time.perf_counter()
        try:
            yield extras
        finally:
            self._active = None
            self._add(step, name, time.perf_counter() - start, extras)

    def record_now(self, name: str, step: int, **extras: Any) -> None:
        """A record of what is resident now (the `load` phase, before the first step)."""
        self.reset()
        self._add(step, name, 0.0, extras)

    def annotate(self, step: int, name: str, extras: dict[str, Any]) -> None:
        """Add keys to the pending record of ``name`` at ``step`` (e.g. what a reload moved)."""
        record = self._pending.get((step, name))
        if record is not None:
            record.update(extras)

    def _add(self, step: int, name: str, seconds: float, extras: dict[str, Any]) -> None:
        planned = self.planned.get(name)
        record: dict[str, Any] = {
            "step": step, "phase": name, **self.measure(),
            "planned_bytes": planned.planned_bytes if planned else None,
            "planned_total_bytes": planned.planned_total_bytes if planned else None,
            **self.host(), "resident_bytes": self.resident(), "seconds": round(seconds, 6), **extras,
        }
        old = self._pending.get((step, name))
        if old is not None:
            record["seconds"] = round(old["seconds"] + seconds, 6)
            for key in ("peak_bytes", "peak_allocated_bytes", "gpu_used_bytes"):
                if key in old and key in record:
                    record[key] = max(old[key], record[key])
            record = {**old, **record}
        self._pending[(step, name)] = record

    def flush(self) -> None:
        """Write the pending records (a finished step) and check each against the plan."""
        if not self._pending:
            return
        append_jsonl(self.path, self._pending.values(), schema=True)
        for record in self._pending.values():
            self._summarise(record)
        self._pending.clear()

    def _summarise(self, record: dict[str, Any]) -> None:
        name, planned = record["phase"], record["planned_bytes"]
        self.latest[name] = record
        summary = self.summaries.setdefault(name, PhaseSummary(name, planned))
        summary.peak_bytes = max(summary.peak_bytes, record["peak_bytes"])
        summary.num_steps += 1
        summary.seconds += record["seconds"]
        if is_over_plan(record["peak_bytes"], planned):
            summary.num_over_plan += 1
            self._warn_over_plan(record, summary)

    def _warn_over_plan(self, record: dict[str, Any], summary: PhaseSummary) -> None:
        name, peak, planned = record["phase"], record["peak_bytes"], record["planned_bytes"]
        now = self.clock()
        last = self._warned.get(name)
        if last is not None and (now - last[0] < WARN_INTERVAL_SECONDS or peak <= last[1]):
            return
        self._warned[name] = (now, peak)
        self.warn(
            f"step {record['step']}: phase {name} peaked at {format_bytes(peak)}, {100 * (peak / planned - 1):.0f} % "
            f"over its planned {format_bytes(planned)} ({summary.num_over_plan}/{summary.num_steps} steps over plan "
            f"so far; over plan = more than {100 * OVER_PLAN_TOLERANCE:.0f} % above)"
        )


def memory_metrics(latest: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Scalars for a training logger: per phase, the last step's measured peak and planned
    bytes in GiB and their ratio (`memory/<phase>_peak_gib`, `_planned_gib`,
    `_measured_over_planned`)."""
    out: dict[str, float] = {}
    for name, record in latest.items():
        peak, planned = record["peak_bytes"], record.get("planned_bytes")
        out[f"memory/{name}_peak_gib"] = peak / GiB
        if planned:
            out[f"memory/{name}_planned_gib"] = planned / GiB
            out[f"memory/{name}_measured_over_planned"] = peak / planned
    return out


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every JSON line of a run file (events, rewards, telemetry); [] when it does not exist."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def keep_records_up_to(path: Path, step: int) -> None:
    """On resume: drop records of steps after the checkpoint (they will be run again)."""
    if not path.exists():
        return
    kept = [r for r in read_jsonl(path) if r.get("step", 0) <= step]
    write_text(path, "".join(json.dumps(r) + "\n" for r in kept))
