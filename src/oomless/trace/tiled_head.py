"""The `chunked_head` logits mode traced: TRL >= 1.0's tiled LM head, as its CUDA path allocates.

TRL 1.16 (`trl/trainer/utils.py::add_fused_lm_head`) runs the backbone alone, takes the last
hidden states of the positions whose next token is scored (`hidden_states[:, :-1][mask]`, the
completion positions) and projects them through the LM head tile by tile
(`trl/kernels/chunked_logprob.py::ChunkedLogProbFunction`); the logits never exist whole.

On a GPU the per-tile fold is a Triton kernel that updates its running statistics in place and
the gradient GEMMs accumulate into fp32 with `torch.addmm(..., out_dtype=float32, out=acc)`:
neither allocates. What the kernel does allocate, and what `TiledHeadLogProbs` allocates the
same way on fake tensors:

- forward: seven fp32 vectors of N running statistics, one work buffer of
  min(N, 4096) × 32,768 in the compute dtype (`mm_buf`, each tile a `torch.mm(..., out=)` into
  it), then log Z and the log-probs (fp32, N); it saves the gathered hidden states, the
  weight, the targets and log Z.
- backward: fp32 zero-filled gradients of the hidden states (N × h) and, when the head trains,
  of the weight (V × h), a second work buffer, the fp32 incoming gradient, and the two
  gradients cast back to the compute dtype at the end.

TRL's CPU fallback (`_forward_tile`, `_backward_tile`, `acc.addmm_(a.float(), b.float())`) makes
fp32 copies of every tile that the GPU path does not; tracing it would over-count, so it is not
called. The traced batch has no padding, so the mask selects each sequence's last c positions:
`hidden[:, :-1][:, -c:]` reshaped is the same N × h copy `hidden_states[mask]` makes, and its
backward scatters into the same zero-filled b × (s − 1) × h and b × s × h gradients (a boolean
mask would give fake tensors a data-dependent shape). The per-token results are laid out
[b, c] directly (TRL scatters them into a [b, s − 1] fp32 tensor: b·(s − 1)·4 bytes, not traced).

Source: trl 1.16.0 `trl/kernels/chunked_logprob.py` (`TOKEN_CHUNK_SIZE`, `ChunkedLogProbFunction`),
`trl/trainer/utils.py` (`_CHUNKED_LOGPROB_CHUNK_SIZE`, `add_fused_lm_head`).
Assumes: the compute dtype is the hidden states' (no autocast), only log-probs are asked for
(no entropy output), no bias on the LM head.
"""

from __future__ import annotations

from typing import Any

import torch

from ..memory.logits import HEAD_TILE_POSITIONS, HEAD_TILE_VOCAB

NUM_RUNNING_STATISTICS = 7
"""running max, sum of exp, x·exp sum, squared sum, logit sum, max before the target, target
logit: the fp32 vectors `ChunkedLogProbFunction.forward` keeps per position."""


class TiledHeadLogProbs(torch.autograd.Function):
    """Per-token log-probs of ``hidden @ weight.T`` with the tiled head's allocations (values are
    not computed exactly: this runs on fake tensors, where only shapes and storages count)."""

    @staticmethod
    def forward(ctx: Any, hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        n, vocab = hidden.shape[0], weight.shape[0]
        stats = [torch.zeros(n, dtype=torch.float32, device=hidden.device) for _ in range(NUM_RUNNING_STATISTICS)]
        buffer = torch.empty(min(n, HEAD_TILE_POSITIONS), HEAD_TILE_VOCAB, dtype=hidden.dtype, device=hidden.device)
        for token_start in range(0, n, HEAD_TILE_POSITIONS):
            rows = hidden[token_start:token_start + HEAD_TILE_POSITIONS]
            for start in range(0, vocab, HEAD_TILE_VOCAB):
                columns = weight[start:start + HEAD_TILE_VOCAB]
                torch.mm(rows, columns.t(), out=buffer[:rows.shape[0], :columns.shape[0]])
        del buffer
        log_z = stats[0] + torch.log(stats[1])
        logps = stats[6] - log_z
        ctx.save_for_backward(hidden, weight, targets, log_z)
        return logps

    @staticmethod
    def backward(ctx: Any, grad_logps: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None, None]:
        hidden, weight, targets, log_z = ctx.saved_tensors
        n, vocab = hidden.shape[0], weight.shape[0]
        needs_hidden, needs_weight = ctx.needs_input_grad[:2]
        grad_hidden = torch.zeros(hidden.shape, dtype=torch.float32, device=hidden.device) if needs_hidden else None
        grad_weight = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if needs_weight else None
        buffer = torch.empty(min(n, HEAD_TILE_POSITIONS), HEAD_TILE_VOCAB, dtype=hidden.dtype, device=hidden.device)
        grad_logps = grad_logps.float().contiguous()
        for token_start in range(0, n, HEAD_TILE_POSITIONS):
            rows = hidden[token_start:token_start + HEAD_TILE_POSITIONS]
            for start in range(0, vocab, HEAD_TILE_VOCAB):
                columns = weight[start:start + HEAD_TILE_VOCAB]
                torch.mm(rows, columns.t(), out=buffer[:rows.shape[0], :columns.shape[0]])
                # the fold turns the tile into the logits' gradient in place; the fp32 GEMMs
                # accumulate into grad_hidden / grad_weight in place (cuBLAS out_dtype)
        return (
            grad_hidden.to(hidden.dtype) if grad_hidden is not None else None,
            grad_weight.to(weight.dtype) if grad_weight is not None else None,
            None,
        )


def causal_lm(model: torch.nn.Module) -> torch.nn.Module:
    """The transformers model under a PEFT wrapper (the head is patched before PEFT wraps)."""
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


def backbone(model: torch.nn.Module) -> torch.nn.Module:
    """The decoder without its LM head (`PreTrainedModel.base_model`, what TRL's head calls)."""
    return causal_lm(model).base_model


def tiled_head_logps(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                     completion_len: int) -> torch.Tensor:
    """[b, c] log-probs of the completion tokens through the backbone and the tiled head."""
    hidden_states = backbone(model)(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state
    b, h = hidden_states.shape[0], hidden_states.shape[-1]
    selected = hidden_states[:, :-1][:, -completion_len:]
    # `hidden_states[mask]` always makes a new N × h tensor; a reshape copies only a non-contiguous slice
    scored = selected.reshape(-1, h) if not selected.is_contiguous() else selected.reshape(-1, h).clone()
    targets = input_ids[:, -completion_len:].reshape(-1)
    weight = causal_lm(model).get_output_embeddings().weight
    return TiledHeadLogProbs.apply(scored, weight, targets).view(b, completion_len)
