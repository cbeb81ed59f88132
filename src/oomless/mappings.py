"""Small helpers on plain nested mappings (specs and framework configs as dicts)."""

from __future__ import annotations

from typing import Any


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings as dotted keys: {"batch": {"micro_batch_size": 8}} → {"batch.micro_batch_size": 8}.
    Lists and empty mappings are leaves."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten(value, dotted + "."))
        else:
            out[dotted] = value
    return out
