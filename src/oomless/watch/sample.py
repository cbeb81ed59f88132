"""Memory samples of a running job: its process tree and node (psutil), its GPUs (NVML).

`HostProbe` reads the watched process and all its descendants: resident memory summed over
the tree (RSS, or PSS with ``pss=True``, which splits shared pages between the processes that
map them and so does not count a shared page twice), and the node's used and available RAM.
`GpuProbe` reads every GPU NVML sees: device memory used, and the memory of the watched tree's
processes where the driver reports per-process figures (it does not inside some containers;
then only the device total is known). Without NVML (no NVIDIA driver, or `nvidia-ml-py`
missing) there is no GPU probe and the watch covers host memory only.

Source: psutil `Process.children(recursive=True)`, `memory_info().rss`, `memory_full_info().pss`,
`virtual_memory()`; NVML `nvmlDeviceGetMemoryInfo`, `nvmlDeviceGetComputeRunningProcesses`
(nvidia-ml-py). Ray's memory monitor compares the node's used memory (total - available) with
`memory_usage_threshold` × total (Ray docs, "Out-Of-Memory Prevention").
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Sample:
    time: float
    tree_bytes: int
    """Resident memory of the watched process tree (RSS or PSS)."""
    host_used_bytes: int
    host_available_bytes: int
    host_total_bytes: int
    gpu_used_bytes: tuple[int, ...] = ()
    """Per GPU: memory used on the device (every process)."""
    gpu_tree_bytes: tuple[int | None, ...] = ()
    """Per GPU: memory of the watched tree's processes; None where the driver does not say."""


TREE_RESCAN_S = 5.0
"""Seconds between listings of the watched tree's processes. Listing descendants reads the
stat file of every process on the node (psutil builds the parent map from /proc), the largest
cost of a sample; a process started since the last listing is counted from the next one."""


class HostProbe:
    def __init__(self, pid: int, pss: bool = False, rescan_s: float = TREE_RESCAN_S) -> None:
        import psutil

        self._psutil = psutil
        self.root = psutil.Process(pid)
        self.pss = pss
        self.rescan_s = rescan_s
        self._tree: dict[int, object] = {pid: self.root}
        self._listed_at: float | None = None

    def tree(self) -> list:
        """The root and its descendants (psutil processes), listed at most every `rescan_s`."""
        now = time.monotonic()
        if self._listed_at is None or now - self._listed_at >= self.rescan_s:
            self._listed_at = now
            try:
                children = self.root.children(recursive=True)
            except self._psutil.Error:
                children = []
            self._tree = {self.root.pid: self.root, **{c.pid: self._tree.get(c.pid, c) for c in children}}
        return list(self._tree.values())

    def tree_pids(self) -> list[int]:
        return [p.pid for p in self.tree()]

    def tree_bytes(self) -> int:
        total = 0
        for proc in self.tree():
            try:
                total += proc.memory_full_info().pss if self.pss else proc.memory_info().rss
            except self._psutil.Error:
                continue  # exited since it was listed
        return total

    def node(self) -> tuple[int, int, int]:
        vm = self._psutil.virtual_memory()
        return vm.total - vm.available, vm.available, vm.total


class GpuProbe:
    """NVML's view of every GPU; `open()` returns None when NVML is not there."""

    def __init__(self, nvml, handles: list) -> None:
        self._nvml = nvml
        self._handles = handles
        self.totals = tuple(int(nvml.nvmlDeviceGetMemoryInfo(h).total) for h in handles)
        """Capacity of each GPU in bytes, as NVML reports it."""

    @classmethod
    def open(cls) -> tuple[GpuProbe | None, str]:
        """(probe, note): the probe, or None and why the watch is host-only."""
        try:
            import pynvml
        except ImportError:
            return None, "nvidia-ml-py is not installed: watching host memory only"
        try:
            pynvml.nvmlInit()
            handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        except pynvml.NVMLError as err:
            return None, f"no NVIDIA driver here ({err}): watching host memory only"
        if not handles:
            return None, "NVML sees no GPU: watching host memory only"
        return cls(pynvml, handles), f"NVML: {len(handles)} GPU(s)"

    def read(self, pids: set[int]) -> tuple[tuple[int, ...], tuple[int | None, ...]]:
        used, mine = [], []
        for handle in self._handles:
            try:
                used.append(int(self._nvml.nvmlDeviceGetMemoryInfo(handle).used))
                procs = self._nvml.nvmlDeviceGetComputeRunningProcesses(handle)
                values = [p.usedGpuMemory for p in procs if p.pid in pids and p.usedGpuMemory is not None]
                mine.append(sum(values) if procs else None)
            except self._nvml.NVMLError:
                used.append(0)
                mine.append(None)
        return tuple(used), tuple(mine)


@dataclass
class Sampler:
    host: HostProbe
    gpu: GpuProbe | None = None
    clock: object = field(default=time.monotonic)

    def sample(self) -> Sample:
        used, available, total = self.host.node()
        gpu_used: tuple[int, ...] = ()
        gpu_mine: tuple[int | None, ...] = ()
        if self.gpu is not None:
            gpu_used, gpu_mine = self.gpu.read(set(self.host.tree_pids()))
        return Sample(self.clock(), self.host.tree_bytes(), used, available, total, gpu_used, gpu_mine)


def cgroup_memory_limit(root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """The memory limit of this process's cgroup in bytes, None when unlimited or unknown.

    Source: Linux cgroup v2 `memory.max` ("max" when unlimited), v1
    `memory/memory.limit_in_bytes` (a huge number when unlimited)."""
    for path in (root / "memory.max", root / "memory" / "memory.limit_in_bytes"):
        try:
            text = path.read_text(encoding="ascii").strip()
        except OSError:
            continue
        if text == "max" or not text.isdigit():
            return None
        value = int(text)
        return value if value < 2**60 else None
    return None
