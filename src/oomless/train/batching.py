"""Micro-batches of one optimizer step and their loss weights; the out-of-memory re-split.

Pure integers: the trainer slices its tensors by these ranges. An optimizer step holds
`n` completions; micro-batches are consecutive slices of at most `micro_batch_size`. After an
out-of-memory error the micro-batch is halved, so the number of micro-batches (gradient
accumulation) doubles and the effective batch — the `n` completions — is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

TOKEN_SUM_LOSSES = frozenset({"dapo", "cispo", "vespo"})
"""TRL loss types that divide a token sum by the whole batch's token count
(`num_items_in_batch`): a micro-batch's loss needs no extra weight."""
SEQUENCE_MEAN_LOSSES = frozenset({"grpo", "dr_grpo", "sapo", "luspo"})
"""Loss types that average over the sequences of the micro-batch they are given."""
TOKEN_MEAN_LOSSES = frozenset({"bnpo"})
"""Loss types that average over the tokens of the micro-batch they are given."""


def micro_batch_ranges(num_samples: int, micro_batch_size: int) -> list[tuple[int, int]]:
    """[start, stop) of each micro-batch; every sample in exactly one."""
    assert num_samples >= 1 and micro_batch_size >= 1
    return [(s, min(s + micro_batch_size, num_samples)) for s in range(0, num_samples, micro_batch_size)]


def loss_weight(loss_type: str, chunk_sequences: int, batch_sequences: int, chunk_tokens: int, batch_tokens: int) -> float:
    """Factor that makes the micro-batch losses sum to the loss of the whole step, so the
    gradient is the same however the step is split. Source: trl 1.16.0
    `GRPOTrainer._compute_loss` (per loss type normalisation)."""
    if loss_type in TOKEN_SUM_LOSSES:
        return 1.0
    if loss_type in SEQUENCE_MEAN_LOSSES:
        return chunk_sequences / batch_sequences
    if loss_type in TOKEN_MEAN_LOSSES:
        return chunk_tokens / batch_tokens if batch_tokens else 0.0
    raise ValueError(f"unknown loss type {loss_type!r}")


@dataclass(frozen=True)
class Resplit:
    """An out-of-memory recovery: the same samples in twice as many micro-batches."""

    micro_batch_size_before: int
    micro_batch_size_after: int
    gradient_accumulation_before: int
    gradient_accumulation_after: int


def halve(micro_batch_size: int, num_samples: int) -> Resplit | None:
    """The re-split after an OOM, or None when the micro-batch is already one sample."""
    if micro_batch_size <= 1:
        return None
    after = micro_batch_size // 2
    return Resplit(
        micro_batch_size, after,
        len(micro_batch_ranges(num_samples, micro_batch_size)), len(micro_batch_ranges(num_samples, after)),
    )
