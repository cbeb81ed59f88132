"""Parsers of host-memory errors: Ray's memory monitor, Ray workers that died silently, the
Linux OOM killer, and PyTorch's CPU allocator."""

from __future__ import annotations

import re
from collections.abc import Iterator

from .findings import Finding, Kind
from .parse_gpu import make
from .sizes import to_bytes, to_float, to_int
from .text import joined_window, strip_prefix

# --- Ray memory monitor --------------------------------------------------------------------------
# Source: ray src/ray/raylet/node_manager.cc (OOM kill message), ray 2.x. Forms:
#   task/actor/lease: "Memory on the node (IP: …, ID: …) where the task (task ID: …, name=…, pid=…,
#     memory used=…GB) was running was U GB / T GB (f), which exceeds the memory usage threshold
#     of t." ("actor ID", and "lease (lease ID" in Ray >= 2.4x).
#   untitled (Ray 2.1-2.2): "… where the task was running was U GB / T GB (f) …".
#   node (newest): "… Memory on the node (IP: …) was U GB / T GB (f), which exceeds …".
#   legacy_monitor (Ray 1.x, python memory_monitor): "RayOutOfMemoryError: More than 95% of the
#     memory on node … is used (U / T GB)."
#   raylet_summary: "N Workers (tasks / actors) killed due to memory pressure (OOM)".
#   docs_hint: only the pointer to ray-oom-prevention and the top memory users survive.

_RAY_NODE = re.compile(r"Memory on the node \(IP:")
_RAY_FORM = re.compile(r"where the (?:task|actor|lease)\s*\((task|actor|lease) ID|where the task (was running)")
_RAY_WORKER = re.compile(r"name=([^,]{0,200}),\s*pid=(\d+),\s*memory used=([\d.]+)\s*GB")
_RAY_USAGE = re.compile(r"\bwas\s*([\d.]+)\s*GB\s*/\s*([\d.]+)\s*GB\s*\(\s*([\d.]+)\s*\)")
_RAY_THRESHOLD = re.compile(r"memory usage threshold of\s*([\d.]+\d)")
_RAY_LEGACY = re.compile(r"RayOutOfMemoryError: More than (\d+)% of the memory on node (\S+) is used \(([\d.]+) / ([\d.]+) GB\)")
_RAY_SUMMARY = re.compile(r"(?<!\d)(\d+) Workers \(tasks / actors\) killed due to memory pressure \(OOM\)")
_RAY_DOCS = re.compile(r"address the out of memory issue: \S*ray-oom-prevention")
_TOP_USER = re.compile(r"^\s*(\d{1,9})\s+(\d+(?:\.\d+)?)\s*(GiB|GB)?\s+(\S.{0,300}?)\s*$")
TOP_USER_LINES = 40
"""Lines around a Ray OOM message searched for its "Top 10 memory users" table."""


def _lines_around(text: str, offset: int, num_lines: int) -> str:
    """The ``num_lines`` lines before and after the one holding ``offset``."""
    start = offset
    for _ in range(num_lines + 1):
        start = text.rfind("\n", 0, start)
        if start < 0:
            break
    end = offset
    for _ in range(num_lines):
        end = text.find("\n", end + 1)
        if end < 0:
            break
    return text[max(start, 0):end if end >= 0 else len(text)]


def _top_users(text: str, offset: int) -> tuple[dict, dict]:
    """The largest of the per-process memory lines ("PID  MEM(GB)  COMMAND") near ``offset``."""
    rows = []
    for line in _lines_around(text, offset, TOP_USER_LINES).split("\n"):
        m = _TOP_USER.match(strip_prefix(line))
        if m:
            rows.append((to_bytes(m.group(2), m.group(3) or "GB") or 0, m.group(4)))
    if not rows:
        return {}, {}
    top = max(rows, key=lambda r: r[0])
    return {"top_user_bytes": top[0], "num_top_users": len(rows)}, {"top_user_command": top[1]}


def ray_oom(text: str) -> Iterator[Finding]:
    if "emory" not in text and "ray-oom-prevention" not in text:
        return
    for m in _RAY_NODE.finditer(text):
        w = joined_window(text, m.start(), 1500, stop=m.group(0))
        form, worker, usage = _RAY_FORM.search(w), _RAY_WORKER.search(w), _RAY_USAGE.search(w)
        threshold = _RAY_THRESHOLD.search(w)
        variant = ("untitled" if form.group(2) else form.group(1)) if form else "node"
        numbers = {
            "worker_pid": to_int(worker.group(2)) if worker else None,
            "worker_memory_used_bytes": to_bytes(worker.group(3), "GB") if worker else None,
            "node_used_bytes": to_bytes(usage.group(1), "GB") if usage else None,
            "node_total_bytes": to_bytes(usage.group(2), "GB") if usage else None,
            "usage_fraction": to_float(usage.group(3)) if usage else None,
            "usage_threshold": to_float(threshold.group(1)) if threshold else None,
        }
        top, top_labels = _top_users(text, m.start())
        labels = {"task_name": worker.group(1).strip()} if worker else {}
        yield make(Kind.ray_oom, variant, text, m.start(), {**numbers, **top}, {**labels, **top_labels})
    for m in _RAY_LEGACY.finditer(text):
        numbers = {
            "usage_threshold": int(m.group(1)) / 100, "node_used_bytes": to_bytes(m.group(3), "GB"),
            "node_total_bytes": to_bytes(m.group(4), "GB"),
        }
        top, top_labels = _top_users(text, m.start())
        yield make(Kind.ray_oom, "legacy_monitor", text, m.start(), {**numbers, **top}, {"node": m.group(2), **top_labels})
    for m in _RAY_SUMMARY.finditer(text):
        top, top_labels = _top_users(text, m.start())
        yield make(Kind.ray_oom, "raylet_summary", text, m.start(), {"num_workers_killed": to_int(m.group(1)), **top}, top_labels)
    for m in _RAY_DOCS.finditer(text):
        top, top_labels = _top_users(text, m.start())
        yield make(Kind.ray_oom, "docs_hint", text, m.start(), top, top_labels)


_RAY_DIED = re.compile(r"killed by SIGKILL by OOM killer due to high memory usage")
_RAY_DIED_PID = re.compile(r"Worker PID: (\d+)")


def ray_worker_died(text: str) -> Iterator[Finding]:
    for m in _RAY_DIED.finditer(text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        pids = _RAY_DIED_PID.findall(text, line_start, m.start())
        numbers = {"worker_pid": to_int(pids[-1])} if pids else {}
        yield make(Kind.ray_worker_died, "sigkill_suspected", text, m.start(), numbers)


# --- Linux OOM killer ----------------------------------------------------------------------------
# Source: linux mm/oom_kill.c (`__oom_kill_process`): "Out of memory: Killed process %d (%s)
# total-vm:%lukB, anon-rss:%lukB, file-rss:%lukB, shmem-rss:%lukB, UID:%u …"; "Memory cgroup out of
# memory: Killed process …" when a cgroup limit (container, Slurm job) is hit; "Kill process" in
# kernels before 5.x.

_KERNEL = re.compile(r"ut of memory(?: \([\w ]+\))?: Kill(?:ed)? process (\d+) \(([^)\n]{0,64})\)")
"""From its literal part on ("[Oo]ut of memory…" with the first letter checked by hand), so the
scan of a long log stays a fast literal search."""
_KERNEL_FIELDS = tuple(
    (key, re.compile(rf"{label}:\s*(\d+)\s*kB"))
    for key, label in (("total_vm_bytes", "total-vm"), ("anon_rss_bytes", "anon-rss"), ("file_rss_bytes", "file-rss"), ("shmem_rss_bytes", "shmem-rss"))
)


def kernel_oom_kill(text: str) -> Iterator[Finding]:
    if "ut of memory: Kill" not in text and "ut of memory (" not in text:
        return
    for m in _KERNEL.finditer(text):
        if m.start() == 0 or text[m.start() - 1] not in "Oo":
            continue
        start = m.start() - 1
        w = joined_window(text, m.end(), 700, stop="Killed process")
        numbers: dict = {"pid": to_int(m.group(1))}
        for key, pattern in _KERNEL_FIELDS:
            found = pattern.search(w)
            numbers[key] = to_bytes(found.group(1), "kB") if found else None
        variant = "cgroup" if text.endswith("Memory cgroup ", 0, start) else "global"
        yield make(Kind.kernel_oom_kill, variant, text, start, numbers, {"process_name": m.group(2)})


# --- PyTorch CPU allocator -----------------------------------------------------------------------
# Source: c10/core/impl/alloc_cpu.cpp: "DefaultCPUAllocator: can't allocate memory: you tried to
# allocate N bytes. Error code 12 (Cannot allocate memory)"; Windows: "not enough memory".

_HOST_ALLOC = re.compile(r"DefaultCPUAllocator: (?:can't allocate memory|not enough memory): you tried to allocate (\d+) bytes")


def host_alloc_oom(text: str) -> Iterator[Finding]:
    for m in _HOST_ALLOC.finditer(text):
        yield make(Kind.host_alloc_oom, "default_cpu_allocator", text, m.start(), {"requested_bytes": to_int(m.group(1))})
