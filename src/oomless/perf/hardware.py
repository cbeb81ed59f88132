"""Throughput figures of a GPU (`catalog/data/gpu_perf.json`) as the cost model uses them.

Bytes and FLOPs per second are plain floats here; the data file keeps the vendors' decimal
units (TFLOP/s, GB/s) and one source per number.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from ..catalog.gpus import GpuSpec
from . import constants as K

REFERENCE_GPU = "A100-80GB"
"""Used when a spec gives only `gpu_capacity_gib` (no catalog GPU): times are then relative."""


@dataclass(frozen=True)
class GpuPerf:
    """Peak rates of one GPU, one direction for links."""

    gpu_id: str
    bf16_flops_per_s: float
    memory_bytes_per_s: float
    gpu_link_bytes_per_s: float
    """GPU-to-GPU within a node, one direction (NVLink/Infinity Fabric/HCCS, else PCIe)."""
    host_link_bytes_per_s: float
    """GPU-to-host, one direction (PCIe)."""
    gpu_link_kind: str
    confidence: str


@functools.lru_cache(maxsize=1)
def _entries() -> dict[str, dict[str, Any]]:
    text = (resources.files("oomless.catalog") / "data" / "gpu_perf.json").read_text("utf-8")
    return dict(json.loads(text)["gpus"])


def gpu_perf_ids() -> list[str]:
    return list(_entries())


def _perf(gpu_id: str, e: dict[str, Any]) -> GpuPerf:
    return GpuPerf(
        gpu_id=gpu_id,
        bf16_flops_per_s=float(e["bf16_dense_tflops"]) * K.TERA,
        memory_bytes_per_s=float(e["memory_GBps"]) * K.GIGA,
        gpu_link_bytes_per_s=float(e["gpu_link"]["bidirectional_GBps"]) / 2 * K.GIGA,
        host_link_bytes_per_s=float(e["host_link"]["bidirectional_GBps"]) / 2 * K.GIGA,
        gpu_link_kind=str(e["gpu_link"]["kind"]),
        confidence=str(e["confidence"]),
    )


def gpu_perf(gpu: GpuSpec | None) -> tuple[GpuPerf, str | None]:
    """The GPU's figures and a note when they stand in for an unknown GPU."""
    entries = _entries()
    if gpu is not None and gpu.id in entries:
        return _perf(gpu.id, entries[gpu.id]), None
    what = "no catalog GPU" if gpu is None else f"no throughput figures for {gpu.id}"
    note = f"{what}: step times use {REFERENCE_GPU}'s figures and are only relative"
    return _perf(REFERENCE_GPU, entries[REFERENCE_GPU]), note
