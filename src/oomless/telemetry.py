"""The one telemetry schema: JSON lines, one record per optimizer step and phase, written by
`oomless train` (measured inside the trainer) and `oomless watch` (sampled from outside any
job), read by `oomless chart` and the reports.

Every record carries ``"schema": SCHEMA_VERSION`` and these keys:

- ``step`` (int; 0 for the load phase), ``phase`` (a planner phase name: load, rollout,
  logprob, train, optimizer, weight_sync, save, or ``step`` when a job's log does not tell);
- ``peak_bytes``: the phase's peak on the device named by ``device`` (``cpu``, ``cuda`` or
  ``host`` when only host memory is watched); ``planned_bytes`` / ``planned_total_bytes``:
  the plan's figure for that phase when a plan is known, else null;
- ``rss_bytes``: resident memory of the process (tree) at the phase's peak;
  ``host_available_bytes``: the node's available RAM at that moment;
- ``seconds``: time spent in the phase.

Writers may add keys (per-GPU figures, resident tensors by category); readers ignore keys they
do not know. Version 1 is the first versioned form; unversioned records (written before the
key existed) read as version 1.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .errors import InputError

SCHEMA_VERSION = 1
SCHEMA_KEY = "schema"
REQUIRED_KEYS = ("step", "phase", "peak_bytes")
OVER_PLAN_TOLERANCE = 0.10
"""A measured peak more than 10 % above its planned bytes is "over plan" (issue 5): the margin
the measurement is allowed (allocator rounding, kernels' scratch the plan folds into a term)."""


def is_over_plan(peak_bytes: int, planned_bytes: int | None) -> bool:
    """The one over-plan rule, shared by `oomless train`'s table, its warnings and the run chart."""
    return bool(planned_bytes) and peak_bytes > planned_bytes * (1 + OVER_PLAN_TOLERANCE)


def stamped(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with the schema version first."""
    return {SCHEMA_KEY: SCHEMA_VERSION, **{k: v for k, v in record.items() if k != SCHEMA_KEY}}


def append_records(path: Path, records: Iterable[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as sink:
        for record in records:
            sink.write(json.dumps(stamped(record)) + "\n")


def read_records(path: Path) -> list[dict[str, Any]]:
    """The records of a telemetry file ([] when it does not exist). A line that is not a
    record of a known version is an `InputError` naming the file and line."""
    if not path.exists():
        return []
    out = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise InputError(f"{path}:{number}", f"not a JSON record ({err.msg})") from None
        if not isinstance(record, dict) or any(k not in record for k in REQUIRED_KEYS):
            raise InputError(f"{path}:{number}", f"a telemetry record needs {', '.join(REQUIRED_KEYS)}")
        version = record.get(SCHEMA_KEY, 1)
        if version != SCHEMA_VERSION:
            raise InputError(f"{path}:{number}", f"telemetry schema {version!r}; this oomless reads {SCHEMA_VERSION}")
        out.append(record)
    return out
