"""`oomless plan --run-log LOG`: completion lengths from an earlier run's own metrics.

Completion lengths come from the policy, not from the data: an earlier run of the same config
(a short trial, or the first steps of a run that later crashed) logs them every step. Read as
data, never executed:

- TRL and ms-swift print each logging step as a dict (``{'loss': ..., 'completions/mean_length':
  231.5, 'completions/max_length': 512.0, 'completions/clipped_ratio': 0.1, ...}``; TRL < 0.17
  `completion_length`, the mean); ms-swift also writes them to `logging.jsonl`; wandb's
  `wandb-history.jsonl` holds the same keys one JSON object a line;
- verl prints ``step:12 - ... - response_length/mean:239.1 - response_length/max:256.0 -
  response_length/clip_ratio:0.0 - prompt_length/mean:104.9 - ...`` (trainer/ppo/metric_utils.py
  `compute_data_metrics`); EasyR1 logs the same keys;
- OpenRLHF logs `response_length` (the batch's mean) among its training metrics.

What the plan takes (the spec's `lengths`), each the largest over the logged steps, since
completions grow over RL training: `mean_completion_tokens`, `completion_clip_fraction` (the share
cut at the limit), `mean_prompt_tokens` (verl's `prompt_length/mean`). A mean bounds the tokens of
a packed micro-batch (`planner/packed_risk.py`); the padded batch's longest member needs
percentiles (`oomless stats --completion-field` on a rollout dump).
"""

from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import safe_paths as SP
from ..errors import InputError

MAX_LOG_BYTES = 512 * 2**20
"""A log larger than this is read from its last 512 MiB only (the latest steps are the longest)."""
KEYS = {
    "completion_mean": ("completions/mean_length", "response_length/mean", "completion_length", "response_length"),
    "completion_max": ("completions/max_length", "response_length/max"),
    "clip": ("completions/clipped_ratio", "response_length/clip_ratio"),
    "prompt_mean": ("prompt_length/mean",),
}
"""Per quantity, the metric names that carry it, the most specific first."""
MAX_LINE_CHARS = 1_000_000
"""Longer lines are skipped unparsed: a metrics line is a few kilobytes, and a literal of
hundreds of megabytes would cost gigabytes to parse."""
VERL_PAIR = re.compile(r"(?:^|\s-\s)([\w./@()-]+):\s*(-?(?:\d+\.?\d*(?:e[-+]?\d+)?|nan|inf))", re.IGNORECASE)
"""verl's console pairs `key:value` joined by ' - '."""


@dataclass(frozen=True)
class RunLogStats:
    steps: int
    """Logged steps that carried a completion length."""
    completion_mean: float
    """The largest step mean."""
    completion_max: float | None
    """The longest completion any step logged."""
    clip: float | None
    """The largest share of completions cut at the limit in a step."""
    prompt_mean: float | None


def _pick(metrics: dict[str, Any], quantity: str) -> float | None:
    for key in KEYS[quantity]:
        value = metrics.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    return None


def _metrics(line: str) -> dict[str, Any] | None:
    """One line's metrics: a JSON or Python-literal dict, or verl's `key:value - key:value` pairs."""
    text = line.strip()
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        body = text[start:end + 1]
        for parse in (json.loads, ast.literal_eval):  # literal_eval reads literals only: nothing is run
            try:
                value = parse(body)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                continue
            if isinstance(value, dict):
                return value
    pairs = VERL_PAIR.findall(text)
    return {k: float(v) for k, v in pairs} if pairs else None


def read_run_log(path: str) -> RunLogStats:
    """The completion lengths ``path`` logged (module docstring)."""
    where = "--run-log"
    file = Path(path).expanduser()
    if not SP.is_file(file):
        raise InputError(where, f"{path!r} is not a readable file; give the log of an earlier run (console output, "
                         "ms-swift logging.jsonl, wandb-history.jsonl)")
    with open(file, "rb") as handle:
        size = handle.seek(0, 2)
        handle.seek(max(0, size - MAX_LOG_BYTES))
        text = handle.read().decode("utf-8", errors="replace")
    means, maxima, clips, prompts = [], [], [], []
    for line in text.splitlines():
        if "length" not in line or len(line) > MAX_LINE_CHARS:
            continue
        metrics = _metrics(line)
        if not metrics:
            continue
        mean = _pick(metrics, "completion_mean")
        if mean is None:
            continue
        means.append(mean)
        for values, quantity in ((maxima, "completion_max"), (clips, "clip"), (prompts, "prompt_mean")):
            value = _pick(metrics, quantity)
            if value is not None:
                values.append(value)
    if not means:
        raise InputError(where, f"{path}: no step logs a completion length; allowed: a log with "
                         f"{', '.join(KEYS['completion_mean'][:2])} (TRL, ms-swift, verl, EasyR1) or response_length (OpenRLHF)")
    if any(not 0 <= c <= 1 for c in clips) or any(m < 0 for m in means):
        raise InputError(where, f"{path}: a clip ratio outside [0, 1] or a negative length; not a metrics log this reads")
    return RunLogStats(len(means), max(means), max(maxima) if maxima else None, max(clips) if clips else None,
                       max(prompts) if prompts else None)


def ceil_tenth(value: float) -> float:
    """``value`` rounded up to a tenth: a mean used as an upper bound is never rounded down."""
    return math.ceil(value * 10 - 1e-9) / 10


def run_log_lengths(stats: RunLogStats, max_prompt: int, max_completion: int, notes: list[str]) -> dict[str, Any]:
    """The spec's `lengths` fields from ``stats`` for a plan with these limits, and why, in ``notes``."""
    out: dict[str, Any] = {"mean_completion_tokens": ceil_tenth(min(stats.completion_mean, max_completion))}
    longest = stats.completion_max
    if stats.clip is not None and stats.clip > 0 and longest is not None and longest < max_completion:
        raise InputError("--run-log", f"its completions were cut at {longest:g} tokens ({stats.clip:.0%} of a step at "
                         f"most), below this plan's max_completion_tokens {max_completion}: they say nothing about "
                         "longer ones; give a log of a run with the same completion limit")
    if stats.clip is not None and (longest is None or longest <= max_completion):
        out["completion_clip_fraction"] = stats.clip
    elif stats.clip is not None:
        notes.append(f"--run-log: completions up to {longest:g} tokens, above this plan's limit {max_completion}: "
                     "their clipped share is not this limit's, not used")
    if stats.prompt_mean is not None:
        out["mean_prompt_tokens"] = ceil_tenth(min(stats.prompt_mean, max_prompt))
    if longest is None and stats.clip is None:
        notes.append("--run-log: the log states neither its longest completion nor its clipped share, so its "
                     "completion limit is unknown: its mean is taken as that of a run with this plan's limit "
                     f"({max_completion}); a run with a lower limit logs a lower mean")
    notes.append(f"--run-log: {stats.steps} logged step(s); the largest step mean completion {stats.completion_mean:.1f} "
                 "tokens" + (f", clipped share up to {stats.clip:.1%}" if "completion_clip_fraction" in out else "")
                 + (f", mean prompt up to {stats.prompt_mean:.1f}" if stats.prompt_mean is not None else "")
                 + " (the largest of each over the steps: completions grow over training)")
    return out
