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
    """Human display in binary units, labelled as such (GiB, MiB)."""
    if abs(num_bytes) >= GiB:
        return f"{num_bytes / GiB:.2f} GiB"
    if abs(num_bytes) >= MiB:
        return f"{num_bytes / MiB:.1f} MiB"
    return f"{num_bytes / KiB:.1f} KiB"
