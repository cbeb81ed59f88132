"""A cache for pure functions of a frozen ``ModelArch``, keyed by the arch's identity.

`functools.lru_cache` hashes its arguments on every call, and a frozen dataclass hashes all
of its fields each time (a ModelArch: about 8 µs). `fit` asks the cost model for the same
architecture thousands of times, so this cache keys on ``id(arch)`` and keeps the arch in the
entry: an id cannot be reused while its entry holds the object, and a hit is checked with
``is``. Two equal archs that are distinct objects are computed once each, with equal results.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

MAX_ENTRIES_PER_FUNCTION = 4096
"""Entries a cached function keeps before it starts over (a process plans a handful of archs)."""


def per_arch(fn: Callable[..., T]) -> Callable[..., T]:
    """``fn(arch, *args)`` cached by (id(arch), *args); ``args`` must be hashable."""
    cache: dict[tuple[Any, ...], tuple[object, T]] = {}

    @functools.wraps(fn)
    def cached(arch: object, *args: Any) -> T:
        key = (id(arch), *args)
        hit = cache.get(key)
        if hit is not None and hit[0] is arch:
            return hit[1]
        value = fn(arch, *args)
        if len(cache) >= MAX_ENTRIES_PER_FUNCTION:
            cache.clear()
        cache[key] = (arch, value)
        return value

    cached.cache_clear = cache.clear  # type: ignore[attr-defined]
    return cached
