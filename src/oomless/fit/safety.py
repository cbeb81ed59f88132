"""Memory-safety settings of a run, and which of them a proposed configuration lowers.

After a crash (`oomless doctor`) the run that crashed used more memory than its plan says, by a
measured gap. A fix must not take the riskier direction on a setting that protects against
such a gap — recomputation off, a lower ZeRO stage, an offload off, a lighter engine sleep, a
larger vLLM budget or micro-batch — unless its own plan still fits with the gap covered on top
of the usual margin; then it says so (`Choice.lowers_safety`). `fit` applies this when
`FitOptions.keep_safety_of` is given.

A setting is compared only where it means the same in both runs: a sleep level, a rollout
offload and a utilization only between two engines colocated with the trainer (an engine on
GPUs of its own takes its budget from nobody), max_num_seqs and CUDA graphs between two vLLM
engines; a field left to its default (`None`) in either run is not compared.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ..spec.run import LogitsMode, RolloutEngine, RunSpec, Strategy
from .overrides import apply
from .space import Factor

STRATEGY_SHARDING = {Strategy.ddp: 0, Strategy.zero1: 1, Strategy.zero2: 2, Strategy.zero3: 3, Strategy.fsdp: 3}
"""How much of the model states a strategy shards: nothing (DDP), optimizer states (ZeRO-1),
+ gradients (ZeRO-2), + parameters (ZeRO-3, FSDP full shard). Source: ZeRO paper
(arXiv 1910.02054, §5 "Pos, Pos+g, Pos+g+p"); FSDP FULL_SHARD shards all three."""
LOGITS_FOOTPRINT = {LogitsMode.fp32_all_positions: -1, LogitsMode.bf16_all_positions: -1, LogitsMode.full_fp32: 0,
                    LogitsMode.bf16_flash_ce_entropy: -1, LogitsMode.bf16_flash_ce: 1,
                    LogitsMode.full_bf16: 1, LogitsMode.chunked: 2, LogitsMode.chunked_head: 3, LogitsMode.fused: 3,
                    LogitsMode.fused_token_chunks: 3}
"""Ordering of the logits kernels by what they keep (higher keeps less): every position's
logits (OpenRLHF in fp32, ORZ in bf16 with an entropy pass, verl with entropy), [tokens, vocab] in fp32,
in bf16 (verl's in-place cross-entropy among them), bf16 once with fp32 chunks, never whole (tiles, or one sequence at a time; these two
are not ordered against each other). Source: `spec.enums.LogitsMode` docs."""


@dataclass(frozen=True)
class Setting:
    name: str
    """The spec field, as `fit` names changes."""
    value: Callable[[RunSpec], Any]
    """Its value in a run, or None where it does not apply."""
    safer: Callable[[Any, Any], bool]
    """safer(a, b): a protects more than b."""


def _colocated(spec: RunSpec) -> bool:
    return spec.rollout.engine == RolloutEngine.vllm_colocate


def _vllm(spec: RunSpec) -> bool:
    return spec.rollout.engine != RolloutEngine.hf


def _more(a: Any, b: Any) -> bool:
    return a > b


def _less(a: Any, b: Any) -> bool:
    return a < b


SETTINGS = (
    Setting("gradient_checkpointing", lambda s: s.gradient_checkpointing, _more),
    Setting("distribution.strategy", lambda s: STRATEGY_SHARDING[s.distribution.strategy], _more),
    Setting("distribution.offload_params", lambda s: s.distribution.offload_params, _more),
    Setting("distribution.offload_optimizer", lambda s: s.distribution.offload_optimizer, _more),
    Setting("distribution.offload_reference_params", lambda s: s.distribution.offload_reference_params, _more),
    Setting("rollout.offload_model", lambda s: s.rollout.offload_model if _colocated(s) else None, _more),
    Setting("rollout.offload_optimizer", lambda s: s.rollout.offload_optimizer if _colocated(s) else None, _more),
    Setting("rollout.sleep_level", lambda s: s.rollout.sleep_level if _colocated(s) else None, _more),
    Setting("rollout.gpu_memory_utilization", lambda s: s.rollout.gpu_memory_utilization if _colocated(s) else None, _less),
    Setting("rollout.max_num_seqs", lambda s: s.rollout.max_num_seqs if _vllm(s) else None, _less),
    Setting("rollout.enforce_eager", lambda s: s.rollout.enforce_eager if _vllm(s) else None, _more),
    Setting("batch.micro_batch_size", lambda s: s.batch.micro_batch_size, _less),
    Setting("batch.logprob_micro_batch_size", lambda s: s.batch.logprob_micro_batch_size, _less),
    Setting("batch.max_tokens_per_gpu", lambda s: s.batch.max_tokens_per_gpu, _less),
    Setting("batch.logprob_max_tokens_per_gpu", lambda s: s.batch.logprob_max_tokens_per_gpu, _less),
    Setting("logits", lambda s: LOGITS_FOOTPRINT[s.logits], _more),
)


def _shown(spec: RunSpec, name: str) -> Any:
    node: Any = spec
    for part in name.split("."):
        node = getattr(node, part)
    value = getattr(node, "value", node)
    return str(value).lower() if isinstance(value, bool) else value


def lowered_settings(kept: RunSpec, proposed: RunSpec) -> tuple[str, ...]:
    """Each safety setting ``kept`` had that ``proposed`` lowers, as "field old → new"."""
    out = []
    for setting in SETTINGS:
        old, new = setting.value(kept), setting.value(proposed)
        if old is None or new is None:
            continue
        if setting.safer(old, new):
            out.append(f"{setting.name} {_shown(kept, setting.name)} → {_shown(proposed, setting.name)}")
    return tuple(out)


def mark_lowering(factors: tuple[Factor, ...], kept: RunSpec, base: RunSpec) -> tuple[Factor, ...]:
    """The factors with every option that lowers a safety setting of ``kept`` (among the fields
    it sets) marked, so the search ranks it after those that do not."""
    out = []
    for factor in factors:
        options = []
        for option in factor.options:
            lowered = lowered_settings(kept, apply(base, option.overrides))
            hit = any(item.split(" ")[0] in option.overrides for item in lowered)
            options.append(replace(option, lowers_safety=hit))
        out.append(replace(factor, options=tuple(options)))
    return tuple(out)
