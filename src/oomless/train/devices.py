"""What the training process runs on, and how its memory is read.

CPU: live tensor bytes from `LiveTensorBytes`. CUDA: `torch.cuda` peak reserved/allocated
after a reset, and NVML's used bytes when `pynvml` is installed (behind `nvml_used_bytes`:
never imported on a machine without it). Host: process RSS and available RAM from psutil.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Iterable
from typing import Any

import torch

from .live_bytes import LiveTensorBytes
from .settings import Machine


def detect_machine() -> Machine:
    has = lambda name: importlib.util.find_spec(name) is not None  # noqa: E731
    cuda = torch.cuda.is_available()
    return Machine(
        device="cuda" if cuda else "cpu",
        num_gpus=torch.cuda.device_count() if cuda else 0,
        has_vllm=has("vllm"),
        has_bitsandbytes=has("bitsandbytes"),
        has_liger=has("liger_kernel"),
    )


def rank() -> int:
    """This process's global rank under accelerate/torchrun (0 when alone)."""
    return int(os.environ.get("RANK", "0"))


def nvml_used_bytes(index: int) -> int | None:
    """Bytes NVML reports used on GPU ``index`` (CUDA context included), or None without pynvml."""
    if importlib.util.find_spec("pynvml") is None:
        return None
    import pynvml

    pynvml.nvmlInit()
    try:
        return int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(index)).used)
    finally:
        pynvml.nvmlShutdown()


def cpu_probe(tracker: LiveTensorBytes) -> tuple[Callable[[], dict[str, Any]], Callable[[], None]]:
    def measure() -> dict[str, Any]:
        return {"device": "cpu", "rank": rank(), "peak_bytes": tracker.peak["cpu"], "live_bytes": tracker.live["cpu"]}

    return measure, tracker.reset_peak


def cuda_probe(index: int) -> tuple[Callable[[], dict[str, Any]], Callable[[], None]]:
    def measure() -> dict[str, Any]:
        out = {
            "device": "cuda",
            "rank": rank(),
            "peak_bytes": torch.cuda.max_memory_reserved(index),
            "peak_allocated_bytes": torch.cuda.max_memory_allocated(index),
            "live_bytes": torch.cuda.memory_allocated(index),
        }
        used = nvml_used_bytes(index)
        if used is not None:
            out["gpu_used_bytes"] = used
        return out

    return measure, lambda: torch.cuda.reset_peak_memory_stats(index)


def host_probe() -> Callable[[], dict[str, int]]:
    import psutil

    process = psutil.Process()

    def host() -> dict[str, int]:
        return {"rss_bytes": process.memory_info().rss, "host_available_bytes": psutil.virtual_memory().available}

    return host


def tensor_bytes_on(tensors: Iterable[Any], device_type: str) -> int:
    """Bytes of distinct storages of ``tensors`` on ``device_type`` (tied weights once)."""
    seen, total = set(), 0
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.device.type == device_type:
            storage = t.untyped_storage()
            if storage.data_ptr() not in seen:
                seen.add(storage.data_ptr())
                total += storage.nbytes()
    return total


def optimizer_tensors(optimizer: Any) -> list[torch.Tensor]:
    if optimizer is None:
        return []
    return [v for state in optimizer.state.values() for v in state.values() if isinstance(v, torch.Tensor)]


def resident_probe(model: torch.nn.Module, optimizer: Callable[[], Any], device_type: str) -> Callable[[], dict[str, int]]:
    """PARAM / GRAD / OPT bytes of the model and its optimizer on the training device."""

    def resident() -> dict[str, int]:
        params = list(model.parameters())
        return {
            "PARAM": tensor_bytes_on(params, device_type),
            "GRAD": tensor_bytes_on((p.grad for p in params), device_type),
            "OPT": tensor_bytes_on(optimizer_tensors(optimizer()), device_type),
        }

    return resident
