"""Generators of crash logs for the doctor's fuzz tests (issue 15).

`messages()` draws one out-of-memory message in a shape a framework prints, with its numbers
drawn too, and returns the text with the sizes it states (the truth a parser must read back).
The shapes are written from the printers' sources, not copied from users' logs:

- PyTorch caching allocator (CUDA, HIP): c10/cuda/CUDACachingAllocator.cpp, `malloc`'s OOM
  path (torch >= 2.1 "has a total capacity of … of which … is free"; 1.5-2.0 parenthesised
  "(GPU i; T total capacity; A already allocated; F free; R reserved in total by PyTorch)"),
  sizes by `format_size` (`c10/util/...`: "N bytes" up to 1 KiB, then two decimals of KiB, MiB,
  GiB); `cuda runtime error (2) : out of memory` of torch 0.4-1.x THC.
- PyTorch CPU allocator: c10/core/impl/alloc_cpu.cpp ("DefaultCPUAllocator: can't allocate
  memory: you tried to allocate N bytes. Error code 12 (Cannot allocate memory)", and "not
  enough memory" on Windows).
- vLLM: vllm/v1/worker/gpu_worker.py (`init_device`: free memory on start-up below the
  requested utilization, GiB with two decimals), vllm/v1/core/kv_cache_utils.py
  (`check_enough_kv_cache_memory`), vllm/worker/worker.py (`raise_if_cache_size_invalid`, V0),
  csrc/cumem_allocator.cpp (`CUDA Error: out of memory at <file>:<line>`).
- Ray: src/ray/raylet/node_manager.cc (the memory monitor's kill message, "GB" = GiB, two
  decimals) and `ray.exceptions.OutOfMemoryError`.
- Linux: mm/oom_kill.c `__oom_kill_process` ("Out of memory: Killed process %d (%s)
  total-vm:%lukB, anon-rss:%lukB, file-rss:%lukB, shmem-rss:%lukB, UID:%u pgtables:%lukB
  oom_score_adj:%hd"; "Memory cgroup out of memory" under a cgroup limit), behind dmesg's
  "[seconds.micros]" stamp.
- NCCL: src/include/alloc.h / src/misc (the `WARN Cuda failure 'out of memory'` and "Failed to
  CUDA calloc N bytes" lines, behind NCCL's "host:pid:tid [dev]" prefix).

`mutated()` damages a log as logs get damaged: byte flips, truncation, absurd numbers, a line
repeated thousands of times, lines of up to 200,000 characters, bytes that are not UTF-8, CRLF
or CR line ends, ANSI colour codes, launcher prefixes, ranks interleaved line by line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hypothesis import strategies as st

KIB, MIB, GIB = 1024, 1024**2, 1024**3


@dataclass(frozen=True)
class Message:
    kind: str
    """The `oomless.doctor.Kind` value the message is."""
    text: str
    sizes: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Finding number key → (true bytes, largest printing error in bytes)."""
    counts: dict[str, int] = field(default_factory=dict)
    """Finding number key → an exact integer the message prints."""


def format_size(num_bytes: int) -> tuple[str, int]:
    """PyTorch's `format_size`, and the largest rounding error of what it prints."""
    if num_bytes <= KIB:
        return f"{num_bytes} bytes", 0
    for unit, name in ((MIB, "KiB"), (GIB, "MiB")):
        if num_bytes <= unit:
            step = unit // KIB
            return f"{num_bytes / step:.2f} {name}", step // 200 + 1
    return f"{num_bytes / GIB:.2f} GiB", GIB // 200 + 1


def gib2(num_bytes: int) -> tuple[str, int]:
    """Two decimals of GiB (vLLM's `GiB_bytes`, Ray's "GB")."""
    return f"{num_bytes / GIB:.2f}", GIB // 200 + 1


SIZES = st.one_of(st.integers(0, 4 * KIB), st.integers(0, 2 * GIB), st.integers(0, 4 * 1024**4))
"""Byte counts across format_size's units, up to 4 TiB (the largest GPU the spec allows)."""


@st.composite
def torch_current(draw: st.DrawFn) -> Message:
    api = draw(st.sampled_from(["CUDA", "HIP"]))
    req, cap, free, this, alloc, unalloc = (draw(SIZES) for _ in range(6))
    gpu = draw(st.integers(0, 15))
    typo = draw(st.sampled_from(["capacity", "capacty"]))
    (r, er), (c, ec), (f, ef), (t, _), (a, ea), (u, eu) = map(format_size, (req, cap, free, this, alloc, unalloc))
    exc = draw(st.sampled_from(["torch.OutOfMemoryError", "torch.cuda.OutOfMemoryError", "RuntimeError"]))
    text = (f"{exc}: {api} out of memory. Tried to allocate {r}. GPU {gpu} has a total {typo} of {c} of which {f} is "
            f"free. Including non-PyTorch memory, this process has {t} memory in use. Of the allocated memory {a} is "
            f"allocated by PyTorch, and {u} is reserved by PyTorch but unallocated. If reserved but unallocated memory "
            "is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
            "documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")
    return Message("torch_gpu_oom", text,
                   {"requested_bytes": (req, er), "capacity_bytes": (cap, ec), "free_bytes": (free, ef),
                    "allocated_bytes": (alloc, ea), "reserved_unallocated_bytes": (unalloc, eu)}, {"gpu_index": gpu})


@st.composite
def torch_parenthesised(draw: st.DrawFn) -> Message:
    req, cap, alloc, free, reserved = (draw(SIZES) for _ in range(5))
    gpu = draw(st.integers(0, 15))
    (r, er), (c, ec), (a, ea), (f, ef), (v, ev) = map(format_size, (req, cap, alloc, free, reserved))
    text = (f"RuntimeError: CUDA out of memory. Tried to allocate {r} (GPU {gpu}; {c} total capacity; {a} already "
            f"allocated; {f} free; {v} reserved in total by PyTorch) If reserved memory is >> allocated memory try "
            "setting max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and "
            "PYTORCH_CUDA_ALLOC_CONF")
    return Message("torch_gpu_oom", text, {"requested_bytes": (req, er), "capacity_bytes": (cap, ec),
                                           "allocated_bytes": (alloc, ea), "free_bytes": (free, ef),
                                           "reserved_bytes": (reserved, ev)}, {"gpu_index": gpu})


@st.composite
def torch_cpu(draw: st.DrawFn) -> Message:
    n = draw(st.integers(0, 2**63 - 1))
    how = draw(st.sampled_from(["can't allocate memory", "not enough memory"]))
    tail = ". Error code 12 (Cannot allocate memory)" if how.startswith("can't") else "."
    text = f"RuntimeError: [enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: {how}: you tried to allocate {n} bytes{tail}"
    return Message("host_alloc_oom", text, {"requested_bytes": (n, 0)})


@st.composite
def vllm_startup(draw: st.DrawFn) -> Message:
    free, total, wanted = (draw(st.integers(0, 4 * 1024**4)) for _ in range(3))
    util = draw(st.sampled_from([0.3, 0.5, 0.85, 0.9, 0.95]))
    gpu = draw(st.integers(0, 7))
    (f, ef), (t, et), (w, ew) = gib2(free), gib2(total), gib2(wanted)
    text = (f"ValueError: Free memory on device cuda:{gpu} ({f}/{t} GiB) on startup is less than desired GPU memory "
            f"utilization ({util}, {w} GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.")
    return Message("vllm_startup_free_memory", text,
                   {"free_bytes": (free, ef), "total_bytes": (total, et), "requested_bytes": (wanted, ew)}, {"gpu_index": gpu})


@st.composite
def vllm_kv(draw: st.DrawFn) -> Message:
    max_len = draw(st.integers(1, 2**24))
    if draw(st.booleans()):
        tokens = draw(st.integers(0, 2**24))
        text = (f"ValueError: The model's max seq len ({max_len}) is larger than the maximum number of tokens that can "
                f"be stored in KV cache ({tokens}). Try increasing `gpu_memory_utilization` or decreasing "
                "`max_model_len` when initializing the engine.")
        return Message("vllm_max_seq_len", text, counts={"max_model_len": max_len, "kv_cache_tokens": tokens})
    needed, avail = draw(st.integers(GIB, 1024**4)), draw(st.integers(GIB, 1024**4))
    (n, en), (a, ea) = format_size(needed), format_size(avail)
    est = draw(st.integers(0, max_len))
    text = (f"ValueError: To serve at least one request with the models's max seq len ({max_len}), ({n} KV cache is "
            f"needed, which is larger than the available KV cache memory ({a}). Based on the available memory, the "
            f"estimated maximum model length is {est}. Try increasing `gpu_memory_utilization` or decreasing "
            "`max_model_len` when initializing the engine.")
    return Message("vllm_max_seq_len", text, {"kv_needed_bytes": (needed, en), "kv_available_bytes": (avail, ea)},
                   {"max_model_len": max_len, "estimated_max_model_len": est})


@st.composite
def vllm_other(draw: st.DrawFn) -> Message:
    line = draw(st.integers(1, 999))
    return draw(st.sampled_from([
        Message("vllm_no_cache_blocks", "ValueError: No available memory for the cache blocks. Try increasing "
                "`gpu_memory_utilization` when initializing the engine."),
        Message("vllm_wake_up_oom", f"CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:{line}",
                counts={"cumem_source_line": line}),
    ]))


@st.composite
def ray_oom(draw: st.DrawFn) -> Message:
    used, total, worker = (draw(st.integers(0, 2 * 1024**5)) for _ in range(3))
    pid = draw(st.integers(1, 4_194_304))
    (u, eu), (t, et), (w, ew) = gib2(used), gib2(total), gib2(worker)
    text = (f"ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n"
            f"Memory on the node (IP: 10.0.0.7, ID: 5f0c) where the task (task ID: ffff, name=WorkerDict.actor_rollout_"
            f"generate_sequences, pid={pid}, memory used={w}GB) was running was {u}GB / {t}GB (0.9613), which exceeds "
            "the memory usage threshold of 0.95. Ray killed this worker (ID: 9a1b) because it was the most recently "
            "scheduled task; to see more information about memory usage on this node, use `ray logs raylet.out -ip "
            "10.0.0.7`. To see the logs of the worker, use `ray logs worker-9a1b*out -ip 10.0.0.7.")
    return Message("ray_oom", text, {"node_used_bytes": (used, eu), "node_total_bytes": (total, et),
                                     "worker_memory_used_bytes": (worker, ew)}, {"worker_pid": pid})


@st.composite
def kernel_oom(draw: st.DrawFn) -> Message:
    pid = draw(st.integers(1, 4_194_304))
    vm, anon, file, shmem = (draw(st.integers(0, 2**40)) for _ in range(4))
    scope = draw(st.sampled_from(["Out of memory", "Memory cgroup out of memory"]))
    stamp = draw(st.sampled_from(["", "[123456.789012] ", "kernel: "]))
    text = (f"{stamp}{scope}: Killed process {pid} (python3) total-vm:{vm}kB, anon-rss:{anon}kB, file-rss:{file}kB, "
            f"shmem-rss:{shmem}kB, UID:1000 pgtables:81234kB oom_score_adj:0")
    kb = {"total_vm_bytes": vm, "anon_rss_bytes": anon, "file_rss_bytes": file, "shmem_rss_bytes": shmem}
    return Message("kernel_oom_kill", text, {k: (v * KIB, 0) for k, v in kb.items()}, {"pid": pid})


@st.composite
def nccl_oom(draw: st.DrawFn) -> Message:
    n = draw(st.integers(1, 2**40))
    text = (f"node-3:2201:2350 [1] include/alloc.h:103 NCCL WARN Cuda failure 'out of memory'\n"
            f"node-3:2201:2350 [1] include/alloc.h:110 NCCL WARN Failed to CUDA calloc {n} bytes")
    return Message("nccl_oom", text, counts={"failed_alloc_bytes": n})


def messages() -> st.SearchStrategy[Message]:
    return st.one_of(torch_current(), torch_parenthesised(), torch_cpu(), vllm_startup(), vllm_kv(), vllm_other(),
                     ray_oom(), kernel_oom(), nccl_oom())


TRACEBACK = ('Traceback (most recent call last):\n  File "/opt/trl/trainer/grpo_trainer.py", line 1873, in '
             '_generate_single_turn\n    prompt_completion_ids = unwrapped_model.generate(\n')
"""A frame before the message, as a crash prints it."""


# --- damage ----------------------------------------------------------------------------------------

PREFIXES = ["[rank0]: ", "[rank7]:", "(WorkerDict pid=4242, ip=10.0.0.7) ", "(RayWorker pid=9) ", "E   ", "+ "]
ANSI = ["\x1b[31m", "\x1b[0m", "\x1b[1;33m", "^[[0m", "\x1b[?25l"]
HUGE = ["9" * 400, "99999999999999999999.00", "1e400", "18446744073709551616", "-1", "nan", "0" * 60 + "1"]
RUNS = ["9", "x", "a.py:1 in ", "File a.py:1 in f ", "(", "[rank0]:", " ", "\t", "GiB ", "out of memory "]


@st.composite
def cosmetic(draw: st.DrawFn, text: str) -> str:
    """``text`` as a launcher or a terminal shows it, without changing what it says: CRLF or
    CR line ends, colour codes around any character, one launcher prefix on every line."""
    prefix = draw(st.sampled_from(["", *PREFIXES[:4]]))
    lines = [prefix + line for line in text.split("\n")]
    out = draw(st.sampled_from(["\n", "\r\n", "\r"])).join(lines)
    at = sorted(draw(st.lists(st.integers(0, len(out)), max_size=6)), reverse=True)
    for i in at:  # positions in the text itself: a terminal never writes a code inside a code
        out = out[:i] + draw(st.sampled_from(ANSI[:4])) + out[i:]
    return out


def wrapped(text: str, width: int, prefix: str = "") -> str:
    """``text`` as a terminal copy leaves it: every line cut every ``width`` characters, the
    launcher's ``prefix`` in front of each piece."""
    return "\n".join(prefix + line[i:i + width] for line in text.split("\n") for i in range(0, max(len(line), 1), width))


@st.composite
def mutated(draw: st.DrawFn, text: str) -> bytes:
    """``text`` damaged by one to five of the ways logs get damaged, as the bytes of a file."""
    data = text.encode("utf-8")
    for _ in range(draw(st.integers(1, 5))):
        data = draw(st.sampled_from(DAMAGE))(draw, data)[:MAX_LOG_BYTES]
    return data


MAX_LOG_BYTES = 4 * 1024**2
"""Damage stops growing a log here (a line of 200,000 characters repeated 5,000 times would
be 1 GB); the doctor reads the last 32 MiB of a file, so this bounds the test, not the doctor."""


def _at(draw: st.DrawFn, data: bytes) -> int:
    return draw(st.integers(0, len(data)))


def _flip(draw: st.DrawFn, data: bytes) -> bytes:
    if not data:
        return data
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 8))):
        i = draw(st.integers(0, len(out) - 1))
        out[i] ^= draw(st.integers(1, 255))
    return bytes(out)


def _truncate(draw: st.DrawFn, data: bytes) -> bytes:
    i = _at(draw, data)
    return data[:i] if draw(st.booleans()) else data[i:]


def _huge_number(draw: st.DrawFn, data: bytes) -> bytes:
    numbers = list(re.finditer(rb"\d+(?:\.\d+)?", data))
    if not numbers:
        return data
    m = draw(st.sampled_from(numbers))
    return data[:m.start()] + draw(st.sampled_from(HUGE)).encode() + data[m.end():]


def _repeat_line(draw: st.DrawFn, data: bytes) -> bytes:
    lines = data.split(b"\n")
    i = draw(st.integers(0, len(lines) - 1))
    times = draw(st.sampled_from([2, 10, 1000, 5000]))
    lines[i:i + 1] = [lines[i]] * max(2, min(times, MAX_LOG_BYTES // (len(lines[i]) + 1)))
    return b"\n".join(lines)


def _long_line(draw: st.DrawFn, data: bytes) -> bytes:
    run = draw(st.sampled_from(RUNS)).encode()
    length = draw(st.sampled_from([1000, 20_000, 100_000, 200_000]))
    filler = run * (length // len(run))
    i = _at(draw, data)
    joint = draw(st.sampled_from([b"", b"\n", b" "]))
    return data[:i] + joint + filler + joint + data[i:]


def _non_utf8(draw: st.DrawFn, data: bytes) -> bytes:
    i = _at(draw, data)
    junk = draw(st.sampled_from([b"\xff\xfe", b"\xc3", b"\xe2\x82", b"\x00", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"]))
    return data[:i] + junk + data[i:]


def _line_ends(draw: st.DrawFn, data: bytes) -> bytes:
    return data.replace(b"\n", draw(st.sampled_from([b"\r\n", b"\r", b"\n\n", b"\r\r\n"])))


def _ansi(draw: st.DrawFn, data: bytes) -> bytes:
    for _ in range(draw(st.integers(1, 10))):
        i = _at(draw, data)
        data = data[:i] + draw(st.sampled_from(ANSI)).encode() + data[i:]
    return data


def _prefixes(draw: st.DrawFn, data: bytes) -> bytes:
    return b"\n".join(draw(st.sampled_from(PREFIXES)).encode() + line for line in data.split(b"\n"))


def _interleave(draw: st.DrawFn, data: bytes) -> bytes:
    """Two ranks printing the same crash at once, their lines interleaved and sometimes split
    mid-line (one rank's write landing inside the other's)."""
    rng = draw(st.randoms(use_true_random=False))
    a = [b"[rank0]: " + line for line in data.split(b"\n")]
    b = [b"[rank1]: " + line for line in data.split(b"\n")]
    out = []
    a.reverse(), b.reverse()
    while a or b:
        source = a if not b or (a and rng.random() < 0.5) else b
        line = source.pop()
        if rng.random() < 0.1 and line:
            cut = rng.randint(0, len(line))
            source.append(line[cut:])
            line = line[:cut]
        out.append(line)
    return b"\n".join(out)


DAMAGE = [_flip, _truncate, _huge_number, _repeat_line, _long_line, _non_utf8, _line_ends, _ansi, _prefixes, _interleave]
