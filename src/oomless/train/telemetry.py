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

A phase measured more than `OVER_PLAN_TOLERANCE` above its planned bytes is warned about.
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
from ..telemetry import append_records

OVER_PLAN_TOLERANCE = 0.10
"""A measured phase peak more than 10 % above its planned bytes is reported (issue 5)."""
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
    summaries: dict[str, PhaseSummary] = field(default_factory=dict)
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
        append_records(self.path, self._pending.values())
        for record in self._pending.values():
            self._summarise(record)
        self._pending.clear()

    def _summarise(self, record: dict[str, Any]) -> None:
        name, planned = record["phase"], record["planned_bytes"]
        summary = self.summaries.setdefault(name, PhaseSummary(name, planned))
        summary.peak_bytes = max(summary.peak_bytes, record["peak_bytes"])
        summary.num_steps += 1
        summary.seconds += record["seconds"]
        if planned and record["peak_bytes"] > planned * (1 + OVER_PLAN_TOLERANCE):
            summary.num_over_plan += 1
            if summary.num_over_plan == 1:
                over = 100 * (record["peak_bytes"] / planned - 1)
                self.warn(
                    f"step {record['step']}: phase {name} peaked at {record['peak_bytes']:,} B, "
                    f"{over:.0f} % above its planned {planned:,} B (warned once per phase)"
                )


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every JSON line of a run file (events, rewards, telemetry); [] when it does not exist."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def keep_records_up_to(path: Path, step: int) -> None:
    """On resume: drop records of steps after the checkpoint (they will be run again)."""
    kept = [r for r in read_jsonl(path) if r.get("step", 0) <= step]
    path.write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")
