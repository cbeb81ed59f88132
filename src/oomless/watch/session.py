"""Run (or attach to) a job and watch its memory: per-step, per-phase peaks written to the
telemetry file, a live line per step, and a warning when a growing series will cross its
limit before the run ends.

Nothing of the job's is changed: its output is passed through unchanged, its exit code is
returned. With `on_risk`, the first predicted crossing sends the job one signal: "checkpoint"
sends SIGUSR1 (the drop-in callback, `oomless.watch.callback`, saves a checkpoint on it;
frameworks without a handler ignore it only if they set one — Python's default for SIGUSR1
ends the process, so use it with the callback), "stop" sends SIGINT (KeyboardInterrupt in
Python: HF Trainer and Ray jobs stop as after Ctrl-C).
"""

from __future__ import annotations

import codecs
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from ..errors import InputError
from ..telemetry import append_records
from .forecast import Crossing, describe, forecast
from .logs import read_line
from .sample import GpuProbe, HostProbe, Sampler
from .steps import Limit, StepBook

TELEMETRY_FILE = "telemetry.jsonl"
LOG_FILE = "job.log"
"""The job's output, as it printed it (what `oomless doctor RUN_DIR` reads beside the telemetry)."""
CHUNK_BYTES = 65536
RISK_SIGNALS = {"checkpoint": signal.SIGUSR1, "stop": signal.SIGINT}


@dataclass
class WatchOptions:
    out_dir: Path
    interval_s: float = 1.0
    host_limit_bytes: int | None = None
    """A limit on the watched process tree's memory (`--host-limit`); else the node's."""
    node_limit: Limit | None = None
    """The node's limit (Ray's threshold, a cgroup's, the RAM) when no tree limit is given."""
    gpu_limit_bytes: int | None = None
    last_step: int | None = None
    on_risk: str | None = None
    pss: bool = False
    planned: dict[str, int] = field(default_factory=dict)
    planned_host: dict[str, int] = field(default_factory=dict)


@dataclass
class WatchResult:
    exit_code: int | None
    steps: int
    warnings: list[str]
    crossings: list[Crossing]
    notes: list[str]


class _Watch:
    def __init__(self, options: WatchOptions, sampler: Sampler, say: Callable[[str], None],
                 send: Callable[[signal.Signals], None]) -> None:
        self.o, self.sampler, self.say, self.send = options, sampler, say, send
        self.book = StepBook(node_series=options.host_limit_bytes is None, planned=options.planned,
                             planned_host=options.planned_host)
        self.lines: queue.Queue[tuple[float, str]] = queue.Queue()
        self.last_step = options.last_step
        self.warned: dict[str, int] = {}
        self.warnings: list[str] = []
        self.crossings: list[Crossing] = []
        self.signalled = False
        self.path = options.out_dir / TELEMETRY_FILE

    def announce(self, gpu_note: str) -> None:
        """What is watched, against what: one line each."""
        from ..units import format_bytes

        self.say(f"[oomless watch] {gpu_note}")
        host = self.host_limit()
        if host is not None:
            self.say(f"[oomless watch] {host.what} limit {format_bytes(host.limit_bytes)} ({host.source})")
        if not self.o.planned and not self.o.planned_host:
            self.say("[oomless watch] no --spec: measuring and forecasting, no plan to compare with")

    def host_limit(self) -> Limit | None:
        if self.o.host_limit_bytes is not None:
            return Limit("host (process tree)", self.o.host_limit_bytes, "--host-limit")
        return self.o.node_limit

    def tick(self, wait_s: float = 0.0) -> None:
        """Apply the log lines that arrive within ``wait_s``, sampling as each step or phase
        mark is read (a phase shorter than the sampling interval still gets its sample), then
        sample: a sample taken after a step line belongs to the new step (taking it first would
        charge the old step with memory the new one has already allocated)."""
        self.drain(wait_s, sample_marks=True)
        self.book.add(self.sampler.sample())

    def drain(self, wait_s: float = 0.0, sample_marks: bool = False) -> None:
        """Apply the log lines read since the last call (steps and phases), waiting up to
        ``wait_s`` for more; with ``sample_marks``, sample right after each mark."""
        deadline = time.monotonic() + wait_s
        while True:
            left = deadline - time.monotonic()
            try:
                when, line = self.lines.get(timeout=left) if left > 0 else self.lines.get_nowait()
            except queue.Empty:
                return
            event = read_line(line)
            if event is None:
                continue
            if event.total_steps:
                self.last_step = self.o.last_step or event.total_steps
            records = self.book.enter(event.step, event.phase, when)
            if records:
                self.finish_step(records)
            if sample_marks and (event.step is not None or event.phase is not None):
                self.book.add(self.sampler.sample())

    def finish_step(self, records: list[dict[str, Any]]) -> None:
        self.write(records)
        step = records[0]["step"]
        self.say(self.status(step, records))
        for crossing in self.forecasts():
            previous = self.warned.get(crossing.what)
            if previous is not None and abs(previous - crossing.step) <= max(2, previous // 10):
                continue
            self.warned[crossing.what] = crossing.step
            self.crossings.append(crossing)
            message = f"warning: {describe(crossing)}"
            self.warnings.append(message)
            self.say(message)
            if self.o.on_risk and not self.signalled:
                self.send(RISK_SIGNALS[self.o.on_risk])
                self.signalled = True
                self.say(f"sent {RISK_SIGNALS[self.o.on_risk].name} to the job (--on-risk {self.o.on_risk})")

    def write(self, records: list[dict[str, Any]]) -> None:
        """Append a step's records, each with the limit its peak is held against."""
        limit = self.record_limit()
        append_records(self.path, [{**r, "limit_bytes": limit.get(r["device"])} for r in records])

    def record_limit(self) -> dict[str, int | None]:
        """The limit a record's ``peak_bytes`` is held against, per device: the tree's
        (`--host-limit`; a node limit is not the tree's), the GPUs' smallest."""
        totals = getattr(self.sampler.gpu, "totals", ())
        gpu = self.o.gpu_limit_bytes or (min(totals) if totals else None)
        return {"host": self.o.host_limit_bytes, "cuda": gpu}

    def forecasts(self) -> list[Crossing]:
        out = []
        per_step = self.book.seconds_per_step()
        host = self.host_limit()
        if host is not None:
            c = forecast(host.what, self.book.host_peaks, host.limit_bytes, self.last_step, per_step)
            out.append(c)
        totals = getattr(self.sampler.gpu, "totals", ())
        for i, peaks in enumerate(self.book.gpu_peaks):
            limit = self.o.gpu_limit_bytes or (totals[i] if i < len(totals) else None)
            if limit:
                out.append(forecast(f"gpu{i}", peaks, limit, self.last_step, per_step))
        return [c for c in out if c is not None]

    def status(self, step: int, records: list[dict[str, Any]]) -> str:
        from ..units import format_bytes

        parts = []
        for r in records:
            planned = f" (plan {format_bytes(r['planned_bytes'])})" if r.get("planned_bytes") else ""
            parts.append(f"{r['phase']} {format_bytes(r['peak_bytes'])}{planned}")
        label = "node" if self.book.node_series else "tree"
        host = max((r["host_used_bytes"] if self.book.node_series else r["rss_bytes"]) or 0 for r in records)
        of = f"/{self.last_step}" if self.last_step else ""
        return f"[oomless watch] step {step}{of}: " + ", ".join(parts) + f"; host {label} {format_bytes(host)}"


def _pump(stream: BinaryIO, sink: TextIO, log: BinaryIO, lines: queue.Queue, clock: Callable[[], float]) -> None:
    """Copy the job's output unchanged to ``sink`` and ``log``; queue its lines (split at
    ``\\n`` and at ``\\r``, which progress bars redraw with) for the step and phase patterns."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending = b""
    while chunk := stream.read1(CHUNK_BYTES):
        if hasattr(sink, "buffer"):
            sink.flush()
            sink.buffer.write(chunk)
            sink.buffer.flush()
        else:
            sink.write(decoder.decode(chunk))
            sink.flush()
        log.write(chunk)
        log.flush()
        *done, pending = re.split(rb"[\r\n]", pending + chunk)
        now = clock()
        for line in done:
            if line:
                lines.put((now, line.decode("utf-8", errors="replace")))
        pending = pending[-CHUNK_BYTES:]  # a line without an end for ever: keep its tail only
    if pending:
        lines.put((clock(), pending.decode("utf-8", errors="replace")))
    stream.close()


def run_job(command: Sequence[str], options: WatchOptions, say: Callable[[str], None],
            sink: TextIO | None = None) -> WatchResult:
    """Start ``command``, watch it until it exits, return its exit code and what was seen."""
    try:
        job = subprocess.Popen(list(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except FileNotFoundError:
        raise InputError("COMMAND", f"{command[0]!r} not found; give a program on PATH or a path to one") from None
    except PermissionError:
        raise InputError("COMMAND", f"{command[0]!r} is not executable") from None
    gpu, note = GpuProbe.open()
    def send(sig: signal.Signals) -> None:
        if job.poll() is None:
            job.send_signal(sig)

    watch = _Watch(options, Sampler(HostProbe(job.pid, options.pss), gpu), say, send)
    watch.announce(note)
    watch.book.add(watch.sampler.sample())  # before any line is read: the load phase has a sample
    options.out_dir.mkdir(parents=True, exist_ok=True)
    log = (options.out_dir / LOG_FILE).open("wb")
    reader = threading.Thread(target=_pump, args=(job.stdout, sink or sys.stdout, log, watch.lines, time.monotonic), daemon=True)
    reader.start()
    try:
        while job.poll() is None:
            watch.tick(wait_s=options.interval_s)
    except KeyboardInterrupt:
        job.send_signal(signal.SIGINT)
        job.wait()
    reader.join(timeout=5)
    log.close()
    watch.drain()  # the job's last lines, after its memory is gone: nothing left to sample
    watch.write(watch.book.close(time.monotonic()))
    return WatchResult(job.returncode, len(watch.book.host_peaks), watch.warnings, watch.crossings, [note])


def attach(pid: int, log: Path | None, options: WatchOptions, say: Callable[[str], None]) -> WatchResult:
    """Watch a running process (and its children) until it exits; steps from ``log`` if given."""
    import psutil

    try:
        host = HostProbe(pid, options.pss)
    except psutil.NoSuchProcess:
        raise InputError("--pid", f"no process {pid} (it has exited, or never ran)") from None
    except psutil.AccessDenied:
        raise InputError("--pid", f"process {pid} belongs to another user; run as that user") from None
    if log is not None and not log.is_file():
        raise InputError("--log", f"no such file: {log}")
    gpu, note = GpuProbe.open()
    watch = _Watch(options, Sampler(host, gpu), say, lambda sig: _kill(pid, sig))
    watch.announce(note)
    follow = _Follower(log) if log is not None else None
    try:
        while _alive(host.root):
            if follow is not None:
                for line in follow.new_lines():
                    watch.lines.put((time.monotonic(), line))
            try:
                watch.tick()
            except psutil.NoSuchProcess:
                break
            time.sleep(options.interval_s)
    except KeyboardInterrupt:
        pass
    finally:
        if follow is not None:
            for line in follow.new_lines(final=True):
                watch.lines.put((time.monotonic(), line))
            follow.close()
    watch.drain()
    watch.write(watch.book.close(time.monotonic()))
    return WatchResult(None, len(watch.book.host_peaks), watch.warnings, watch.crossings, [note])


def _alive(process: Any) -> bool:
    """Running and not a zombie (an exited child its parent has not reaped yet)."""
    import psutil

    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _kill(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass  # gone since the last sample


class _Follower:
    """New complete lines of a growing log file (`tail -f`), from its end at the start."""

    def __init__(self, path: Path) -> None:
        self._file = path.open("rb")
        self._file.seek(0, os.SEEK_END)
        self._pending = b""

    def new_lines(self, final: bool = False) -> list[str]:
        *done, self._pending = re.split(rb"[\r\n]", self._pending + self._file.read())
        if final and self._pending:
            done, self._pending = [*done, self._pending], b""
        self._pending = self._pending[-CHUNK_BYTES:]
        return [line.decode("utf-8", errors="replace") for line in done if line]

    def close(self) -> None:
        self._file.close()
