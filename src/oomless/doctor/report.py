"""A diagnosis as a stable JSON-ready document (`oomless doctor --json`). Sizes are integer bytes."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from .. import __version__
from .diagnose import Diagnosis
from .findings import Finding
from .fit_hook import FitProposal
from .fixes import Fix
from .reconcile import Reconciliation

SCHEMA_VERSION = 1


def _finding(f: Finding) -> dict[str, Any]:
    return {"kind": f.kind.value, "variant": f.variant, "device": f.device, "line": f.line, "message": f.message,
            "numbers": dict(f.numbers), "labels": dict(f.labels)}


def _fix(fix: Fix) -> dict[str, Any]:
    return {"knob": fix.knob, "change": fix.change, "reason": fix.reason, "keeps_maths": fix.keeps_maths}


def diagnosis_to_dict(
    diagnosis: Diagnosis,
    fixes: tuple[Fix, ...] | None = None,
    reconciliation: Reconciliation | None = None,
    fit: FitProposal | None = None,
    warnings: tuple[str, ...] = (),
    telemetry: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``fixes`` replaces the diagnosis's generic fixes (e.g. realised against a spec);
    ``telemetry`` (`growth.findings_to_dict`) adds the key "telemetry" when a run's telemetry was read."""
    primary = diagnosis.primary
    main = None
    if primary is not None:
        main = {
            **_finding(primary),
            "phase": diagnosis.phase.phase, "phase_detail": diagnosis.phase.detail,
            "phase_evidence": diagnosis.phase.evidence, "cause": diagnosis.cause,
            "fixes": [_fix(f) for f in (diagnosis.fixes if fixes is None else fixes)],
        }
    return {
        "schema_version": SCHEMA_VERSION,
        "oomless_version": __version__,
        "recognised": diagnosis.recognised,
        "diagnosis": main,
        "frameworks": list(diagnosis.frameworks),
        "findings": [_finding(f) for f in diagnosis.findings],
        "reconciliation": None if reconciliation is None else {
            **asdict(reconciliation), "top_components": [list(c) for c in reconciliation.top_components],
            "notes": list(reconciliation.notes),
        },
        "fit": None if fit is None else {
            "available": fit.available, "note": fit.note,
            "changes": [{"knob": k, "from": old, "to": new} for k, old, new in fit.changes],
        },
        "warnings": list(warnings),
        **({"telemetry": telemetry} if telemetry is not None else {}),
    }
