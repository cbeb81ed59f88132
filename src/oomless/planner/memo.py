"""Memos for the planner's pure steps, keyed by the values of what each step reads.

`fit` plans hundreds of variants of one run, each changing one or two fields; a step that
reads none of the changed fields (the role models read `distribution`, `finetune`, ... but
not `rollout` or `batch`) gives the same answer, so it is computed once per distinct input.

A key holds each spec section by value (frozen pydantic models and enums hash and compare by
their fields) together with the types of its field values: the fit search sets fields without
validation, so `1` and `1.0`, or an enum and its string, may meet; they compare equal but need
not give the same bytes downstream. Results must be immutable (frozen dataclasses, tuples):
one object serves every plan that asks for it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from pydantic import BaseModel

T = TypeVar("T")

MAX_ENTRIES = 4096
"""Entries a memo keeps before it starts over (a fit makes at most a few thousand plans)."""


def value_key(value: Any) -> Hashable:
    """``value`` with the types of its fields (a pydantic section or a frozen dataclass) or
    its own type."""
    kind = type(value)
    fielded = _FIELDED.get(kind)
    if fielded is None:
        fielded = _FIELDED[kind] = issubclass(kind, BaseModel) or dataclasses.is_dataclass(kind)
    if fielded:
        return value, tuple(map(type, value.__dict__.values()))
    return value, kind


_FIELDED: dict[type, bool] = {}
"""Per type: whether its values are keyed with their fields' types (pydantic models, dataclasses)."""




class Memo:
    """A bounded table of one pure step's answers."""

    def __init__(self) -> None:
        self._table: dict[Hashable, Any] = {}
        _ALL.append(self)

    def get(self, key: Hashable, build: Callable[[], T]) -> T:
        """The answer for ``key``, built once. A key that cannot be hashed (a section holding a
        list, e.g. `finetune.lora_targets: [q_proj, v_proj]`) is built every time, uncached."""
        try:
            return self._table[key]
        except KeyError:
            pass
        except TypeError:
            return build()
        value = build()
        if len(self._table) >= MAX_ENTRIES:
            self._table.clear()
        self._table[key] = value
        return value

    def clear(self) -> None:
        self._table.clear()


_ALL: list[Memo] = []
"""Every memo made, so tests can plan with all of them empty (`clear_all`)."""


def clear_all() -> None:
    """Empty every planner memo: the next plan computes every step afresh."""
    for memo in _ALL:
        memo.clear()
