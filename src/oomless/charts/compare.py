"""Two plans side by side: what changed between a run that breaks and its fix.

Pure: two plan documents (`planner/report.py`) and the two validated specs as plain dicts in,
one JSON-ready document out (`oomless compare --json`, embedded in the compare HTML). Deltas
are after − before, in integer bytes; a phase or device role present on one side only has
`null` on the other and no delta.
"""

from __future__ import annotations

import json
from typing import Any

from ..units import format_bytes
from ..mappings import flatten
from .model import size_label

SCHEMA_VERSION = 1

Document = dict[str, Any]


def spec_differences(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    """Every spec field (defaults filled in) whose value differs, in the spec's field order."""
    a, b = flatten(before), flatten(after)
    keys = list(dict.fromkeys([*a, *b]))
    return [{"field": k, "before": a.get(k), "after": b.get(k)} for k in keys if a.get(k) != b.get(k)]


def _delta(before: int | None, after: int | None) -> int | None:
    return None if before is None or after is None else after - before


def _peaks(doc: Document) -> dict[tuple[str, str | None, str], int]:
    out: dict[tuple[str, str | None, str], int] = {}
    for device in doc["gpu"]["devices"]:
        for phase in device["phases"]:
            out[("gpu", device["role"], phase["name"])] = phase["peak_bytes"]
    for phase in doc["host"]["phases"]:
        out[("host", None, phase["name"])] = phase["peak_bytes"]
    return out


def phase_peak_changes(before: Document, after: Document) -> list[dict[str, Any]]:
    """Peak of every (device, device role, phase) in either plan, before and after: GPU roles
    in the order the plans list them, phases in time order, the host last."""
    a, b = _peaks(before), _peaks(after)
    keys = list(dict.fromkeys([*a, *b]))
    roles = list(dict.fromkeys(role for _, role, _ in keys))
    phases = list(dict.fromkeys(phase for _, _, phase in keys))
    keys.sort(key=lambda k: (k[0] == "host", roles.index(k[1]), phases.index(k[2])))
    rows = []
    for key in keys:
        device, role, phase = key
        rows.append({
            "device": device, "device_role": role, "phase": phase,
            "before_bytes": a.get(key), "after_bytes": b.get(key), "delta_bytes": _delta(a.get(key), b.get(key)),
        })
    return rows


def _largest_per_component(doc: Document) -> dict[str, int]:
    out: dict[str, int] = {}
    for device in doc["gpu"]["devices"]:
        for phase in device["phases"]:
            for name, num_bytes in phase["components"].items():
                out[name] = max(out.get(name, 0), num_bytes)
    return out


def component_changes(before: Document, after: Document) -> list[dict[str, Any]]:
    """GPU components whose per-GPU size changed, largest change first. A component's size is
    its largest value in any phase on any device group (absent = 0 bytes)."""
    a, b = _largest_per_component(before), _largest_per_component(after)
    rows = [
        {"name": n, "before_bytes": a.get(n, 0), "after_bytes": b.get(n, 0), "delta_bytes": b.get(n, 0) - a.get(n, 0)}
        for n in dict.fromkeys([*a, *b])
    ]
    return sorted((r for r in rows if r["delta_bytes"]), key=lambda r: (-abs(r["delta_bytes"]), r["name"]))


def binding_summary(doc: Document) -> dict[str, Any]:
    b = doc["binding"]
    keys = ("phase", "device", "device_role", "component", "required_bytes", "available_bytes", "margin_bytes", "message")
    return {"fits": doc["fits"], "kind": b.get("kind", "phase_peak"), **{k: b[k] for k in keys}}


def compare_documents(
    before: Document, after: Document, before_spec: dict[str, Any], after_spec: dict[str, Any],
    before_label: str, after_label: str,
) -> Document:
    """The comparison document: both plans whole, and their differences named."""
    return {
        "schema_version": SCHEMA_VERSION,
        "before": {"spec": before_label, "plan": before},
        "after": {"spec": after_label, "plan": after},
        "differences": {
            "verdict": {"before": before["fits"], "after": after["fits"]},
            "binding": {"before": binding_summary(before), "after": binding_summary(after)},
            "gpu_peak": {
                "before_bytes": before["gpu"]["peak_bytes"], "after_bytes": after["gpu"]["peak_bytes"],
                "delta_bytes": after["gpu"]["peak_bytes"] - before["gpu"]["peak_bytes"],
            },
            "phase_peaks": phase_peak_changes(before, after),
            "components": component_changes(before, after),
            "spec_fields": spec_differences(before_spec, after_spec),
        },
    }


def signed_bytes(delta: int | None) -> str:
    if delta is None:
        return "—"
    if delta == 0:
        return "0"
    return ("+" if delta > 0 else "−") + format_bytes(abs(delta))


def verdict_word(fits: bool) -> str:
    return "FITS" if fits else "DOES NOT FIT"


def binding_line(summary: dict[str, Any]) -> str:
    where = f"{summary['device_role']} GPU" if summary["device"] == "gpu" else "host"
    margin = summary["margin_bytes"]
    amount = f"margin {format_bytes(margin)}" if margin >= 0 else f"short by {format_bytes(-margin)}"
    head = "tightest" if summary["fits"] else "breaks first at"
    if summary.get("kind", "phase_peak") in ("phase_peak", "host_peak"):
        # a phase's total against the capacity: no one component is "the" cause (planner/verdict.py)
        return f"{head} {summary['phase']} on the {where}: total {format_bytes(summary['required_bytes'])}, {amount}"
    return f"{head} {summary['phase']} on the {where} ({summary['component']}), {amount}"


def headline(comparison: Document) -> list[str]:
    """Two lines: each plan's verdict and its binding constraint."""
    d = comparison["differences"]
    return [
        f"{side}: {comparison[side]['spec']} — {verdict_word(d['verdict'][side])}; {binding_line(d['binding'][side])}"
        for side in ("before", "after")
    ]


def show_value(value: Any) -> str:
    """A spec value as the user would write it: absent "—", strings bare, the rest JSON."""
    if value is None:
        return "—"
    return value if isinstance(value, str) else json.dumps(value)


def summary_lines(comparison: Document, num_fields: int = 10, num_components: int = 6) -> tuple[list[str], list[str]]:
    """Short text for a chart: (spec fields that differ, largest component and peak changes)."""
    d = comparison["differences"]
    fields = [f"{r['field']}: {show_value(r['before'])} → {show_value(r['after'])}" for r in d["spec_fields"]]
    if len(fields) > num_fields:
        fields = fields[: num_fields - 1] + [f"… and {len(fields) - num_fields + 1} more"]
    peak = d["gpu_peak"]
    changes = [f"GPU peak: {format_bytes(peak['before_bytes'])} → {format_bytes(peak['after_bytes'])} "
               f"({signed_bytes(peak['delta_bytes'])})"]
    changes += [
        f"{r['name']}: {size_label(r['before_bytes'])} → {size_label(r['after_bytes'])} ({signed_bytes(r['delta_bytes'])})"
        for r in d["components"][:num_components]
    ]
    return fields or ["(none)"], changes
