"""Parsers of host-memory errors: Ray's memory monitor, Ray workers that died silently, the
Linux OOM killer, and PyTorch's CPU allocator."""

from __future__ import annotations

import re
from collections.abc import Iterator

from .findings import Finding, Kind, make
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
#   exception: the head of the error a caller gets, "ray.exceptions.OutOfMemoryError: Task was
#     killed due to the node running low on memory." (node_manager.cc `worker_exit_message`; the
#     exception class is python/ray/exceptions.py `OutOfMemoryError`), or in the newest Ray
#     "N worker(s) were killed due to the node running low on memory."; it merges with the
#     details that follow it when they do.
# A pasted fragment ("Memory on the node ... was U GB / T GB (f), which exceeds the memory usage
# threshold of t") is read from "Memory on the node" when a usage or the threshold follows.

_RAY_NODE = re.compile(r"Memory on the node")
_RAY_KILLED = re.compile(r"(?:(?<!\d)(\d+) worker\(s\) were|Task was|[Ww]orkers? (?:was|were)) killed due to the node running low on memory")
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
        if not text.startswith(" (IP:", m.end()) and text.find("GB", m.end(), m.end() + 400) < 0:
            continue  # neither the node's address nor a usage in GB follows: not the monitor's text
        w = joined_window(text, m.start(), 1500, stop=m.group(0))
        form, worker, usage = _RAY_FORM.search(w), _RAY_WORKER.search(w), _RAY_USAGE.search(w)
        threshold = _RAY_THRESHOLD.search(w)
        if not (usage or threshold or w.startswith("Memory on the node (IP:")):
            continue
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
    for m in _RAY_KILLED.finditer(text):
        numbers = {"num_workers_killed": to_int(m.group(1)) if m.group(1) else None}
        yield make(Kind.ray_oom, "exception", text, m.start(), numbers)
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
# Source: linux mm/oom_kill.c. `__oom_kill_process` (>= 5.0): "%s: Killed process %d (%s)
# total-vm:%lukB, anon-rss:%lukB, file-rss:%lukB, shmem-rss:%lukB, UID:%u pgtables:%lukB
# oom_score_adj:%hd" with %s "Out of memory", "Out of memory (oom_kill_allocating_task)" or
# "Memory cgroup out of memory" (a cgroup limit: container, Slurm job); 4.x printed "%s: Kill
# process %d (%s) score %u or sacrifice child" then "Killed process %d (%s) total-vm:…" without a
# prefix. `dump_oom_summary` (>= 4.19): "oom-kill:constraint=%s,nodemask=%*pbl[,cpuset=…,
# mems_allowed=…][,oom_memcg=…|,global_oom][,task_memcg=…],task=%s,pid=%d,uid=%d"; `dump_header`:
# "%s invoked oom-killer: gfp_mask=%#x(%pGg), order=%d, oom_score_adj=%hd".

_KERNEL = re.compile(r"Kill(?:ed)? process (\d+) \(([^)\n]{0,64})\)")
_KERNEL_FIELDS = tuple(
    (key, re.compile(rf"{label}:\s*(\d+)\s*kB"))
    for key, label in (("total_vm_bytes", "total-vm"), ("anon_rss_bytes", "anon-rss"), ("file_rss_bytes", "file-rss"), ("shmem_rss_bytes", "shmem-rss"))
)
_KERNEL_SUMMARY = re.compile(r"oom-kill:constraint=(\w{1,40})")
_SUMMARY_TASK = re.compile(r",task=([^,\n]{0,64}),pid=\s*(\d+)")
_INVOKED = re.compile(r"invoked oom-killer: gfp_mask=")
KERNEL_REPORT_CHARS = 40_000
"""Characters after "invoked oom-killer" searched for the kill it leads to (the memory dump and
task table between them run to a few hundred lines)."""
NEAR_KILL_CHARS = 2_000
"""Characters before it searched for an earlier kill (a later OOM event beginning in a log cut short)."""


LINE_HEAD_CHARS = 300
"""Characters before a match read as its line's head (a prefix, "Out of memory:", a command)."""


def _line_head(text: str, offset: int) -> str:
    """The text from the start of the line to ``offset``, at most `LINE_HEAD_CHARS` of it (a
    bounded look back keeps many matches on one very long line linear)."""
    low = max(0, offset - LINE_HEAD_CHARS)
    return text[text.rfind("\n", low, offset) + 1 if text.rfind("\n", low, offset) >= 0 else low:offset]


def kernel_oom_kill(text: str) -> Iterator[Finding]:
    if "process " in text:
        for m in _KERNEL.finditer(text):
            head = _line_head(text, m.start())
            w = joined_window(text, m.end(), 700, stop="Kill")
            if "ut of memory" in head:
                variant = "cgroup" if "Memory cgroup out of memory" in head else "global"
            elif m.group(0).startswith("Killed") and "total-vm:" in w[:40]:
                variant = "killed_process"
            else:
                continue
            start = m.start() - len(head) + max(head.find("Memory cgroup"), head.rfind("Out of memory"), head.rfind("out of memory"), 0)
            numbers: dict = {"pid": to_int(m.group(1))}
            for key, pattern in _KERNEL_FIELDS:
                found = pattern.search(w)
                numbers[key] = to_bytes(found.group(1), "kB") if found else None
            yield make(Kind.kernel_oom_kill, variant, text, start, numbers, {"process_name": m.group(2)})
    if "oom-kill" not in text:
        return
    for m in _KERNEL_SUMMARY.finditer(text):
        rest = text[m.end():m.end() + 1000].split("\n", 1)[0]
        task = _SUMMARY_TASK.search(rest)
        labels = {"constraint": m.group(1), **({"process_name": task.group(1)} if task else {})}
        if "global_oom" in rest or "oom_memcg=" in rest:
            labels["scope"] = "global" if "global_oom" in rest else "cgroup"
        yield make(Kind.kernel_oom_kill, "summary", text, m.start(), {"pid": to_int(task.group(2)) if task else None}, labels)
    for m in _INVOKED.finditer(text):
        near = max(0, m.start() - NEAR_KILL_CHARS), m.end() + KERNEL_REPORT_CHARS
        if text.find("Killed process", *near) >= 0 or text.find("Kill process", *near) >= 0:
            continue  # the kill is the finding (this one's, or an earlier one's the line would merge into)
        invoker = _line_head(text, m.start()).rstrip().rsplit(" ", 1)[-1]
        yield make(Kind.kernel_oom_kill, "invoked", text, m.start(), {}, {"invoking_process": invoker[-64:]})


# --- SIGKILL as shells and launchers report it ----------------------------------------------------
# The kernel's kill reaches a user's log only as the parent's report of signal 9 (exit status
# 128 + 9 = 137 from a shell, -9 from Python's subprocess). Sources:
#   bash jobs.c (`notify_of_job_status`, `pretty_print_job`, bash 5.3): a non-interactive shell
#     prints "%s: line %d: " then "%5ld Killed" padded to LONGEST_SIGNAL_DESC and the command; an
#     interactive one "Killed" alone (strsignal(SIGKILL)) or "[%d]%c  Killed  command" for a job.
#   CPython Lib/subprocess.py (`CalledProcessError.__str__`): "Command '…' died with
#     <Signals.SIGKILL: 9>." and "… returned non-zero exit status 137." (accelerate launch raises it).
#   torch/distributed/elastic/multiprocessing/errors/__init__.py (torch 2.x): "exitcode  : -9
#     (pid: N)", "Signal 9 (SIGKILL) received by PID N"; api.py: "failed (exitcode: -9)
#     local_rank: R (pid: N) of binary: …"; torch/multiprocessing/spawn.py: "process R
#     terminated with signal SIGKILL".
#   deepspeed/launcher/launch.py (0.16): "[…] exits with return code = -9".
#   zsh Src/jobs.c (`printjob`; sigmsg "killed" from Src/signames2.awk; zsh at 2564174): "zsh: "
#     then "killed" padded and the command for the current job, "[%ld]  %c killed  command" else.

_SIGNAL_FORMS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("torchrun", re.compile(r"failed \(exitcode: -9\) local_rank: (?P<local_rank>\d+) \(pid: (?P<pid>\d+)\)")),
    ("torchrun", re.compile(r"exitcode\s*:\s*-9\b(?:\s*\(pid:\s*(?P<pid>\d+)\))?")),
    ("torchrun", re.compile(r"Signal 9 \(SIGKILL\) received by PID (?P<pid>\d+)")),
    ("torch_spawn", re.compile(r"process (?P<local_rank>\d+) terminated with signal SIGKILL")),
    ("subprocess", re.compile(r"died with <Signals\.SIGKILL: 9>")),
    ("exit_137", re.compile(r"returned non-zero exit status 137\b")),
    ("exit_137", re.compile(r"exit (?:code|status)\s*[=:]?\s*137\b")),
    ("exit_137", re.compile(r"exited with (?:code|status) 137\b")),
    ("exit_137", re.compile(r"Exit Code:\s*137\b")),
    ("deepspeed_launcher", re.compile(r"exits with return code = (?:-9|137)\b")),
)
_SHELL = re.compile(r"line (\d+):[ \t]+(\d+) Killed[ \t]+([^\n]{0,300})")
_SHELL_JOB = re.compile(r"^\[\d+\][+\- ][ \t]+Killed[ \t]+([^\n]{0,300})")
_ZSH = (("zsh", re.compile(r"zsh: killed[ \t]+([^\n]{0,300})")),
        ("zsh_job", re.compile(r"\[\d{1,6}\]  [+\- ] killed[ \t]+([^\n]{0,300})")))
_COMMAND = re.compile(r"Command '([^\n]{0,500})' died with")
MAX_KILLED_WORDS = 5_000
"""Occurrences of the word "Killed" examined per log (a dmesg dump repeats it)."""


def _shell_killed(text: str) -> Iterator[Finding]:
    at, examined_until = text.find("Killed"), -1
    for _ in range(MAX_KILLED_WORDS):
        if at < 0:
            return
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        if start > examined_until:
            examined_until = end
            line = text[start:end]
            core = strip_prefix(line).strip()
            shell, job = _SHELL.search(line), _SHELL_JOB.match(core)
            if shell:
                script = line[:shell.start()].rstrip().rstrip(":").rsplit(" ", 1)[-1]
                numbers = {"script_line": to_int(shell.group(1)), "pid": to_int(shell.group(2))}
                labels = {"command": shell.group(3).strip(), **({"script": script} if script else {})}
                yield make(Kind.process_killed, "shell", text, start, numbers, labels)
            elif job:
                yield make(Kind.process_killed, "shell_job", text, start, {}, {"command": job.group(1).strip()})
            elif core == "Killed":
                yield make(Kind.process_killed, "shell_bare", text, start, {})
        at = text.find("Killed", end)


def process_killed(text: str) -> Iterator[Finding]:
    if "Killed" in text:
        yield from _shell_killed(text)
    if " killed" in text:
        for variant, pattern in _ZSH:
            for m in pattern.finditer(text):
                yield make(Kind.process_killed, variant, text, m.start(), {}, {"command": m.group(1).strip()})
    for variant, pattern in _SIGNAL_FORMS:
        for m in pattern.finditer(text):
            groups = m.groupdict()
            numbers = {k: to_int(groups[k]) if groups.get(k) else None for k in ("pid", "local_rank")}
            labels = {}
            if variant == "subprocess":
                command = _COMMAND.search(_line_head(text, m.end()))
                labels = {"command": command.group(1)} if command else {}
            yield make(Kind.process_killed, variant, text, m.start(), numbers, labels)


# --- PyTorch CPU allocator -----------------------------------------------------------------------
# Source: c10/core/impl/alloc_cpu.cpp: "DefaultCPUAllocator: can't allocate memory: you tried to
# allocate N bytes. Error code 12 (Cannot allocate memory)"; Windows: "not enough memory".

_HOST_ALLOC = re.compile(r"DefaultCPUAllocator: (?:can't allocate memory|not enough memory): you tried to allocate (\d+) bytes")


def host_alloc_oom(text: str) -> Iterator[Finding]:
    """Found from the anchor and read in a joined window, so a terminal's wrap inside the
    message (``you tried to alloc`` / ``ate 123 bytes``) changes nothing."""
    start = text.find("DefaultCPUAllocator:")
    while start >= 0:
        # the joined window, else the raw text (a number longer than the window)
        m = _HOST_ALLOC.match(joined_window(text, start, 400, stop="DefaultCPUAllocator:")) or _HOST_ALLOC.match(text, start)
        if m:
            yield make(Kind.host_alloc_oom, "default_cpu_allocator", text, start, {"requested_bytes": to_int(m.group(1))})
        start = text.find("DefaultCPUAllocator:", start + 1)


PARSERS = (ray_oom, ray_worker_died, kernel_oom_kill, host_alloc_oom, process_killed)
"""Every host parser, for `diagnose.find_all`."""
