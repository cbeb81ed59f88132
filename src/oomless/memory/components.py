"""One vocabulary of memory categories and a named, categorised byte count.

The categories are those of PyTorch's ``torch.distributed._tools.mem_tracker`` (PARAM,
BUFFER, GRAD, ACT, TEMP, OPT, OTHER), so the analytic model, the tracer and runtime
telemetry compare key by key. ``OTHER`` holds what no torch tensor owns: CUDA context,
NCCL buffers, allocator slack, a vLLM engine's reservation.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Category(str, Enum):
    PARAM = "PARAM"
    BUFFER = "BUFFER"
    GRAD = "GRAD"
    ACT = "ACT"
    TEMP = "TEMP"
    OPT = "OPT"
    OTHER = "OTHER"


@dataclass(frozen=True)
class Component:
    """``num_bytes`` of one named thing resident on one device during one phase."""

    name: str
    category: Category
    num_bytes: int

    def __post_init__(self) -> None:
        assert self.num_bytes >= 0, f"negative bytes for {self.name}: {self.num_bytes}"


def total_bytes(components: tuple[Component, ...] | list[Component]) -> int:
    return sum(c.num_bytes for c in components)
