"""A frozen dataclass's hash computed once and kept, for types hashed many times as cache keys
(``ModelArch`` by the memory model's per-architecture caches, ``RoleModel`` by the planner's
memos): hashing every field each time costs microseconds per lookup.

The hash is the tuple of the fields' values, as the dataclass's own would be; it is kept in the
instance's ``__dict__`` under `HASH_SLOT`, which is not a field (not compared, not copied by
``dataclasses.replace``) and is left out when the object is pickled (string hashes differ
between processes).
"""

from __future__ import annotations

HASH_SLOT = "_cached_hash"


def cached_hash(obj: object, fields: tuple[str, ...]) -> int:
    """The hash of ``obj``'s ``fields``, computed at the first call and kept."""
    cached = obj.__dict__.get(HASH_SLOT)
    if cached is None:
        cached = hash(tuple(getattr(obj, name) for name in fields))
        object.__setattr__(obj, HASH_SLOT, cached)
    return cached


def state_without_hash(obj: object) -> dict[str, object]:
    """``obj``'s state for pickling, without the kept hash."""
    return {k: v for k, v in obj.__dict__.items() if k != HASH_SLOT}
