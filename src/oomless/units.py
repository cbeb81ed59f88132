"""Byte units. Bytes are integers everywhere inside; GiB/MiB appear only at display."""

from __future__ import annotations

import math

KiB = 1024
MiB = 1024**2
GiB = 1024**3
GB = 1000**3


def gib_to_bytes(gib: float) -> int:
    """GiB from a user's spec to integer bytes (rounded down, never overstating capacity)."""
    return math.floor(gib * GiB)


def format_bytes(num_bytes: int) -> str:
    """Human display in binary units, labelled as such (GiB, MiB). Exact integer arithmetic
    for sizes too large for a float (garbage in a log must not crash the display)."""
    if abs(num_bytes) >= 2**1000:
        digits = str(abs(num_bytes) // GiB)
        sign = "-" if num_bytes < 0 else ""
        return f"{sign}{digits[0]}.{digits[1:3]}e+{len(digits) - 1} GiB"
    if abs(num_bytes) >= GiB:
        return f"{num_bytes / GiB:.2f} GiB"
    if abs(num_bytes) >= MiB:
        return f"{num_bytes / MiB:.1f} MiB"
    return f"{num_bytes / KiB:.1f} KiB"
