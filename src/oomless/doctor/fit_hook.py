"""Fixes from `oomless fit` after a crash: safer only, with the measured gap as a margin.

`oomless.fit` is optional here: it is imported lazily, and anything it raises becomes a note, so
a diagnosis never depends on it. Entry point: ``oomless.fit.search.fit(run, raw, base_dir,
FitOptions(margin_bytes=gap, keep_safety_of=run.spec))`` — every answer keeps the gap the crash
measured between the plan and the run free (`reconcile.Reconciliation.gap_bytes`), and none lowers
a memory-safety setting the crashed run had (`fit.safety`) unless its plan keeps the gap free on
top of the usual margin (then `Choice.lowers_safety` says so). The answer carries its predicted
GPU peak and the room it keeps.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class FitProposal:
    available: bool
    changes: tuple[tuple[str, Any, Any], ...] = field(default_factory=tuple)
    """(dotted knob, value in the input spec, value fit proposes)."""
    note: str = ""
    margin_bytes: int = 0
    """The measured gap fit was asked to keep free (0: none measured)."""
    peak_bytes: int | None = None
    """Predicted peak of the busiest GPU with the changes."""
    capacity_bytes: int | None = None
    free_bytes: int | None = None
    """Room the tightest constraint keeps with the changes beyond the margin."""
    lowers_safety: tuple[str, ...] = ()
    native: tuple[str, ...] = ()
    """The changes in the framework's own keys, when the run came `--from` one."""
    spec: Any = None
    """The proposed run spec (None without an answer)."""
    alternatives: tuple[Any, ...] = ()
    """fit's other answers (`Choice`s), for a framework that cannot say the best one."""


def _changes(best: Any) -> tuple[tuple[str, Any, Any], ...]:
    return tuple((k, old, new) for k, (old, new) in sorted(best.changes.items()))


def propose_fit(run: Any, spec_path: Path | None = None, gap_bytes: int = 0, keep_safety: bool = True) -> FitProposal:
    """What `oomless fit` would change in ``run``'s spec with ``gap_bytes`` kept free and the
    crashed run's safety settings kept, or why it cannot say. ``spec_path`` is the YAML the run
    came from (fit keeps its wording); without it the parsed spec is used."""
    try:
        if importlib.util.find_spec("oomless.fit") is None:
            return FitProposal(False, note="`oomless fit` is not part of this installation")
        search = importlib.import_module("oomless.fit.search")
        from ..spec.load import read_yaml

        raw = read_yaml(spec_path) if spec_path else run.spec.model_dump(mode="json", exclude_none=True)
        base = spec_path.resolve().parent if spec_path else Path.cwd()
        options = search.FitOptions(margin_bytes=max(0, gap_bytes), keep_safety_of=run.spec if keep_safety else None)
        result = search.fit(run, raw, base, options)
        best = result.best
        if best is None:
            return FitProposal(True, note="oomless fit found no configuration that fits with the margin"
                               + (" and the measured gap" if gap_bytes > 0 else ""), margin_bytes=gap_bytes)
        changes = _changes(best)
        plan = getattr(best, "plan", None)
        peak = capacity = room = None
        if plan is not None:
            from ..fit.probe import slack_vector

            peak = max(d.peak_bytes for d in plan.devices)
            capacity = max(d.capacity_bytes for d in plan.devices)
            room = min(slack_vector(plan, options.effective_margin))
    except Exception as err:  # fit is optional and evolving: its failure must not hide the diagnosis
        return FitProposal(False, note=f"oomless fit failed: {type(err).__name__}: {err}")
    return FitProposal(True, changes, "" if changes else "oomless fit keeps the spec as it is", gap_bytes, peak, capacity,
                       room, tuple(getattr(best, "lowers_safety", ())), spec=getattr(getattr(best, "run", None), "spec", None),
                       alternatives=tuple(getattr(result, "alternatives", ())))


def proposal_of(choice: Any, gap_bytes: int, run: Any) -> FitProposal:
    """An alternative answer of fit as a proposal (its numbers with the same margin)."""
    from ..fit.probe import slack_vector
    from ..fit.search import FitOptions

    options = FitOptions(margin_bytes=max(0, gap_bytes), keep_safety_of=run.spec)
    plan = choice.plan
    return FitProposal(True, _changes(choice), "", gap_bytes, max(d.peak_bytes for d in plan.devices),
                       max(d.capacity_bytes for d in plan.devices), min(slack_vector(plan, options.effective_margin)),
                       tuple(choice.lowers_safety), spec=choice.run.spec)
