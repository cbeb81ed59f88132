"""What the parsers find: one `Finding` per recognised error message.

A finding carries the message kind, the format variant it was printed in, where it is in the
log, and what it says as numbers (bytes as integers, fractions as floats, counts and ids as
integers) and labels (names). Keys are present only when the log shows them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Kind(str, Enum):
    torch_gpu_oom = "torch_gpu_oom"
    """PyTorch's caching allocator (CUDA or HIP) could not allocate a tensor, or a CUDA call
    failed with out of memory."""
    vllm_startup_free_memory = "vllm_startup_free_memory"
    """vLLM's start-up check: free GPU memory < gpu_memory_utilization × total."""
    vllm_no_cache_blocks = "vllm_no_cache_blocks"
    """vLLM's budget left nothing (or a negative amount) for the KV cache."""
    vllm_max_seq_len = "vllm_max_seq_len"
    """vLLM's KV cache cannot hold one sequence of max_model_len tokens."""
    vllm_wake_up_oom = "vllm_wake_up_oom"
    """vLLM's cumem allocator could not map memory back (sleep mode wake-up)."""
    vllm_warmup_oom = "vllm_warmup_oom"
    """vLLM ran out of GPU memory warming up its sampler (or pooler) with max_num_seqs dummy
    requests at start-up, after the KV cache had taken its budget."""
    nccl_oom = "nccl_oom"
    """NCCL could not allocate its communication buffers on the GPU."""
    ray_oom = "ray_oom"
    """Ray's memory monitor killed a worker because node RAM crossed its threshold."""
    ray_worker_died = "ray_worker_died"
    """A Ray worker died without an exception; Ray names the kernel OOM killer as first suspect."""
    kernel_oom_kill = "kernel_oom_kill"
    """The Linux OOM killer (global or cgroup) killed a process."""
    host_alloc_oom = "host_alloc_oom"
    """PyTorch's CPU allocator could not allocate host memory."""
    process_killed = "process_killed"
    """A process died of SIGKILL (signal 9, exit status 137 or -9) as a shell or launcher reports
    it; the Linux OOM killer is the usual sender, but the message does not name it."""


DEVICE = {
    Kind.torch_gpu_oom: "gpu", Kind.vllm_startup_free_memory: "gpu", Kind.vllm_no_cache_blocks: "gpu",
    Kind.vllm_max_seq_len: "gpu", Kind.vllm_wake_up_oom: "gpu", Kind.vllm_warmup_oom: "gpu", Kind.nccl_oom: "gpu",
    Kind.ray_oom: "host", Kind.ray_worker_died: "host", Kind.kernel_oom_kill: "host", Kind.host_alloc_oom: "host",
    Kind.process_killed: "host",
}
"""Which memory ran out for each kind."""

SECONDARY = frozenset({Kind.nccl_oom, Kind.ray_worker_died, Kind.process_killed})
"""Kinds that are usually consequences of another failure; a direct OOM message, if present,
is the primary finding."""


@dataclass(frozen=True)
class Finding:
    kind: Kind
    variant: str
    """The message format, e.g. ``current``, ``parenthesised``, ``v1``, ``task``."""
    offset: int
    """Character offset of the message in the cleaned log."""
    line: int
    """1-based line of the message."""
    message: str
    """The error line as found (at most 300 characters)."""
    numbers: dict[str, int | float] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def device(self) -> str:
        return DEVICE[self.kind]


def make(kind: Kind, variant: str, text: str, offset: int, numbers: dict, labels: dict | None = None) -> Finding:
    """A finding at ``offset``, its message being the line there; numbers the log does not show
    (None) are left out. Its line number is left 0 for `diagnose.find_all` to fill in one pass."""
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset, offset + 2000)
    line = text[start:end if end >= 0 else min(len(text), offset + 2000)].strip()
    clean = {k: v for k, v in numbers.items() if v is not None}
    return Finding(kind, variant, offset, 0, line[:300], clean, dict(labels or {}))
