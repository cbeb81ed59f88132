"""Parsers of GPU memory errors: PyTorch's allocator (CUDA, HIP, every format since 1.x),
vLLM's start-up and KV-cache checks, vLLM's cumem allocator, NCCL.

Each parser scans the cleaned log for an anchor (a fixed phrase of the message), then reads the
numbers from a window after it with small regexes, so truncated messages still give what they
show and no regex can backtrack across the whole log.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .findings import Finding, Kind
from .sizes import UNIT_PATTERN, to_bytes, to_float, to_int
from .text import joined_window, window_end

NUM = r"(?<![\d.])(\d+(?:\.\d+)?)"
"""A number that starts where a run of digits starts (the lookbehind keeps a search linear in a
long run of digits: without it every digit of the run is tried as a start)."""
SIZE = rf"{NUM}\s*({UNIT_PATTERN})"


def make(kind: Kind, variant: str, text: str, offset: int, numbers: dict, labels: dict | None = None) -> Finding:
    """A finding at ``offset``, its message being the line there. Its line number is left 0 for
    `diagnose.find_all` to fill in one pass over the log."""
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset, offset + 2000)
    line = text[start:end if end >= 0 else min(len(text), offset + 2000)].strip()
    clean = {k: v for k, v in numbers.items() if v is not None}
    return Finding(kind, variant, offset, 0, line[:300], clean, dict(labels or {}))


def _size(match: re.Match[str] | None, group: int = 1) -> int | None:
    if match is None or match.group(group) is None:
        return None
    return to_bytes(match.group(group), match.group(group + 1))


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
_TORCH_RUNTIME = re.compile(r"CUDA error: out of memory|cuda runtime error \(2\) : out of memory")
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
        yield make(Kind.torch_gpu_oom, "cuda_runtime", text, m.start(), {}, {"device_api": "cuda"})


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


# --- vLLM ----------------------------------------------------------------------------------------
# Source: vllm/v1/worker/gpu_worker.py (`init_device`, `request_memory`), vllm/worker/worker.py
# (`raise_if_cache_size_invalid`, V0), vllm/v1/core/kv_cache_utils.py
# (`check_enough_kv_cache_memory`), csrc/cumem_allocator.cpp (`CUDA Error: … at file:line`).

_FREE_ANCHOR = re.compile(r"Free memory on device")
_FREE_SIZES = re.compile(r"\(\s*([\d.]+)\s*/\s*([\d.]+)\s*GiB\s*\)")
_FREE_DEVICE = re.compile(r"on device\s+[a-z]*:(\d+)")
_FREE_WANTED = re.compile(r"utilization\s*\(\s*([\d.]+)\s*,\s*([\d.]+)\s*GiB\s*\)")


def vllm_startup_free_memory(text: str) -> Iterator[Finding]:
    for m in _FREE_ANCHOR.finditer(text):
        w = joined_window(text, m.start(), 500, stop=m.group(0))
        if not re.search(r"less than\s*desired", w):
            continue  # the informational start-up line, not the error
        sizes, wanted, device = _FREE_SIZES.search(w), _FREE_WANTED.search(w), _FREE_DEVICE.search(w[:60])
        numbers = {
            "gpu_index": to_int(device.group(1)) if device else None,
            "free_bytes": to_bytes(sizes.group(1), "GiB") if sizes else None,
            "total_bytes": to_bytes(sizes.group(2), "GiB") if sizes else None,
            "gpu_memory_utilization": to_float(wanted.group(1)) if wanted else None,
            "requested_bytes": to_bytes(wanted.group(2), "GiB") if wanted else None,
        }
        yield make(Kind.vllm_startup_free_memory, "v1", text, m.start(), numbers)


_NO_BLOCKS = re.compile(r"No available memory for the cache blocks|# GPU blocks: 0\b")


def vllm_no_cache_blocks(text: str) -> Iterator[Finding]:
    for m in _NO_BLOCKS.finditer(text):
        variant = "gpu_blocks_zero" if m.group(0).startswith("#") else "error"
        yield make(Kind.vllm_no_cache_blocks, variant, text, m.start(), vllm_context(text, m.start()))


_SEQ_ANCHOR = re.compile(r"max seq len\s*\(")
_SEQ_V0 = re.compile(r"max seq len\s*\((\d+)\)\s*is larger than the maximum number of tokens that can be stored in KV cache\s*\((\d+)\)")
_SEQ_V0_LEN = re.compile(r"max seq len\s*\((\d+)\)\s*is larger than the maximum number of tokens")
_SEQ_V1 = re.compile(rf"max seq len\s*\((\d+)\),?\s*\(\s*{SIZE}\s*KV cache is needed")
_SEQ_V1_AVAIL = re.compile(rf"available KV cache memory\s*\(\s*{SIZE}\s*\)")
_SEQ_V1_EST = re.compile(r"estimated maximum model length is\s*(\d+)")


def vllm_max_seq_len(text: str) -> Iterator[Finding]:
    for m in _SEQ_ANCHOR.finditer(text):
        w = joined_window(text, m.start(), 700, stop="max seq len")
        v0, v0_len, v1 = _SEQ_V0.search(w), _SEQ_V0_LEN.search(w), _SEQ_V1.search(w)
        is_v1 = v1 or "KV cache is needed" in w[:200] or "at least one request" in text[max(0, m.start() - 80):m.start()]
        if not (v0 or v0_len or is_v1):
            continue
        numbers = vllm_context(text, m.start())
        if v0 or v0_len:
            numbers["max_model_len"] = to_int((v0 or v0_len).group(1))
            numbers["kv_cache_tokens"] = to_int(v0.group(2)) if v0 else numbers.get("kv_cache_tokens")
            yield make(Kind.vllm_max_seq_len, "v0", text, m.start(), numbers)
        else:
            est = _SEQ_V1_EST.search(w)
            numbers.update(
                max_model_len=to_int(v1.group(1)) if v1 else None, kv_needed_bytes=_size(v1, 2),
                kv_available_bytes=_size(_SEQ_V1_AVAIL.search(w)),
                estimated_max_model_len=to_int(est.group(1)) if est else None,
            )
            yield make(Kind.vllm_max_seq_len, "v1", text, m.start(), numbers)


_CUMEM = re.compile(r"CUDA Error: out of memory at\s*\S*?cumem_allocator\.cpp:(\d+)|cuMemCreate CUDA_ERROR_OUT_OF_MEMORY")


def vllm_wake_up_oom(text: str) -> Iterator[Finding]:
    for m in _CUMEM.finditer(text):
        if m.group(1):
            yield make(Kind.vllm_wake_up_oom, "cumem", text, m.start(), {"cumem_source_line": to_int(m.group(1))})
        else:
            yield make(Kind.vllm_wake_up_oom, "torch_memory_saver", text, m.start(), {})


# Source: vllm/v1/worker/gpu_model_runner.py (`_dummy_sampler_run`, `_dummy_pooler_run`), vLLM
# 0.7-0.33: "CUDA out of memory occurred when warming up sampler with N dummy requests. Please try
# lowering `max_num_seqs` or `gpu_memory_utilization` when initializing the engine." (pooler:
# "... warming up pooler (task=...) with N dummy requests ..."); N is max_num_seqs.

_WARMUP = re.compile(r"occurred when warming up (sampler|pooler)(?:\s*\(task=([^)\n]{0,40})\))?(?:\s*with\s*(\d+)\s*dummy requests)?")


def vllm_warmup_oom(text: str) -> Iterator[Finding]:
    if "occurred when warming up" not in text:
        return
    for m in _WARMUP.finditer(text):
        labels = {"warmed_up": m.group(1), **({"pooling_task": m.group(2).strip("'\" ")} if m.group(2) else {})}
        numbers = {"num_dummy_requests": to_int(m.group(3)) if m.group(3) else None}
        yield make(Kind.vllm_warmup_oom, m.group(1), text, m.start(), numbers, labels)


# Context lines vLLM logs while sizing its budget (V0 worker.py, V1 gpu_worker.py / kv_cache_utils.py).
_CONTEXT: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("total_gpu_memory_bytes", re.compile(r"total_gpu_memory\s*[=(]\s*([\d.]+)\s*GiB"), "GiB"),
    ("gpu_memory_utilization", re.compile(r"gpu_memory_utilization\s*[=(]\s*([\d.]+)"), ""),
    ("peak_torch_memory_bytes", re.compile(r"peak_torch_memory=([\d.]+)GiB"), "GiB"),
    ("non_torch_memory_bytes", re.compile(r"non_torch_memory(?:=| takes )([\d.]+)\s*GiB"), "GiB"),
    ("kv_cache_bytes", re.compile(r"kv_cache_size=([\d.]+)GiB|reserved for KV Cache is ([\d.]+)\s*GiB|Available KV cache memory:\s*([\d.]+)\s*GiB"), "GiB"),
    ("weights_bytes", re.compile(r"(?:Loading model weights|Model loading) took ([\d.]+)\s*G(?:i)?B|model weights take ([\d.]+)\s*GiB"), "GiB"),
    ("num_gpu_blocks", re.compile(r"# GPU blocks: (\d+)"), ""),
    ("kv_cache_tokens", re.compile(r"GPU KV cache size: ([\d,]+) tokens"), ""),
    ("max_model_len", re.compile(r"max_seq_len=(\d+)"), ""),
)
CONTEXT_SPAN = 8_000
"""Characters before an error searched for vLLM's context lines."""


def vllm_context(text: str, offset: int) -> dict:
    """Numbers vLLM logged before the error (the last value of each)."""
    before = text[max(0, offset - CONTEXT_SPAN):offset + 400]
    out: dict = {}
    for key, pattern, unit in _CONTEXT:
        last = None
        for last in pattern.finditer(before):
            pass
        if last is None:
            continue
        raw = next(g for g in last.groups() if g is not None)
        if unit:
            out[key] = to_bytes(raw, unit)
        elif key == "gpu_memory_utilization":
            out[key] = to_float(raw)
        else:
            out[key] = to_int(raw)
    return out


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


def nccl_oom(text: str) -> Iterator[Finding]:
    if "out of memory'" in text:
        for m in _NCCL.finditer(text):
            calloc = _NCCL_CALLOC.search(text, m.end(), m.end() + 600)
            numbers = {"failed_alloc_bytes": to_int(calloc.group(2)) if calloc else None}
            yield make(Kind.nccl_oom, "nccl", text, m.start(), numbers, _nccl_source(text, m.start()))
    if "Failed to CUDA " in text:
        for m in _NCCL_CALLOC.finditer(text):
            numbers = {"failed_alloc_bytes": to_int(m.group(2))}
            yield make(Kind.nccl_oom, m.group(1).replace(" ", "_"), text, m.start(), numbers, _nccl_source(text, m.start()))


PARSERS = (torch_oom, ray_task_oom, vllm_startup_free_memory, vllm_no_cache_blocks, vllm_max_seq_len,
           vllm_wake_up_oom, vllm_warmup_oom, nccl_oom)
"""Every GPU parser, for `diagnose.find_all`."""
