"""Reading a crash log and cleaning it into text the parsers can trust.

Logs arrive as anything: bytes that are not UTF-8, ANSI colours (real escapes or the ``^[[31m``
a terminal copy leaves), Markdown emphasis pasted from an issue, lines wrapped by a terminal in
the middle of a word, prefixes that launchers add to every line (``[rank3]:``, ``(WorkerDict
pid=12)``). Nothing here raises on content; only an unreadable file is an error.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import InputError

MAX_LOG_BYTES = 32 * 1024**2
"""Logs longer than this are read from their end: the error that ended a run is at the bottom."""

_ANSI = re.compile(r"(?:\x1b|\^\[)\[[0-9;?]*[A-Za-z]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_LINE_PREFIX = re.compile(
    r"^(?:\s*\[rank\d+\]:\s?"
    r"|\s*\([\w.:-]+(?: \w+=\w+)* pid=\d+(?:, ip=[\d.]+)?[^)\n]{0,120}\)\s?"
    r"|\s*\((?:raylet|gcs_server|autoscaler|monitor|dashboard_agent)[^)\n]{0,80}\)\s?"
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[\w./-]+:\d+\]\s?"
    r"|\[\s*\d+\.\d+\]\s?"
    r"|E {3,}|\+ {0,8})"
)
"""Prefixes launchers and loggers put on every line: torchrun's ``[rank0]:``, Ray's ``(Actor
pid=N, ip=…)`` and ``(raylet)``, vLLM's ``(VllmWorker rank=1 pid=N)`` and its logger's
``ERROR 11-27 02:44:56 [core.py:700]`` (vllm/logging_utils/formatter.py repeats it on every line
of a multi-line message), dmesg's ``[12345.678901]``, pytest's ``E   ``, a diff's ``+``."""
MAX_STACKED_PREFIXES = 4
"""Prefixes stack (``(WorkerDict pid=7) [rank3]: ERROR … [core.py:70]``); this many are removed."""


def read_log(path: str | Path) -> str:
    """The log at ``path`` (``-`` reads standard input) as cleaned text; the tail if it is huge."""
    path = Path(path)
    try:
        if str(path) == "-":
            import sys

            data = sys.stdin.buffer.read()[-MAX_LOG_BYTES:]
        else:
            with path.open("rb") as f:
                size = f.seek(0, 2)
                f.seek(max(0, size - MAX_LOG_BYTES))
                data = f.read(MAX_LOG_BYTES)
    except FileNotFoundError:
        raise InputError("LOG", f"no such file: {path}") from None
    except IsADirectoryError:
        raise InputError("LOG", f"{path} is a directory, not a log file") from None
    except OSError as err:
        raise InputError("LOG", f"cannot read {path}: {err.strerror or err}") from None
    return clean(data.decode("utf-8", errors="replace"))


def clean(text: str) -> str:
    """Unify line ends, drop colour codes, control characters and Markdown bold markers."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _ANSI.sub("", text)
    text = _CONTROL.sub("", text)
    return text.replace("**", "")


def strip_prefix(line: str) -> str:
    """A line without the launchers' and loggers' per-line prefixes."""
    for _ in range(MAX_STACKED_PREFIXES):
        m = _LINE_PREFIX.match(line)
        if m is None or not m.group(0):
            break
        line = line[m.end():]
    return line


def window_end(text: str, start: int, length: int, stop: str | None = None) -> int:
    """Where `joined_window`'s window ends in ``text``."""
    end = min(len(text), start + length)
    if stop:
        again = text.find(stop, start + len(stop), end)
        if again > 0:
            end = again
    return end


def joined_window(text: str, start: int, length: int, stop: str | None = None) -> str:
    """``length`` characters from ``start`` as one line: prefixes of continuation lines removed
    and line breaks deleted, which re-joins words a terminal wrapped (``memor`` / ``y``).
    The window ends early where ``stop`` occurs again (the next message of the same kind)."""
    lines = text[start:window_end(text, start, length, stop)].split("\n")
    return lines[0] + "".join(strip_prefix(line) for line in lines[1:])
