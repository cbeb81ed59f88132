"""`oomless doctor`: from a crash log to its cause, its phase and the knob changes that fix it.

Pure Python, no torch: `read_log` cleans a file into text, `diagnose` finds every known
out-of-memory message (PyTorch CUDA/HIP in all formats, vLLM's start-up and KV-cache checks and
cumem wake-up, NCCL, Ray's memory monitor, the Linux OOM killer, PyTorch's CPU allocator),
infers the phase from the traceback, and names the cause and the fixes. `reconcile` compares
the log with a plan of the same run.
"""

from __future__ import annotations

from .diagnose import Diagnosis, diagnose, find_all
from .findings import Finding, Kind
from .text import clean, read_log

__all__ = ["Diagnosis", "Finding", "Kind", "clean", "diagnose", "find_all", "read_log"]
