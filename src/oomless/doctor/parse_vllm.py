"""Parsers of vLLM's memory errors: its start-up check, its KV-cache checks (V0 and V1), its
sampler warm-up, its cumem allocator at wake-up; and the numbers vLLM logged before the error."""

from __future__ import annotations

import re
from collections.abc import Iterator

from .findings import Finding, Kind, make
from .sizes import SIZE, size_of as _size, to_bytes, to_float, to_int
from .text import joined_window

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


PARSERS = (vllm_startup_free_memory, vllm_no_cache_blocks, vllm_max_seq_len, vllm_wake_up_oom, vllm_warmup_oom)
"""Every vLLM parser (`parse_gpu.PARSERS` includes them)."""
