"""Per-token log-probabilities of the completion, the way the spec's `logits` mode computes them.

All modes start like TRL 0.19–0.2x `GRPOTrainer._get_per_token_logps(_and_entropies)`:
``model(input_ids, attention_mask, logits_to_keep=c + 1).logits`` (the LM head sees the last
c + 1 positions), drop the last position (``[:, :-1]``, a view), divide by the sampling
temperature (``logits / temperature``, a copy), then:

- ``full_bf16``: TRL `trainer/utils.py::selective_log_softmax`, bf16 branch: a loop over the
  sequences (`for row in logits`, i.e. `unbind`), `log_softmax(row)` and `gather` per row, `stack`.
- ``full_fp32``: the logits upcast to fp32 first (transformers < 4.45 did `logits.float()` in
  the model's forward), then `selective_log_softmax`'s fp32 branch: `gather` of the labels minus
  a per-sequence `logsumexp` loop.
- ``chunked``: a chunked, checkpointed log-softmax (the pattern of verl's chunked entropy in
  `utils/torch_functional.py`, applied to the log-probs; no framework read today runs it): the bf16 logits are flattened to rows, split (`torch.split`) into chunks of
  ``logits_chunk_rows`` rows, and each chunk runs `log_softmax(chunk.float()).gather(...)` under
  non-reentrant `torch.utils.checkpoint`, so fp32 work exists one chunk at a time, in forward
  and backward.
- ``chunked_head``: TRL ≥ 1.0's `add_fused_lm_head`: the backbone's hidden states go through
  the LM head in tiles (logits never exist whole), traced as its CUDA path allocates
  (`tiled_head`).
- ``fp32_all_positions``: OpenRLHF 0.7-0.11 `Actor.forward`: the model without
  ``logits_to_keep`` (every position), ``logits.to(torch.float32)``, labels rolled one position
  left, flash-attn's Triton cross-entropy over all rows (`FlashCrossEntropy`: saves the fp32
  logits and the log-sum-exp, allocates an fp32 gradient in backward), then the completion's
  slice. The trainer keeps the returned output, so the fp32 logits live until backward ends
  (``keep``).
- ``bf16_all_positions``: Open-Reasoner-Zero (`orz/ppo/models.py` Actor.forward,
  `orz/ppo/actors.py` training_step): every position's bf16 logits, ``F.log_softmax`` over
  ``logits[:, :-1]`` and ``gather`` of the next tokens, the completion's slice; in training a
  no-grad ``log_softmax`` of the same logits whose completion part (``torch.cat`` of the
  slices) stays a local until the step returns, like the output (``keep``).
- ``bf16_flash_ce``: verl's remove-padding path without entropy: every position's bf16 logits,
  divided in place, flash-attn's cross-entropy writing its gradient over them
  (``inplace_backward``). With entropy (``bf16_flash_ce_entropy``) verl's torch.compile'd
  `entropy_from_logits` is not traced.
- ``fused`` (Liger's fused linear GRPO loss) runs Triton kernels on one sequence at a time and
  is not traced: the planner's formula for it (`memory.logits.FUSED_SEQUENCE_BYTES_PER_LOGIT`)
  stands alone.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from ..errors import InputError
from ..spec.run import LogitsMode

TEMPERATURE = 1.0
"""TRL's default sampling temperature; the division copies the logits whatever its value."""


def completion_logits(
    model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, completion_len: int, upcast: bool,
) -> torch.Tensor:
    logits = model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=completion_len + 1, use_cache=False).logits
    if upcast:
        logits = logits.float()
    logits = logits[:, :-1, :]
    return logits[:, -completion_len:]


def selective_log_softmax_bf16(logits: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """TRL `selective_log_softmax`, low-precision branch (per-sequence loop)."""
    rows = []
    for row_logits, row_labels in zip(logits, index.unsqueeze(-1)):
        row_logps = F.log_softmax(row_logits, dim=-1)
        rows.append(row_logps.gather(dim=-1, index=row_labels))
    return torch.stack(rows).squeeze(-1)


def selective_log_softmax_fp32(logits: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """TRL `selective_log_softmax`, fp32 branch (gather − per-sequence logsumexp)."""
    selected = torch.gather(logits, dim=-1, index=index.unsqueeze(-1)).squeeze(-1)
    logsumexp = torch.stack([torch.logsumexp(lg, dim=-1) for lg in logits])
    return selected - logsumexp


def _chunk_logps(chunk: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.log_softmax(chunk.float(), dim=-1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)


def chunked_log_softmax(logits: torch.Tensor, index: torch.Tensor, chunk_rows: int) -> torch.Tensor:
    """fp32 log-softmax over row chunks, each recomputed in backward (verl-style)."""
    rows = logits.reshape(-1, logits.shape[-1])
    labels = index.reshape(-1)
    parts = []
    for chunk, lab in zip(rows.split(chunk_rows), labels.split(chunk_rows)):
        if torch.is_grad_enabled():
            parts.append(checkpoint(_chunk_logps, chunk, lab, use_reentrant=False))
        else:
            parts.append(_chunk_logps(chunk, lab))
    return torch.cat(parts).view(index.shape)


class FlashCrossEntropy(torch.autograd.Function):
    """What flash-attn's `CrossEntropyLoss` (flash_attn/ops/triton/cross_entropy.py) allocates
    around its Triton kernels: fp32 losses, log-sum-exp and z-losses per row in forward (the
    logits and lse saved), ``torch.empty_like(logits)`` for the gradient in backward
    (``inplace_backward`` False, OpenRLHF's call). The values are not computed: the trace
    runs on fake tensors."""

    @staticmethod
    def forward(ctx, logits: torch.Tensor, labels: torch.Tensor, inplace: bool = False) -> torch.Tensor:  # type: ignore[override]
        ctx.inplace = inplace
        rows = logits.shape[0]
        losses = torch.empty(rows, dtype=torch.float32, device=logits.device)
        lse = torch.empty(rows, dtype=torch.float32, device=logits.device)
        z_losses = torch.empty(rows, dtype=torch.float32, device=logits.device)
        ctx.save_for_backward(logits, lse, labels)
        del z_losses
        return losses

    @staticmethod
    def backward(ctx, grad_losses: torch.Tensor) -> tuple[torch.Tensor, None, None]:  # type: ignore[override]
        logits, _lse, _labels = ctx.saved_tensors
        # inplace_backward (verl's call): the kernel writes the gradient over the logits
        return (logits if ctx.inplace else torch.empty_like(logits)), None, None


def all_positions_logps(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                        completion_len: int, keep: list[torch.Tensor] | None) -> torch.Tensor:
    """OpenRLHF `Actor.forward` + `log_probs_from_logits` (fp32, flash-attn branch)."""
    logits = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits
    logits = logits.to(torch.float32)
    if keep is not None and torch.is_grad_enabled():
        keep.append(logits)
    labels = torch.roll(input_ids, shifts=-1, dims=1)
    rows = FlashCrossEntropy.apply(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
    log_probs = (-rows).view(*input_ids.shape)[:, :-1]
    return log_probs[:, -completion_len:]


def verl_logps(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
               completion_len: int, temperature: str = "in_place") -> torch.Tensor:
    """verl's `_forward_micro_batch` without entropy: every position's bf16 logits scaled by the
    temperature, flash-attn's cross-entropy with ``inplace_backward`` over the rolled labels, the
    completion's slice (remove-padding packs the same tokens into one row). ``temperature``:
    in_place divides the logits (verl <= 0.8 ``div_``), copy divides out of place while the model
    output keeps the raw logits until the function returns (verl 0.9.0 always, 0.9.1 at a
    temperature other than 1), none leaves them (verl 0.9.1 at 1; `spec.enums.TemperatureScaling`)."""
    output = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
    logits = output.logits
    if temperature == "in_place":
        logits.div_(TEMPERATURE)
    elif temperature == "copy":
        logits = logits / TEMPERATURE
    labels = torch.roll(input_ids, shifts=-1, dims=1)
    rows = FlashCrossEntropy.apply(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), True)
    return (-rows).view(*input_ids.shape)[:, :-1][:, -completion_len:]


def orz_logps(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
              completion_len: int, keep: list[torch.Tensor] | None) -> torch.Tensor:
    """ORZ's log-probs (padded rows: the completion is each row's last ``completion_len``), and in
    training its no-grad entropy pass before backward (the per-chunk entropy work, 512 rows
    at a time, is left out: it is a few rows of the vocabulary)."""
    logits = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits
    log_probs = F.log_softmax(logits[:, :-1, :], dim=-1)
    logps = log_probs.gather(dim=-1, index=input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    del log_probs
    if keep is not None and torch.is_grad_enabled():
        keep.append(logits)
        with torch.no_grad():
            every = F.log_softmax(logits[:, :-1, :], dim=-1)
            keep.append(torch.cat([every[:, -completion_len:]], dim=1))
            del every
    return logps[:, -completion_len:]


def check_traceable(mode: LogitsMode) -> None:
    traced = "trace full_bf16, full_fp32, chunked, chunked_head or bf16_flash_ce"
    if mode in (LogitsMode.fused, LogitsMode.bf16_flash_ce_entropy):
        raise InputError(
            "logits", f"{mode.value} (Liger's Triton kernels / verl's torch.compile'd entropy, which have no "
            f"fake-tensor form) is not traced; {traced}"
        )
    if mode == LogitsMode.fused_token_chunks:
        raise InputError("logits", f"fused_token_chunks (verl's chunked LM head, plain torch) is not traced yet: its "
                         f"memory is read from verl's code (memory/logits.py verl_fused_training_bytes); {traced}")


def per_token_logps(
    model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, completion_len: int,
    mode: LogitsMode, chunk_rows: int, keep: list[torch.Tensor] | None = None, temperature: str = "in_place",
) -> torch.Tensor:
    """The completion's log-probs; ``keep`` receives what the trainer holds through backward."""
    check_traceable(mode)
    if mode == LogitsMode.fp32_all_positions:
        return all_positions_logps(model, input_ids, attention_mask, completion_len, keep)
    if mode == LogitsMode.bf16_all_positions:
        return orz_logps(model, input_ids, attention_mask, completion_len, keep)
    if mode == LogitsMode.bf16_flash_ce:
        return verl_logps(model, input_ids, attention_mask, completion_len, temperature)
    if mode == LogitsMode.chunked_head:
        from .tiled_head import tiled_head_logps

        return tiled_head_logps(model, input_ids, attention_mask, completion_len)
    logits = completion_logits(model, input_ids, attention_mask, completion_len, upcast=mode == LogitsMode.full_fp32)
    logits = logits / TEMPERATURE
    labels = input_ids[:, -completion_len:]
    if mode == LogitsMode.full_bf16:
        return selective_log_softmax_bf16(logits, labels)
    if mode == LogitsMode.full_fp32:
        return selective_log_softmax_fp32(logits, labels)
    return chunked_log_softmax(logits, labels, chunk_rows)
