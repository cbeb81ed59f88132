"""The cause of a finding in one sentence, and the fixes that follow from it."""

from __future__ import annotations

import math
from dataclasses import replace

from ..units import MiB, format_bytes
from . import fixes as F
from .findings import Finding, Kind
from .phase import PhaseGuess

FRAGMENTATION_FRACTION = 0.05
"""Reserved-but-unallocated above this share of the GPU (and above the failed request) is worth
fixing with expandable segments; PyTorch's own hint fires on "large" without a number."""
FREE_SLACK_BYTES = 512 * MiB
"""Free memory this far above the failed request (or 5 % of the GPU, if more) means the request
could have fitted: the allocator failed for another reason than capacity."""
OTHER_PROCESSES_FRACTION = 0.10
"""Memory held outside this process above this share of the GPU is named in the cause."""
STARTUP_MARGIN_BYTES = 512 * MiB
"""Headroom left below the free memory when suggesting a vLLM utilization (CUDA context of a
worker process and NCCL, see memory/constants.py)."""


def _b(num_bytes: int | None) -> str:
    if num_bytes is None:
        return "?"
    return "0 bytes" if num_bytes == 0 else format_bytes(num_bytes)


def _where(phase: PhaseGuess) -> str:
    if phase.phase is None:
        return ""
    return f" during {phase.phase}" + (f" ({phase.detail.replace('_', ' ')})" if phase.detail else "")


def held_elsewhere(f: Finding) -> int | None:
    """GPU memory in use but not by this process's PyTorch allocator: other processes, CUDA
    contexts, NCCL, a vLLM cumem pool. None when the message lacks the numbers."""
    n = f.numbers
    cap, free = n.get("capacity_bytes"), n.get("free_bytes")
    if cap is None or free is None:
        return None
    reserved = n.get("reserved_bytes")
    if reserved is None and n.get("allocated_bytes") is not None:
        reserved = n["allocated_bytes"] + n.get("reserved_unallocated_bytes", 0) + n.get("cached_bytes", 0)
    return None if reserved is None else max(0, cap - free - reserved)


def torch_cause(f: Finding, phase: PhaseGuess) -> str:
    n = f.numbers
    api = f.labels.get("device_api", "cuda").upper()
    req, cap, free = n.get("requested_bytes"), n.get("capacity_bytes"), n.get("free_bytes")
    gpu = f" on GPU {n['gpu_index']}" if "gpu_index" in n else ""
    if f.variant == "cuda_runtime":
        return f"A CUDA call ran out of GPU memory{_where(phase)}{gpu}, outside PyTorch's allocator (no sizes printed)."
    if f.variant == "deepspeed_workspace":
        short = (f" ({_b(n['requested_bytes'])} needed, {_b(free)} free of {_b(cap)})" if "requested_bytes" in n else "")
        if "workspace_tokens_required" in n:
            short = f" (room for {n.get('workspace_tokens_available', '?')} tokens, {n['workspace_tokens_required']} required)"
        return (f"DeepSpeed's inference kernels (the hybrid engine's generation){_where(phase)} could not allocate their "
                f"workspace{short}: the training states left too little free GPU memory for generation.")
    if f.variant == "ray_task_error":
        task = f" in Ray task {f.labels['ray_task']}" if "ray_task" in f.labels else " in a Ray task"
        return (f"PyTorch ran out of GPU memory{task}{_where(phase)} (RayTaskError(OutOfMemoryError)); the allocator's "
                "sizes are in that worker's traceback, which the log does not hold.")
    sizes = ", ".join(x for x in (f"{_b(cap)} total" if cap is not None else "", f"{_b(free)} free" if free is not None else "") if x)
    what = f"a {_b(req)} allocation failed" if req is not None else "an allocation failed"
    head = f"{api} out of memory{_where(phase)}: {what}{gpu}" + (f" ({sizes})" if sizes else "")
    if req is not None and cap is not None and req > cap:
        return head + "; one tensor larger than the whole GPU points at an unbounded size (sequence length, batch, logits), not at tuning."
    if req is not None and free is not None and cap and free - req >= max(FREE_SLACK_BYTES, FRAGMENTATION_FRACTION * cap):
        return head + "; that much was free, so the failure is not capacity but fragmentation or another allocator (vLLM cumem pool, a memory limit) holding the pages."
    parts = []
    if n.get("allocated_bytes") is not None:
        parts.append(f"PyTorch held {_b(n['allocated_bytes'])} in tensors")
    unallocated = n.get("reserved_unallocated_bytes", n.get("cached_bytes"))
    if unallocated is not None:
        parts.append(f"{_b(unallocated)} cached")
    elsewhere = held_elsewhere(f)
    if elsewhere is not None and cap and elsewhere > OTHER_PROCESSES_FRACTION * cap:
        parts.append(f"{_b(elsewhere)} was held outside this process's allocator (other processes, a colocated engine, contexts)")
    return head + ("; " + ", ".join(parts) if parts else "") + "."


def torch_fixes(f: Finding, phase: PhaseGuess) -> tuple[F.Fix, ...]:
    n = f.numbers
    out = list(F.phase_fixes(phase.phase, phase.detail))
    if phase.detail == "sampler_warmup":  # vLLM's warm-up after the KV cache took its budget
        out = [F.MAX_SEQS, F.UTIL_LOWER, *F.phase_fixes("load", "engine_start")]
    cap, req = n.get("capacity_bytes"), n.get("requested_bytes") or 0
    unallocated = n.get("reserved_unallocated_bytes", n.get("cached_bytes"))
    if unallocated is not None and cap and unallocated > max(req, FRAGMENTATION_FRACTION * cap):
        out.insert(0, F.EXPANDABLE)
    elsewhere = held_elsewhere(f)
    if elsewhere is not None and cap and elsewhere > OTHER_PROCESSES_FRACTION * cap and phase.phase != "rollout":
        out += [F.SLEEP_1, F.UTIL_LOWER]
    if req and cap and req > cap:
        out = [F.SHORTER, F.MICRO_BATCH, F.CHUNKED_LOGITS]
    return _unique(out)


def suggested_utilization(f: Finding) -> float | None:
    """The largest vLLM utilization the start-up check would have accepted, less a margin."""
    free, total = f.numbers.get("free_bytes"), f.numbers.get("total_bytes")
    if not free or not total:
        return None
    return math.floor((free - STARTUP_MARGIN_BYTES) / total * 100) / 100


def vllm_cause(f: Finding) -> str:
    n = f.numbers
    if f.kind == Kind.vllm_startup_free_memory:
        held = (n["total_bytes"] - n["free_bytes"]) if "total_bytes" in n and "free_bytes" in n else None
        return (f"vLLM's start-up check failed: gpu_memory_utilization {n.get('gpu_memory_utilization', '?')} asks for "
                f"{_b(n.get('requested_bytes'))} but only {_b(n.get('free_bytes'))} of {_b(n.get('total_bytes'))} was free; "
                f"{_b(held)} was already held by the trainer, another engine or other processes.")
    if f.kind == Kind.vllm_no_cache_blocks:
        budget = ""
        if "total_gpu_memory_bytes" in n and "gpu_memory_utilization" in n:
            budget = f" ({n['gpu_memory_utilization']:.2f} × {_b(n['total_gpu_memory_bytes'])})"
        return (f"vLLM had no memory left for the KV cache: weights, the profile run's activations and non-torch memory "
                f"used up its gpu_memory_utilization budget{budget}.")
    if f.kind == Kind.vllm_warmup_oom:
        seqs = n.get("num_dummy_requests")
        count = f"{seqs} dummy requests (max_num_seqs)" if seqs is not None else "max_num_seqs dummy requests"
        return (f"vLLM ran out of GPU memory warming up its {f.labels.get('warmed_up', 'sampler')} with {count} at start-up: "
                "the KV cache had already taken the utilization budget, and the sampler's logits for that many sequences "
                "did not fit in what was left.")
    if f.kind == Kind.vllm_max_seq_len:
        if f.variant == "v1":
            return (f"vLLM's KV cache cannot hold one max_model_len={n.get('max_model_len', '?')} sequence: it needs "
                    f"{_b(n.get('kv_needed_bytes'))}, {_b(n.get('kv_available_bytes'))} is available.")
        return (f"vLLM's KV cache holds {n.get('kv_cache_tokens', '?')} tokens, fewer than one "
                f"max_model_len={n.get('max_model_len', '?')} sequence.")
    return ("vLLM could not map its memory back when waking from sleep: the weights and KV cache it re-creates did not "
            "fit next to what the trainer still holds on the GPU.")


def vllm_fixes(f: Finding) -> tuple[F.Fix, ...]:
    if f.kind == Kind.vllm_wake_up_oom:
        return F.phase_fixes("rollout", "wake_up")
    if f.kind == Kind.vllm_warmup_oom:
        return (F.MAX_SEQS, F.UTIL_LOWER)  # the two knobs vLLM's own message names
    out = list(F.VLLM_FIXES[f.kind.value])
    if f.kind == Kind.vllm_startup_free_memory:
        util = suggested_utilization(f)
        if util is not None and util > 0:
            out[0] = F.describe(replace(F.UTIL_LOWER, target=util))
    if f.kind == Kind.vllm_max_seq_len:
        fits = f.numbers.get("estimated_max_model_len") or f.numbers.get("kv_cache_tokens")
        if fits:
            out.insert(0, F.describe(F.Fix("rollout.max_model_len", "lower", fits,
                                           "the engine then accepts; it must still cover max_prompt_tokens + max_completion_tokens")))
    return tuple(out)


def host_cause(f: Finding) -> str:
    n, labels = f.numbers, f.labels
    if f.kind == Kind.ray_oom:
        usage = ""
        if "node_used_bytes" in n and "node_total_bytes" in n:
            usage = f" at {_b(n['node_used_bytes'])} of {_b(n['node_total_bytes'])}"
        threshold = f" (threshold {n['usage_threshold']:.2f})" if "usage_threshold" in n else ""
        victim = f" the worker running {labels['task_name']}" if "task_name" in labels else " a worker"
        top = ""
        if "top_user_command" in labels:
            top = f"; the largest process was {labels['top_user_command']} with {_b(n.get('top_user_bytes'))}"
        return f"Ray's memory monitor killed{victim} because node RAM crossed its threshold{usage}{threshold}{top}."
    if f.kind == Kind.kernel_oom_kill:
        cgroup = f.variant == "cgroup" or labels.get("scope") == "cgroup"
        scope = "its cgroup limit (container or job)" if cgroup else "host RAM"
        return (f"The Linux OOM killer killed {labels.get('process_name', '?')} (pid {n.get('pid', '?')}) holding "
                f"{_b(n.get('anon_rss_bytes'))} of anonymous memory when {scope} ran out.")
    if f.kind == Kind.host_alloc_oom:
        return f"A host (CPU) allocation of {_b(n.get('requested_bytes'))} failed: host RAM ran out."
    if f.kind == Kind.process_killed:
        who = f" ({labels['command'][:80]})" if "command" in labels else (f" (pid {n['pid']})" if "pid" in n else "")
        return (f"A process{who} was killed by SIGKILL (signal 9, exit status 137): the Linux OOM killer sends it when host "
                "RAM or a container's memory limit runs out (`dmesg | grep -i 'killed process'` on that node confirms it); "
                "a launcher also sends it to workers that ignore SIGTERM after another rank failed, so look for an error above.")
    if f.kind == Kind.kernel_oom_kill and f.variant == "invoked":
        return (f"The Linux OOM killer ran (invoked by {labels.get('invoking_process', '?')}); the line naming the process "
                "it killed is not in the log.")
    return ("A Ray worker died without a Python error; Ray names the kernel OOM killer as the first suspect "
            "(`dmesg | grep -i 'killed process'` confirms it).")


def host_fixes(f: Finding) -> tuple[F.Fix, ...]:
    out = list(F.HOST_FIXES)
    top = f.labels.get("top_user_command", "")
    if "LLMRayActor" in top or "vllm" in top.lower():
        out.insert(0, F.SLEEP_2)
    if f.kind == Kind.ray_oom:
        out.append(F.RAY_THRESHOLD)
    return tuple(out)


def nccl_cause(f: Finding) -> str:
    size = f.numbers.get("failed_alloc_bytes")
    what = f" ({_b(size)})" if size is not None else ""
    return f"NCCL could not allocate its communication buffers on the GPU{what}: the GPU was already full when a communicator or channel was set up."


def explain(f: Finding, phase: PhaseGuess) -> tuple[str, tuple[F.Fix, ...]]:
    """The cause sentence and the fixes for ``f`` (fixes without a spec: generic knob changes)."""
    if f.kind == Kind.torch_gpu_oom:
        return torch_cause(f, phase), torch_fixes(f, phase)
    if f.kind.value.startswith("vllm_"):
        return vllm_cause(f), vllm_fixes(f)
    if f.kind == Kind.nccl_oom:
        return nccl_cause(f), _unique([F.NCCL_BUFFSIZE, F.UTIL_LOWER, *F.phase_fixes(phase.phase, phase.detail)])
    return host_cause(f), host_fixes(f)


def _unique(fixes: list[F.Fix]) -> tuple[F.Fix, ...]:
    seen, out = set(), []
    for fix in fixes:
        if fix.knob not in seen:
            seen.add(fix.knob)
            out.append(fix)
    return tuple(out)



