"""From log text to a `Diagnosis`: every recognised message, the primary one, the phase it
happened in, its cause and the fixes. Pure: text in, data out; never raises on content."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from itertools import islice

from . import parse_gpu as G
from . import parse_host as H
from .causes import explain
from .findings import SECONDARY, Finding, Kind
from .fixes import Fix
from .phase import PhaseGuess, frameworks, infer_phase

PARSERS: tuple[Callable[[str], Iterator[Finding]], ...] = (*G.PARSERS, *H.PARSERS)
MAX_FINDINGS_PER_PARSER = 1000
"""A log repeating one message more often than this (a crash loop) is read for its first ones;
it bounds the work on adversarial input."""
MERGE_LINES = 3
"""Same-kind findings this close with agreeing numbers are one message (a ``raise`` line and
its exception line, Ray's summary and its documentation pointer)."""

KIND_PHASE = {
    Kind.vllm_startup_free_memory: PhaseGuess("load", "engine_start", "vLLM's start-up memory check"),
    Kind.vllm_no_cache_blocks: PhaseGuess("load", "engine_start", "vLLM sizes its KV cache at start-up"),
    Kind.vllm_max_seq_len: PhaseGuess("load", "engine_start", "vLLM sizes its KV cache at start-up"),
    Kind.vllm_warmup_oom: PhaseGuess("load", "engine_start", "vLLM warms up its sampler at start-up"),
}
"""Messages that can only happen in one phase, whatever the frames say."""
KIND_DEFAULT_PHASE = {
    Kind.vllm_wake_up_oom: PhaseGuess("rollout", "wake_up", "vLLM's cumem allocator maps memory back at wake-up"),
}
"""Phases assumed when the frames do not tell."""


@dataclass(frozen=True)
class Diagnosis:
    findings: tuple[Finding, ...]
    primary: Finding | None
    phase: PhaseGuess
    frameworks: tuple[str, ...]
    cause: str
    fixes: tuple[Fix, ...]

    @property
    def recognised(self) -> bool:
        return self.primary is not None


def find_all(text: str) -> tuple[Finding, ...]:
    """Every recognised message, in log order, with duplicates of one message merged."""
    found = sorted((f for parse in PARSERS for f in islice(parse(text), MAX_FINDINGS_PER_PARSER)),
                   key=lambda f: (f.offset, f.kind.value))
    merged: list[Finding] = []
    line, counted = 1, 0
    for f in found:
        line += text.count("\n", counted, f.offset)
        counted = f.offset
        f = replace(f, line=line)
        prev = merged[-1] if merged else None
        if prev is not None and prev.kind == f.kind and f.line - prev.line <= MERGE_LINES and _agree(prev, f):
            merged[-1] = _combine(prev, f)
        else:
            merged.append(f)
    return tuple(merged)


def _agree(a: Finding, b: Finding) -> bool:
    same_numbers = all(a.numbers[k] == b.numbers[k] for k in a.numbers.keys() & b.numbers.keys())
    return same_numbers and all(a.labels[k] == b.labels[k] for k in a.labels.keys() & b.labels.keys())


def _combine(a: Finding, b: Finding) -> Finding:
    rich, poor = (a, b) if len(a.numbers) + len(a.labels) > len(b.numbers) + len(b.labels) else (b, a)
    return Finding(rich.kind, rich.variant, rich.offset, rich.line, rich.message,
                   {**poor.numbers, **rich.numbers}, {**poor.labels, **rich.labels})


def primary_finding(findings: tuple[Finding, ...]) -> Finding | None:
    """The first direct out-of-memory message; consequences (NCCL, dead Ray workers) only when
    nothing else was found."""
    direct = [f for f in findings if f.kind not in SECONDARY]
    return (direct or list(findings) or [None])[0]


def phase_of(text: str, f: Finding) -> PhaseGuess:
    if f.kind in KIND_PHASE:
        return KIND_PHASE[f.kind]
    guess = infer_phase(text, f.line)
    return guess if guess.phase is not None else KIND_DEFAULT_PHASE.get(f.kind, guess)


def diagnose(text: str) -> Diagnosis:
    findings = find_all(text)
    primary = primary_finding(findings)
    if primary is None:
        return Diagnosis(findings, None, PhaseGuess(None, None, None), frameworks(text), "", ())
    phase = phase_of(text, primary)
    cause, fixes = explain(primary, phase)
    return Diagnosis(findings, primary, phase, frameworks(text), cause, fixes)
