"""Spec variants as dotted-path overrides: apply them, diff them, show them.

An override maps a field path (`distribution.strategy`, `batch.micro_batch_size`) to a value;
`None` restores the field's default (the key is removed when a spec is written). Applying skips
pydantic validation, which is fine for the search (it only builds valid combinations) and is
redone in full on every configuration `fit` returns.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel

from ..spec.run import RunSpec

Overrides = dict[str, Any]


def apply(spec: RunSpec, overrides: Overrides) -> RunSpec:
    """A copy of ``spec`` with the overrides set (sections copied, never mutated)."""
    by_section: dict[str, dict[str, Any]] = {}
    top: dict[str, Any] = {}
    for path, value in overrides.items():
        section, _, leaf = path.partition(".")
        if leaf:
            by_section.setdefault(section, {})[leaf] = value
        else:
            top[section] = value
    for section, values in by_section.items():
        top[section] = getattr(spec, section).model_copy(update=values)
    return spec.model_copy(update=top)


def plain(value: Any) -> Any:
    """A JSON/YAML-ready value: enums by value, pydantic models and lists recursively."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, BaseModel):
        return {k: plain(v) for k, v in value.model_dump(exclude_defaults=True).items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def value_at(spec: RunSpec, path: str) -> Any:
    node: Any = spec
    for part in path.split("."):
        node = getattr(node, part)
    return node


def changed(spec: RunSpec, overrides: Overrides) -> dict[str, tuple[Any, Any]]:
    """The overrides that differ from ``spec``: path → (old, new), as plain values."""
    out = {}
    for path, new in overrides.items():
        old = plain(value_at(spec, path))
        if old != plain(new):
            out[path] = (old, plain(new))
    return out


def default_at(path: str) -> Any:
    """The spec default of a field, as a plain value."""
    model: Any = RunSpec
    *sections, leaf = path.split(".")
    for section in sections:
        model = model.model_fields[section].annotation
    return plain(model.model_fields[leaf].default)
