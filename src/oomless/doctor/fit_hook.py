"""Fixes from `oomless fit`, when this installation has it.

`oomless.fit` is optional here: it is imported lazily, and anything it raises becomes a note, so
a diagnosis never depends on it. Entry point used: ``oomless.fit.search.fit(run, raw, base_dir,
FitOptions())``, whose result's ``best`` (None when nothing fits) carries ``changes``
({dotted field: (old, new)}) — or, failing that, a ``run.spec`` to compare with the input.
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


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for key, value in data.items():
            out.update(_flatten(value, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: data}


def _changes(best: Any, run: Any) -> tuple[tuple[str, Any, Any], ...]:
    changes = getattr(best, "changes", None)
    if isinstance(changes, dict):
        return tuple((k, old, new) for k, (old, new) in sorted(changes.items()))
    spec = getattr(getattr(best, "run", None), "spec", None)
    if spec is None:
        return ()
    old, new = _flatten(run.spec.model_dump(mode="json")), _flatten(spec.model_dump(mode="json"))
    return tuple((k, old.get(k), new[k]) for k in sorted(new) if old.get(k) != new[k])


def propose_fit(run: Any, spec_path: Path | None = None) -> FitProposal:
    """What `oomless fit` would change in ``run``'s spec, or why it cannot say. ``spec_path`` is
    the YAML the run came from (fit keeps its wording); without it the parsed spec is used."""
    try:
        if importlib.util.find_spec("oomless.fit") is None:
            return FitProposal(False, note="`oomless fit` is not part of this installation")
        search = importlib.import_module("oomless.fit.search")
        fit, options = getattr(search, "fit", None), getattr(search, "FitOptions", None)
        if not callable(fit) or options is None:
            return FitProposal(False, note="oomless.fit has no search.fit entry point yet")
        from ..spec.load import read_yaml

        raw = read_yaml(spec_path) if spec_path else run.spec.model_dump(mode="json", exclude_none=True)
        base = spec_path.resolve().parent if spec_path else Path.cwd()
        result = fit(run, raw, base, options())
        best = getattr(result, "best", None)
        if best is None:
            return FitProposal(True, note="oomless fit found no configuration that fits with its margin")
        changes = _changes(best, run)
    except Exception as err:  # fit is optional and evolving: its failure must not hide the diagnosis
        return FitProposal(False, note=f"oomless fit failed: {type(err).__name__}: {err}")
    return FitProposal(True, changes, "" if changes else "oomless fit keeps the spec as it is")
