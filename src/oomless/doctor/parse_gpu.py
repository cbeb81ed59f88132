"""Parsers of GPU memory errors: PyTorch's allocator (CUDA, HIP, XPU, every format since 1.x),
alone or inside a Ray task, DeepSpeed's inference workspace, NCCL; vLLM's in `parse_vllm`.

Each parser scans the cleaned log for an anchor (a fixed phrase of the message), then reads the
numbers from a window after it with small regexes, so truncated messages still give what they
show and no regex can backtrack across the whole log.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .findings import Finding, Kind, make
from .parse_vllm import PARSERS as VLLM_PARSERS
from .sizes import NUM, SIZE, size_of as _size, to_bytes, to_int
from .text import joined_window, window_end

__all__ = ["NUM", "SIZE", "PARSERS", "make"]

# --- PyTorch caching allocator -------------------------------------------------------------------
# Source: c10/cuda/CUDACachingAllocator.cpp (`DeviceCachingAllocator::malloc`, its OOM path and
# `reportProcessMemoryInfo`), torch 1.x-2.x; HIP builds print "HIP" for "CUDA" (hipify);
# c10/xpu/XPUCachingAllocator.cpp prints the current form with "XPU". Formats:
#   current (>= 2.3): "Tried to allocate X. GPU i has a total capacity of T of which F is free.
#     [Process P has M memory in use.]* [Including non-PyTorch memory, this process has M memory
#     in use.] [A allowed;] Of the allocated memory X is allocated by PyTorch, [with X allocated in
#     private pools (e.g., CUDA Graphs),] and R is reserved by PyTorch but unallocated."
#   capacty (2.1-2.2): the same with the typo "total capacty".
#   parenthesised (1.5-2.0): "(GPU i; T total capacity; A already allocated; F free; [X allowed;]
#     R reserved in total by PyTorch)".
#   legacy_cached (<= 1.4): "(GPU i; T total capacity; A already allocated; F free; C cached)".
#   truncated: the anchor with nothing after it.
# The exception is `torch.OutOfMemoryError` (>= 2.5), `torch.cuda.OutOfMemoryError` (1.13-2.4) or
# `RuntimeError` (older); users paste it shortened ("CUDA out of memory ... F is free ..."), so a
# message is found from its anchor or from any of its field phrases, and each field is read on
# its own.

_DEVICE_APIS = ("CUDA", "HIP", "XPU")
_OOM = "out of memory"
_FIELD_ANCHORS = ("Tried to allocate", "is allocated by PyTorch", "is reserved by PyTorch but unallocated",
                  "reserved in total by PyTorch", "has a total capac")
"""Phrases only the allocator's message holds: a pasted fragment without the "CUDA out of memory"
head is still that message."""
_EVIDENCE = re.compile(r"Tried to allocate|total capac|is free|by PyTorch|already allocated|cached\s*\)|allowed;|private pools|memory in use")
_EXCEPTION_BEFORE = re.compile(r"(?:OutOfMemoryError|RuntimeError|Error):\s*$")
_NOT_TORCH_AFTER = re.compile(r"\s*occurred when warming up")
"""vLLM's re-raise of the sampler warm-up failure (`vllm_warmup_oom`), not the allocator's text."""
_TORCH_RUNTIME = re.compile(r"(CUDA|HIP) error: out of memory|cuda runtime error \(2\) : out of memory")
"""c10/cuda/CUDAException.h C10_CUDA_CHECK ("CUDA error: " + cudaGetErrorString; "HIP error: " in
hipified ROCm builds), THC's "cuda runtime error (2)" before torch 1.0."""
MAX_ANCHORS = 5_000
"""Anchors of one phrase read per log: a crash loop repeats its message; the first ones tell."""
WINDOW_CHARS = 1600
"""Characters after the anchor read as the message (the current form is under 700)."""
_REQ = re.compile(rf"Tried to allocate\s*{SIZE}")
_CAP = re.compile(rf"GPU\s*(\d+)\s*has a total capac(i?)ty of\s*{SIZE}(?:\s*of which\s*{SIZE}\s*is free)?")
_CAP_ALONE = re.compile(rf"total capac(i?)ty of\s*{SIZE}")
_FREE = re.compile(rf"{SIZE}\s*is free")
_PROC = re.compile(rf"Process\s*\d+\s*has\s*{SIZE}\s*memory in use")
_THIS = re.compile(rf"this process has\s*{SIZE}\s*memory in use")
_ALLOWED = re.compile(rf"{SIZE}\s*allowed;")
_ALLOC = re.compile(rf"{SIZE}\s*is allocated by PyTorch")
_POOL = re.compile(rf"{SIZE}\s*allocated in private pools")
_UNALLOC = re.compile(rf"{SIZE}\s*is reserved by PyTorch but unallocated")
_OLD_CAP = re.compile(rf"GPU\s*(\d+)\s*;\s*{SIZE}\s*total capacity")
_OLD_CAP_ALONE = re.compile(rf"{SIZE}\s*total capacity")
_OLD_GPU = re.compile(r"\(GPU\s*(\d+)\s*;")
_OLD_ALLOC = re.compile(rf"{SIZE}\s*already allocated")
_OLD_FREE = re.compile(rf"{SIZE}\s*free\s*[;)]")
_OLD_RESERVED = re.compile(rf"{SIZE}\s*reserved in total by PyTorch")
_OLD_CACHED = re.compile(rf"{SIZE}\s*cached\s*\)")


def _torch_current(w: str, numbers: dict) -> str:
    cap = _CAP.search(w)
    if cap:
        numbers.update(gpu_index=to_int(cap.group(1)), capacity_bytes=_size(cap, 3), free_bytes=_size(cap, 5))
    else:
        alone = _CAP_ALONE.search(w)
        numbers.update(capacity_bytes=_size(alone, 2), free_bytes=_size(_FREE.search(w)))
    if numbers.get("free_bytes") is None:
        numbers["free_bytes"] = _size(_FREE.search(w))
    procs = [to_bytes(m.group(1), m.group(2)) for m in _PROC.finditer(w)]
    if procs:
        numbers.update(processes_in_use_bytes=sum(p or 0 for p in procs), num_processes_listed=len(procs))
    numbers.update(
        process_in_use_bytes=_size(_THIS.search(w)), allowed_bytes=_size(_ALLOWED.search(w)),
        allocated_bytes=_size(_ALLOC.search(w)), private_pool_bytes=_size(_POOL.search(w)),
        reserved_unallocated_bytes=_size(_UNALLOC.search(w)),
    )
    if cap:
        return "current" if cap.group(2) else "capacty"
    shown = ("capacity_bytes", "free_bytes", "allocated_bytes", "reserved_unallocated_bytes", "process_in_use_bytes")
    return "current" if procs or any(numbers.get(k) is not None for k in shown) else "truncated"


def _torch_parenthesised(w: str, numbers: dict) -> str:
    cap = _OLD_CAP.search(w)
    gpu = cap or _OLD_GPU.search(w)
    numbers.update(
        gpu_index=to_int(gpu.group(1)) if gpu else None,
        capacity_bytes=_size(cap, 2) if cap else _size(_OLD_CAP_ALONE.search(w)),
        allocated_bytes=_size(_OLD_ALLOC.search(w)), free_bytes=_size(_OLD_FREE.search(w)),
        allowed_bytes=_size(_ALLOWED.search(w)), reserved_bytes=_size(_OLD_RESERVED.search(w)),
        cached_bytes=_size(_OLD_CACHED.search(w)),
    )
    return "legacy_cached" if numbers.get("cached_bytes") is not None else "parenthesised"


def _anchors(text: str) -> list[tuple[int, str]]:
    """Positions of the message's head and of its field phrases, in log order."""
    found = []
    for phrase in (_OOM, *_FIELD_ANCHORS):
        at = text.find(phrase)
        for _ in range(MAX_ANCHORS):
            if at < 0:
                break
            found.append((at, phrase))
            at = text.find(phrase, at + len(phrase))
    return sorted(found)


def _torch_head(text: str, at: int) -> tuple[int, str] | None:
    """Where an "<API> out of memory" head at ``at`` starts, and its API; None when the phrase
    is not PyTorch's head (another library's wording, or prose about an OOM)."""
    api = next((a for a in _DEVICE_APIS if text.endswith(a + " ", 0, at)), None)
    if api is None or _NOT_TORCH_AFTER.match(text, at + len(_OOM), at + len(_OOM) + 60):
        return None
    start = at - len(api) - 1
    after = text[at + len(_OOM):at + len(_OOM) + 400]
    line_start = text.rfind("\n", max(0, start - 80), start) + 1
    rest_of_line = after.split("\n", 1)[0].strip(" .…")
    if (after.startswith(".") or _EVIDENCE.search(after) or not rest_of_line
            or _EXCEPTION_BEFORE.search(text, max(line_start, start - 80), start)):
        return start, api
    return None


def torch_oom(text: str) -> Iterator[Finding]:
    if _OOM not in text and not any(a in text for a in _FIELD_ANCHORS):
        return
    covered = 0
    for at, phrase in _anchors(text):
        if at < covered:
            continue
        if phrase == _OOM:
            head = _torch_head(text, at)
            if head is None:
                continue
            start, api = head
        else:
            start, api = text.rfind("\n", 0, at) + 1, None
            if phrase == "Tried to allocate" and not _REQ.match(text, at, at + 80):
                continue
        w = joined_window(text, start, WINDOW_CHARS, stop=_OOM)
        covered = max(window_end(text, start, WINDOW_CHARS, stop=_OOM), text.find("\n", at) % (len(text) + 1))
        numbers: dict = {"requested_bytes": _size(_REQ.search(w))}
        old = "total capacity;" in w or _OLD_CAP.search(w) is not None or "reserved in total by PyTorch" in w
        variant = _torch_parenthesised(w, numbers) if old else _torch_current(w, numbers)
        labels = {"device_api": api.lower()} if api else {}
        yield make(Kind.torch_gpu_oom, variant, text, start, numbers, labels)
    for m in _TORCH_RUNTIME.finditer(text):
        yield make(Kind.torch_gpu_oom, "cuda_runtime", text, m.start(), {}, {"device_api": (m.group(1) or "cuda").lower()})


# --- PyTorch OOM inside a Ray task ----------------------------------------------------------------
# Source: ray python/ray/exceptions.py (`RayTaskError.as_instanceof_cause`): a task's exception is
# re-raised as class "RayTaskError(<cause class>)", and Ray's own errors (RayError, among them
# ray.exceptions.OutOfMemoryError) are never wrapped, so "RayTaskError(OutOfMemoryError)" is a
# library's OutOfMemoryError (torch.OutOfMemoryError / torch.cuda.OutOfMemoryError). Its text
# starts with the task ("ray::WorkerDict.actor_rollout_generate_sequences() (pid=…, ip=…)") and
# ends with the cause's traceback; when that holds PyTorch's message, that message is the finding.

_RAY_TASK_OOM = re.compile(r"RayTaskError\((?:\w+\.){0,4}OutOfMemoryError\)(?::\s*ray::([\w.]{1,200})\()?")
_TORCH_TEXT = re.compile(r"out of memory|Tried to allocate|by PyTorch|total capac")
RAY_TRACEBACK_CHARS = 20_000
"""Characters after a RayTaskError searched for the cause's own message."""


def ray_task_oom(text: str) -> Iterator[Finding]:
    if "RayTaskError(" not in text:
        return
    for m in _RAY_TASK_OOM.finditer(text):
        if _TORCH_TEXT.search(text, m.end(), m.end() + RAY_TRACEBACK_CHARS):
            continue
        labels = {"ray_task": m.group(1)} if m.group(1) else {}
        yield make(Kind.torch_gpu_oom, "ray_task_error", text, m.start(), {}, labels)


# --- DeepSpeed inference workspace ---------------------------------------------------------------
# Source: deepspeedai/DeepSpeed deepspeed/ops/csrc/transformer/inference/includes/inference_context.h
# (`InferenceContext::GenWorkSpace`, deepspeed 0.16.4): the kernels of DeepSpeed inference (the
# hybrid engine's generation in DeepSpeed-Chat) size a workspace from free memory and throw
# "Workspace can't be allocated, no enough memory." after printing "Requested:\t%lu\nFree:\t%lu\n
# Total:\t%lu", or "Workspace can't be allocated, not enough memory" after "Allocatable workspace
# available (%ld tokens) is less than minimum requested workspace (%d tokens)".

_DS_WORKSPACE = re.compile(r"Workspace can't be allocated, not? enough memory")
_DS_SIZES = tuple((key, re.compile(rf"(?<!\w){label}:\s*(\d{{1,20}})"))
                  for key, label in (("requested_bytes", "Requested"), ("free_bytes", "Free"), ("capacity_bytes", "Total")))
"""Read one by one: a launcher's prefix may stand at the start of each printed line."""
_DS_TOKENS = re.compile(r"workspace available \((\d{1,20}) tokens\) is less than minimum requested workspace \((\d{1,20}) tokens\)")
DS_REPORT_CHARS = 400
"""Characters before the exception searched for the sizes DeepSpeed printed just before it."""


def deepspeed_workspace_oom(text: str) -> Iterator[Finding]:
    if "Workspace can't be allocated" not in text:
        return
    for m in _DS_WORKSPACE.finditer(text):
        before = text[max(0, m.start() - DS_REPORT_CHARS):m.start()]
        numbers: dict = {}
        for key, pattern in _DS_SIZES:
            found = pattern.findall(before)
            numbers[key] = to_int(found[-1]) if found else None
        tokens = _DS_TOKENS.findall(before)
        if tokens:
            numbers.update(workspace_tokens_available=to_int(tokens[-1][0]), workspace_tokens_required=to_int(tokens[-1][1]))
        yield make(Kind.torch_gpu_oom, "deepspeed_workspace", text, m.start(), numbers, {"device_api": "cuda"})


# --- NCCL ----------------------------------------------------------------------------------------
# Source: NVIDIA/nccl src/include/checks.h (`WARN("Cuda failure '%s'", cudaGetErrorString(err))`),
# src/include/cudawrap.h (`WARN("Cuda failure %d '%s'", err, errStr)`, driver API), src/include/
# alloc.h (`WARN("Failed to CUDA calloc %ld bytes")`, "calloc async", "malloc"), src/debug.cc (the
# "host:pid:tid [dev] file:line NCCL WARN" prefix), NCCL 2.x at 5067397. PyTorch re-raises it as
# "ncclUnhandledCudaError: Call to CUDA function failed." then "Last error:" and the WARN text
# (torch/csrc/distributed/c10d/NCCLUtils.cpp `getNcclErrorDetailStr`).

_NCCL = re.compile(r"Cuda failure (?:\d+ )?'out of memory'", re.IGNORECASE)
_NCCL_SOURCE = re.compile(r"([\w./-]+\.(?:cc|cu|h|cpp)):(\d+)\s+(?:NCCL\s+)?WARN\s*$")
_NCCL_CALLOC = re.compile(r"Failed to CUDA (calloc async|calloc|malloc) (\d+) bytes")


def _nccl_source(text: str, offset: int) -> dict:
    low = max(0, offset - 300)  # NCCL's prefix is "host:pid:tid [dev] file:line NCCL WARN "
    head = text[max(low, text.rfind("\n", low, offset) + 1):offset]
    src = _NCCL_SOURCE.search(head.rstrip())
    return {"source": f"{src.group(1)}:{src.group(2)}"} if src else {}


def _calloc_at(text: str, start: int) -> re.Match[str] | None:
    """The "Failed to CUDA calloc N bytes" message at ``start``, read in a joined window (a
    terminal's wrap inside the number loses nothing)."""
    return _NCCL_CALLOC.match(joined_window(text, start, 200, stop="Failed to CUDA ")) or _NCCL_CALLOC.match(text, start)


def nccl_oom(text: str) -> Iterator[Finding]:
    """One finding per message: a "Cuda failure 'out of memory'" carries the calloc size that
    follows it within 600 characters; a calloc line alone is a finding of its own."""
    claimed: set[int] = set()
    if "out of memory'" in text:
        for m in _NCCL.finditer(text):
            at = text.find("Failed to CUDA ", m.end(), m.end() + 600)
            calloc = _calloc_at(text, at) if at >= 0 else None
            if calloc:
                claimed.add(at)
            numbers = {"failed_alloc_bytes": to_int(calloc.group(2)) if calloc else None}
            yield make(Kind.nccl_oom, "nccl", text, m.start(), numbers, _nccl_source(text, m.start()))
    start = text.find("Failed to CUDA ")
    while start >= 0:
        calloc = _calloc_at(text, start) if start not in claimed else None
        if calloc:
            numbers = {"failed_alloc_bytes": to_int(calloc.group(2))}
            yield make(Kind.nccl_oom, calloc.group(1).replace(" ", "_"), text, start, numbers, _nccl_source(text, start))
        start = text.find("Failed to CUDA ", start + 1)


PARSERS = (torch_oom, ray_task_oom, deepspeed_workspace_oom, *VLLM_PARSERS, nccl_oom)
"""Every GPU parser, for `diagnose.find_all`."""
