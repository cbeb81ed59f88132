"""Components of a GPU phase: shared frozen parts (`_c`) and a phase's list finished once
(`_finish`: same-named parts merged, zeros dropped, the caching allocator's slack added on
activations and temporaries)."""

from __future__ import annotations

from ..memory import constants as C
from ..memory.components import Category, Component

_COMPONENTS: dict[tuple[str, Category, int], Component] = {}
MAX_SHARED_COMPONENTS = 1 << 16
"""Components kept for reuse before the table starts over (fit plans hundreds of variants of
one run, whose phases repeat the same parts)."""


def _c(name: str, category: Category, num_bytes: int) -> Component:
    """The component (frozen, so one object serves every phase and plan that has it)."""
    key = (name, category, int(num_bytes))
    c = _COMPONENTS.get(key)
    if c is None:
        if len(_COMPONENTS) >= MAX_SHARED_COMPONENTS:
            _COMPONENTS.clear()
        c = _COMPONENTS[key] = Component(*key)
    return c


_FINISHED: dict[tuple[int, ...], tuple[tuple[Component, ...], tuple[Component, ...]]] = {}


def _finish(components: list[Component]) -> tuple[Component, ...]:
    """Merge same-named parts, drop zeros, add the allocator slack on ACT + TEMP.

    Computed once per list of component objects (mostly the shared ones of `_c` and of the
    memos): keyed by their ids, with the list kept in the entry, so no id in a key can belong
    to another object while the entry lives."""
    key = tuple(map(id, components))
    hit = _FINISHED.get(key)
    if hit is not None:
        return hit[1]
    out = _merged_with_slack(components)
    if len(_FINISHED) >= MAX_SHARED_COMPONENTS:
        _FINISHED.clear()
    _FINISHED[key] = (tuple(components), out)
    return out


def _merged_with_slack(components: list[Component]) -> tuple[Component, ...]:
    merged: dict[str, Component] = {}
    for c in components:
        if c.num_bytes:
            old = merged.get(c.name)
            merged[c.name] = c if old is None else Component(c.name, c.category, old.num_bytes + c.num_bytes)
    kept = list(merged.values())
    churn = sum(c.num_bytes for c in kept if c.category in (Category.ACT, Category.TEMP))
    slack = _c("allocator_fragmentation", Category.OTHER, churn * C.ALLOCATOR_FRAGMENTATION_FRACTION)
    return tuple(kept + ([slack] if slack.num_bytes else []))
