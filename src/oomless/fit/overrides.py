"""Spec variants as dotted-path overrides: apply them, diff them, show them.

An override maps a field path (`distribution.strategy`, `batch.micro_batch_size`) to a value;
`None` restores the field's default (the key is removed when a spec is written). Applying skips
pydantic validation, which is fine for the search (it only builds valid combinations) and is
redone in full on every configuration `fit` returns.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, TypeVar

from pydantic import BaseModel

from ..frozen_hash import HASH_SLOT
from ..spec.run import RunSpec

Overrides = dict[str, Any]
M = TypeVar("M", bound=BaseModel)


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
        top[section] = _updated(getattr(spec, section), values)
    return _updated(spec, top)


_PLAIN_COPY: dict[type, bool] = {}
"""Per model class: whether `_updated` may build its copies directly (see there)."""


def _updated(model: M, values: dict[str, Any]) -> M:
    """``model.model_copy(update=values)``, built directly: the same instance state (fields in
    ``__dict__``, the updated names added to the set fields, no extra and no private values),
    without `model_copy`'s generic steps (a copy of each of the four parts, then an update),
    for models that forbid extra keys and have no private attributes, as every spec section
    (`spec.base.Frozen`); any other model goes through `model_copy`. A hash kept in the
    instance (`frozen_hash`, should a section ever keep one) is not carried over. A fit builds
    ~5,000 such copies (s0-before). Source: pydantic 2.x `BaseModel.__copy__`
    and `model_copy` (main.py), which set exactly these four attributes."""
    kind = type(model)
    plain = _PLAIN_COPY.get(kind)
    if plain is None:
        plain = _PLAIN_COPY[kind] = model.model_config.get("extra") != "allow" and not kind.__private_attributes__
    if not plain or model.__pydantic_extra__ is not None:
        return model.model_copy(update=values)
    state = {**model.__dict__, **values}
    state.pop(HASH_SLOT, None)  # a kept hash (`frozen_hash`) belongs to the old values
    copied = kind.__new__(kind)
    _set(copied, "__dict__", state)
    _set(copied, "__pydantic_extra__", None)
    _set(copied, "__pydantic_fields_set__", model.__pydantic_fields_set__.union(values))
    _set(copied, "__pydantic_private__", None)
    return copied


_set = object.__setattr__


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
