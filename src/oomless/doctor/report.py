"""A diagnosis as a stable JSON-ready document (`oomless doctor --json`). Sizes are integer bytes."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from .. import __version__
from .diagnose import Diagnosis
from .findings import Finding
from ..units import format_bytes
from .fit_hook import FitProposal
from .fix_check import CheckedFix
from .fixes import Fix
from .reconcile import Reconciliation

SCHEMA_VERSION = 1


def _finding(f: Finding) -> dict[str, Any]:
    return {"kind": f.kind.value, "variant": f.variant, "device": f.device, "line": f.line, "message": f.message,
            "numbers": dict(f.numbers), "labels": dict(f.labels)}


def _fix(fix: Fix) -> dict[str, Any]:
    return {"knob": fix.knob, "change": fix.change, "reason": fix.reason, "keeps_maths": fix.keeps_maths}


def _margin_words(gap_bytes: int) -> str:
    return (f"the measured gap of {format_bytes(gap_bytes)} kept free (or 5 % of the GPU, if larger)" if gap_bytes > 0
            else "5 % of each GPU kept free")


def _room(free_bytes: int) -> str:
    return f"{format_bytes(free_bytes)} to spare" if free_bytes >= 0 else f"short by {format_bytes(-free_bytes)}"


def render_checked(fixes: tuple[Fix, ...], checked: tuple[CheckedFix, ...], gap_bytes: int) -> list[str]:
    """Fix lines: environment fixes as they are, then the planned ones that fit with the margin,
    then those that are not enough alone (never offered as fixes)."""
    lines = [f"  fixes:  each planned with {_margin_words(gap_bytes)}"]
    for fix in fixes:
        if fix.knob.startswith("env:"):
            lines.append(f"    {fix.knob}: {fix.change} — {fix.reason} (not planned: an allocator setting)")
    weak = []
    for c in checked:
        note = "" if c.fix.keeps_maths else "  (changes the training maths)"
        numbers = f"predicted GPU peak {format_bytes(c.peak_bytes)} of {format_bytes(c.capacity_bytes)}; {_room(c.free_bytes)} on the tightest constraint"
        if c.lowers:
            numbers += "; lowers " + ", ".join(c.lowers) + " with the gap covered on top of the margin"
        if not c.fits:
            weak.append(f"    {c.fix.knob}: {c.fix.change} ({numbers})")
            continue
        lines.append(f"    {c.fix.knob}: {c.fix.change} — {c.fix.reason}{note}")
        lines.append(f"      {numbers}")
        lines += [f"      {n}" for n in c.native]
    if weak:
        lines.append("  not enough alone (or lowers a safety setting without covering the gap):")
        lines += weak
    return lines


def render_fit_proposal(fit: FitProposal) -> list[str]:
    lines = []
    if fit.changes:
        lines.append("  fit:    " + "; ".join(f"{k}: {old} → {new}" for k, old, new in fit.changes))
        lines += [f"          {n}" for n in fit.native]
        if fit.peak_bytes is not None and fit.free_bytes is not None:
            lines.append(f"          predicted GPU peak {format_bytes(fit.peak_bytes)} of {format_bytes(fit.capacity_bytes or 0)}; "
                         f"{_room(fit.free_bytes)} on the tightest constraint with {_margin_words(fit.margin_bytes)}")
        lines += [f"          lowers {item}" for item in fit.lowers_safety]
    if fit.note:
        lines.append(f"  fit:    {fit.note}")
    return lines


def _checked(c: CheckedFix) -> dict[str, Any]:
    return {**_fix(c.fix), "overrides": {k: getattr(v, "value", v) for k, v in c.overrides.items()},
            "predicted_peak_bytes": c.peak_bytes, "capacity_bytes": c.capacity_bytes, "free_bytes": c.free_bytes,
            "fits_with_margin": c.fits, "lowers_safety": list(c.lowers), "native": list(c.native)}


def diagnosis_to_dict(
    diagnosis: Diagnosis,
    fixes: tuple[Fix, ...] | None = None,
    reconciliation: Reconciliation | None = None,
    fit: FitProposal | None = None,
    warnings: tuple[str, ...] = (),
    telemetry: dict[str, Any] | None = None,
    checked: tuple[CheckedFix, ...] | None = None,
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
            "margin_bytes": fit.margin_bytes, "predicted_peak_bytes": fit.peak_bytes, "free_bytes": fit.free_bytes,
            "lowers_safety": list(fit.lowers_safety), "native": list(fit.native),
        },
        "checked_fixes": None if checked is None else [_checked(c) for c in checked],
        "gap_bytes": None if reconciliation is None else reconciliation.gap_bytes,
        "warnings": list(warnings),
        **({"telemetry": telemetry} if telemetry is not None else {}),
    }
