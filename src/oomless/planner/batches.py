"""Micro-batch geometry: the tokens one training or log-prob forward holds on one GPU.

Three ways a framework forms micro-batches, each with the worst batch its limits allow:

- padded (default): ``b`` sequences, each padded to the longest member (TRL, ms-swift, VLM-R1
  without padding_free). A micro-batch costs ``b × longest``.
- packed (`batch.padding_free`): the ``b`` sequences concatenated into one row, the attention
  kernel told the boundaries (flash-attention varlen, `cu_seqlens`); it costs its real tokens.
  Source: verl `dp_actor._forward_micro_batch` (`unpad_input`, one (1, total_nnz) row);
  ms-swift `--padding_free`; OpenRLHF `--packing_samples`. A packed row cannot be sliced to
  the completions, so the LM head computes every packed position (verl: `output.logits` over
  total_nnz, then `logprobs_from_logits`).
- token budget (`batch.max_tokens_per_gpu`): the sequences of a step are split into
  k = ceil(total tokens / budget) micro-batches (OpenRLHF: at least first-fit's count),
  balanced by Karmarkar-Karp. Source: verl and EasyR1 `utils/seqlen_balancing.py`
  (`rearrange_micro_batches`, `get_seqlen_balanced_partitions`); OpenRLHF
  `utils/seqlen_balancing.py` (`get_minimum_num_micro_batch_size`) + `replay_buffer.py`.
  The budget is not a cap: see `max_budget_micro_batch_tokens`.

Sequence parallelism (Ulysses) splits every sequence's tokens over ``sp`` GPUs: the group
holds the micro-batch, each GPU ``1/sp`` of its tokens. verl multiplies the per-GPU budget by
sp for the group (`dp_actor.py`: `ppo_max_token_len_per_gpu * ulysses_sequence_parallel_size`);
OpenRLHF by ring_attn_size. Assumes: with sp > 1, `micro_batch_size` counts the sequences of one
SP group (verl's per-DP-rank micro-batch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

WORKLOAD_TOKEN_COEFFICIENT = 24576
"""verl `calculate_workload`: a sequence of s tokens weighs 24576·s + s² (12h² per token and
2h per token pair for h = 4096, divided by 2h). Source: verl/utils/seqlen_balancing.py (PR #3605)."""


@dataclass(frozen=True)
class DataLengths:
    """What the sequences of a batch hold: prompt text, completion, image area and count."""

    prompt_tokens: int
    completion_tokens: int
    image_pixels: int | None
    """Area of each image after the processor's resize; None: the limit (`vision.max_pixels`)."""
    images_per_prompt: int


@dataclass(frozen=True)
class MicroBatch:
    """One forward on one GPU: ``num_rows`` rows of ``row_len`` tokens; the LM head computes
    ``logit_rows + 1`` positions per row; the vision tower encodes the images of
    ``num_sequences`` sequences."""

    num_rows: int
    row_len: int
    logit_rows: int
    num_sequences: int
    packed: bool
    sequence_parallel_size: int = 1

    @property
    def num_tokens(self) -> int:
        return self.num_rows * self.row_len


def padded_micro_batch(num_sequences: int, seq_len: int, completion_len: int, sp: int = 1) -> MicroBatch:
    """``num_sequences`` rows padded to ``seq_len``. TRL keeps c + 1 logit positions per row
    (`logits_to_keep`); under sequence parallelism a GPU holds a slice of each row and computes
    the logits of all of it."""
    if sp == 1:
        return MicroBatch(num_sequences, seq_len, completion_len, num_sequences, packed=False)
    local = math.ceil(seq_len / sp)
    return MicroBatch(num_sequences, local, local - 1, num_sequences, packed=False, sequence_parallel_size=sp)


def packed_micro_batch(num_tokens: int, num_sequences: int, sp: int = 1) -> MicroBatch:
    """One row of ``num_tokens`` (this GPU's ``1/sp`` of them); logits for every position."""
    local = max(math.ceil(num_tokens / sp), 1)
    return MicroBatch(1, local, local - 1, num_sequences, packed=True, sequence_parallel_size=sp)


def rows_budget_per_gpu(rows: int, seq_len: int, sp: int = 1) -> int:
    """The per-GPU budget (`batch.max_tokens_per_gpu`) of a sequence-parallel group whose own
    budget is ``rows`` sequences of ``seq_len`` tokens: the group holds budget × sp
    (`budget_micro_batch`), so rows × seq_len / sp, rounded up. EasyR1 states its budgets this
    way (micro-batch size × padded row, the group's: adapters/easyr1/reader.py)."""
    return -(-rows * seq_len // sp)


def whole_rows(budget: int, seq_len: int, sp: int = 1) -> int | None:
    """The rows of ``seq_len`` a per-GPU budget stands for when it is `rows_budget_per_gpu` of
    whole rows, else None."""
    rows = budget * sp // seq_len
    return rows if rows and rows_budget_per_gpu(rows, seq_len, sp) == budget else None


def max_budget_micro_batch_tokens(budget: int, longest: int, balance: str) -> int:
    """The most tokens one micro-batch of a token budget can hold.

    Bind T = budget, s = the longest sequence, k = ceil(total/T) parts (more when ranks agree
    on the maximum, which only lowers the parts). Karmarkar-Karp's largest differencing keeps
    the spread (largest − smallest part) at most the largest item: merging two states pairs
    the largest sets of one with the smallest of the other, so the merged spread is at most
    the larger of the two, and a one-item state's spread is that item. The smallest part is at
    most total/k ≤ T, so:

    - balanced on tokens: a part holds at most T + s tokens (reached: ten sequences of 0.9·T
      give k = 9 and one part of two, 1.8·T);
    - balanced on workload w(s) = a·s + s² (a = 24576): a part's workload is at most
      W/k + w(s), so its tokens t satisfy a·t ≤ a·T + s·T + a·s + s² (Σs² ≤ s·total), i.e.
      t ≤ (T + s)(1 + s/a): short sequences weigh less per token, so a part of them holds more.

    Source: verl/EasyR1/OpenRLHF `get_seqlen_balanced_partitions` (`karmarkar_karp`), verl
    `rearrange_micro_batches` (`calculate_workload`). Assumes: every sequence is at most s.
    """
    if balance == "workload":
        return (budget + longest) * (WORKLOAD_TOKEN_COEFFICIENT + longest) // WORKLOAD_TOKEN_COEFFICIENT
    return budget + longest


def typical_budget_micro_batch_tokens(budget: int, total_tokens: int) -> int:
    """Balanced parts of a typical step: total/k tokens each, k = ceil(total/T)."""
    if total_tokens <= 0:
        return 0
    return math.ceil(total_tokens / math.ceil(total_tokens / budget))


def budget_micro_batch(
    budget: int, available_sequences: int, seq_len: int, worst: bool, balance: str, sp: int, padded: bool,
) -> MicroBatch:
    """A token-budget micro-batch on one GPU: the worst packing the budget allows, or the
    balanced part of a step whose ``available_sequences`` all hold ``seq_len`` tokens.

    The SP group packs ``budget × sp`` tokens (verl, OpenRLHF). Without padding removal (verl
    `use_remove_padding: false`) every member of a part is padded to the batch's length, and a
    part may hold every sequence of the step (many short ones): the worst is all of them."""
    group_budget = budget * sp
    total = available_sequences * seq_len
    if worst:
        tokens = min(max_budget_micro_batch_tokens(group_budget, seq_len, balance), total)
        sequences = available_sequences if padded else max(1, min(available_sequences, math.ceil(tokens / seq_len)))
    else:
        tokens = typical_budget_micro_batch_tokens(group_budget, total)
        sequences = max(1, min(available_sequences, round(tokens / seq_len)))
    if padded:
        return padded_micro_batch(sequences, seq_len, seq_len - 1, sp)
    return packed_micro_batch(tokens, sequences, sp)
