"""Per-version key tables merged into one table: key -> the versions it exists in.

Input: {version: {key: {"type": ..., "default": ... | "default_expr": ...}}}. Output (JSON):
{"framework", "package", "sources", "versions": [read, oldest first], "keys": {key: {"first",
"last", "default" or "default_expr" (as in `last`), "type", "absent": [versions between first
and last without it] (when any), "changes": [[version, default], ...] (when the default changed)}}}.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from packaging.version import Version


def _default(info: dict[str, Any]) -> Any:
    return info.get("default", {"expr": info["default_expr"]} if "default_expr" in info else None)


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def merge(per_version: dict[str, dict[str, dict[str, Any]]]) -> tuple[list[str], dict[str, dict[str, Any]]]:
    versions = sorted(per_version, key=Version)
    keys: dict[str, dict[str, Any]] = {}
    for name in sorted({k for table in per_version.values() for k in table}):
        present = [v for v in versions if name in per_version[v]]
        first, last = present[0], present[-1]
        span = versions[versions.index(first):versions.index(last) + 1]
        info = per_version[last][name]
        entry: dict[str, Any] = {"first": first, "last": last}
        if "type" in info:
            entry["type"] = info["type"]
        for field in ("default", "default_expr"):
            if field in info:
                entry[field] = _jsonable(info[field])
        absent = [v for v in span if v not in present]
        if absent:
            entry["absent"] = absent
        changes, previous = [], object()
        for v in present:
            value = _jsonable(_default(per_version[v][name]))
            if value != previous:
                changes.append([v, value])
                previous = value
        if len(changes) > 1:
            entry["changes"] = changes
        keys[name] = entry
    return versions, keys


def write_table(path: Path, framework: str, package: str, sources: list[str],
                per_version: dict[str, dict[str, dict[str, Any]]]) -> None:
    versions, keys = merge(per_version)
    data = {"framework": framework, "package": package,
            "generated_by": "scripts/native_flag_tables.py (from the PyPI wheels; do not edit)",
            "sources": sources, "versions": versions, "keys": keys}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n", encoding="utf-8")
