"""Sizes as logs print them, turned into integer bytes.

Every tool prints binary units, whatever the label says:

- PyTorch's caching allocator formats with ``format_size`` in B/KiB/MiB/GiB (two decimals).
  Source: c10/cuda/CUDACachingAllocator.cpp (`format_size`).
- vLLM prints GiB (``GiB_bytes = 1 << 30``). Source: vllm/utils (`GiB_bytes`).
- Ray's memory monitor prints ``GB`` for bytes / 1024³. Source: ray src/ray/raylet
  (OOM kill message); evidence: 512 GiB nodes report "… / 503.52GB" (MemTotal is a little under
  512 GiB), which a decimal GB would print as ~540.
- The kernel prints ``kB`` for KiB (page counts shifted by PAGE_SHIFT - 10). Source: mm/oom_kill.c.

Assumes: values are rounded by the printer, so a parsed size is exact only to the last printed
digit (±0.005 GiB ≈ 5 MiB for two-decimal GiB).
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

UNIT_BYTES: dict[str, int] = {
    "b": 1,
    "byte": 1,
    "bytes": 1,
    "kib": 1024,
    "kb": 1024,
    "mib": 1024**2,
    "mb": 1024**2,
    "gib": 1024**3,
    "gb": 1024**3,
    "tib": 1024**4,
    "tb": 1024**4,
    "pib": 1024**5,
    "eib": 1024**6,
}
"""Unit label (lower case) → bytes. Decimal-looking labels (kB, MB, GB) map to binary units on
purpose: see the module docstring for which printer uses which label."""

MAX_SIZE_BYTES = 2**63 - 1
"""Largest size a log can truthfully print: allocators count bytes in int64/size_t (PyTorch's
`c10::alloc_cpu(size_t)`, the CUDA caching allocator's `size_t` sizes, Ray's int64 counters).
A larger number is garbage, read as unreadable (None) rather than a size."""

UNIT_PATTERN = r"(?:bytes|byte|[KMGTPE]i?B|kB|B)"
"""A unit label as it appears after a number in the messages parsed here."""
NUM = r"(?<![\d.])(\d+(?:\.\d+)?)"
"""A number that starts where a run of digits starts (the lookbehind keeps a search linear in a
long run of digits: without it every digit of the run is tried as a start)."""
SIZE = rf"{NUM}\s*({UNIT_PATTERN})"
"""A number and its unit: two groups."""


def to_bytes(number: str, unit: str) -> int | None:
    """``"7.75", "GiB"`` → 8321499136; None when the number or the unit is unreadable."""
    factor = UNIT_BYTES.get(unit.strip().lower())
    if factor is None:
        return None
    try:
        value = Decimal(number.replace(",", ""))
    except InvalidOperation:
        return None
    if not value.is_finite() or value < 0 or value * factor > MAX_SIZE_BYTES:
        return None
    return int((value * factor).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def to_int(number: str) -> int | None:
    """A count or byte size; None when unreadable or beyond `MAX_SIZE_BYTES`."""
    digits = number.replace(",", "")
    if len(digits) > len(str(MAX_SIZE_BYTES)):
        return None
    try:
        value = int(digits)
    except ValueError:
        return None
    return value if abs(value) <= MAX_SIZE_BYTES else None


def to_float(number: str) -> float | None:
    try:
        value = float(number)
    except ValueError:
        return None
    return value if value == value and abs(value) != float("inf") else None


def size_of(match: re.Match[str] | None, group: int = 1) -> int | None:
    """The size in groups ``group`` (number) and ``group + 1`` (unit) of a `SIZE` match."""
    if match is None or match.group(group) is None:
        return None
    return to_bytes(match.group(group), match.group(group + 1))
