"""Memory of logits and per-token log-probs: the [tokens, vocab] tensors of GRPO/PPO.

Only completion positions get logits (TRL `logits_to_keep`, verl remove-padding keeps the
response). E = completion tokens × vocab elements. Sources for the mechanisms: TRL
`trainer/utils.py::selective_log_softmax`, verl `utils/torch_functional.py`, Liger
`chunked_loss/fused_linear_ppo.py`; research/memory-model.md §6.
"""

from __future__ import annotations

from ..catalog.models import ModelArch
from ..spec.run import LogitsMode
from . import constants as C

TRAIN_BF16_ROWS_BYTES_PER_LOGIT = 3 * C.BF16_BYTES
"""TRL's bf16 path loops over rows with `F.log_softmax(row)`: the bf16 log-softmax outputs of
all rows are saved for backward (2), the gradient of the logits accumulates over the rows (2),
and one row's gather/log-softmax gradient is alive on top; taken as a third full copy (2),
an upper bound because select's backward materialises a zero-filled full-size gradient."""

LOGPROB_BF16_ROWS_BYTES_PER_LOGIT = 2 * C.BF16_BYTES
"""No-grad bf16 path: the logits (2) and the temperature-scaled copy (2) older TRL makes."""

TRAIN_FP32_BYTES_PER_LOGIT = C.BF16_BYTES + C.FP32_BYTES + C.FP32_BYTES + C.FP32_BYTES
"""Upcast path in backward: bf16 logits (2) + fp32 log-softmax output saved (4) + fp32
gradient from the gather (4) + fp32 gradient of the logits (4) = 14 (research §6)."""

LOGPROB_FP32_BYTES_PER_LOGIT = C.BF16_BYTES + C.FP32_BYTES
"""No-grad upcast path: bf16 logits (2) + the fp32 copy log-softmax works on (4)."""

TRAIN_CHUNKED_BYTES_PER_LOGIT = C.BF16_BYTES + C.BF16_BYTES
"""Chunked path: the bf16 logits (2) and their bf16 gradient (2) span all rows."""
CHUNK_WORK_BYTES_PER_LOGIT = 3 * C.FP32_BYTES
"""fp32 work of one chunk in backward: log-softmax output, incoming and outgoing grads."""

FUSED_SEQUENCE_BYTES_PER_LOGIT = TRAIN_FP32_BYTES_PER_LOGIT
"""Liger's GRPO loss runs `log_softmax(logits.float())` under `torch.func.grad_and_value` one
sequence at a time (chunk_size=1): the upcast path's 14 bytes, over one sequence's logits."""


def num_logit_elements(arch: ModelArch, num_tokens: int) -> int:
    return num_tokens * arch.vocab_size


def fused_grad_weight_bytes(arch: ModelArch) -> int:
    """Liger allocates `grad_weight = torch.zeros_like(weight)` for the lm_head in its dtype
    (bf16) whether or not the head trains (argnums=(0, 1)).
    Source: Liger-Kernel chunked_loss/fused_linear_ppo.py (LigerFusedLinearPPOBase)."""
    return arch.vocab_size * arch.hidden_size * C.BF16_BYTES


def training_logits_bytes(arch: ModelArch, mode: LogitsMode, num_sequences: int, completion_len: int, chunk_rows: int) -> int:
    """Peak bytes of logits/log-prob tensors in the training forward+backward of one micro-batch."""
    tokens = num_sequences * completion_len
    elements = num_logit_elements(arch, tokens)
    if mode == LogitsMode.full_bf16:
        return elements * TRAIN_BF16_ROWS_BYTES_PER_LOGIT
    if mode == LogitsMode.full_fp32:
        return elements * TRAIN_FP32_BYTES_PER_LOGIT
    if mode == LogitsMode.chunked:
        chunk = min(chunk_rows, tokens)
        return elements * TRAIN_CHUNKED_BYTES_PER_LOGIT + num_logit_elements(arch, chunk) * CHUNK_WORK_BYTES_PER_LOGIT
    return num_logit_elements(arch, completion_len) * FUSED_SEQUENCE_BYTES_PER_LOGIT + fused_grad_weight_bytes(arch)


def logprob_logits_bytes(arch: ModelArch, mode: LogitsMode, num_sequences: int, completion_len: int, chunk_rows: int) -> int:
    """Peak bytes of logits in a no-grad log-prob forward (reference or old policy)."""
    tokens = num_sequences * completion_len
    elements = num_logit_elements(arch, tokens)
    if mode == LogitsMode.full_bf16:
        return elements * LOGPROB_BF16_ROWS_BYTES_PER_LOGIT
    if mode == LogitsMode.full_fp32:
        return elements * LOGPROB_FP32_BYTES_PER_LOGIT
    if mode == LogitsMode.chunked:
        chunk = min(chunk_rows, tokens)
        return elements * C.BF16_BYTES + num_logit_elements(arch, chunk) * C.FP32_BYTES
    return num_logit_elements(arch, completion_len) * LOGPROB_FP32_BYTES_PER_LOGIT
