"""Memory of logits and per-token log-probs: the [tokens, vocab] tensors of GRPO/PPO.

Only completion positions get logits (TRL `logits_to_keep`, verl remove-padding keeps the
response). E = completion tokens × vocab elements. Source for the mechanisms: TRL
`trainer/utils.py::selective_log_softmax`, verl `utils/torch_functional.py`,
Liger `ops/fused_linear_cross_entropy.py`; research/memory-model.md §6.
"""

from __future__ import annotations

import math

from ..catalog.models import ModelArch
from ..spec.run import LogitsMode
from . import constants as C

TRAIN_FULL_BYTES_PER_LOGIT = C.BF16_BYTES + C.FP32_BYTES + C.FP32_BYTES + C.FP32_BYTES
"""Peak of the naive path in backward: bf16 logits (2) + fp32 log-softmax output saved for
backward (4) + fp32 gradient arriving from the gather (4) + fp32 gradient of the logits
(4) = 14 bytes per element (research §6: 2TV + 4TV + 4TV + 4TV)."""

TRAIN_CHUNKED_BYTES_PER_LOGIT = C.BF16_BYTES + C.BF16_BYTES
"""Chunked path: the bf16 logits (2) and their bf16 gradient (2) span all rows."""
CHUNK_WORK_BYTES_PER_LOGIT = 3 * C.FP32_BYTES
"""fp32 work of one chunk in backward: log-softmax output, incoming and outgoing grads."""

LOGPROB_FULL_BYTES_PER_LOGIT = C.BF16_BYTES + C.FP32_BYTES
"""No-grad log-prob pass: bf16 logits (2) + the fp32 exp/logsumexp work tensor (4)."""

FUSED_CHUNK_BYTES_PER_LOGIT = C.BF16_BYTES + C.FP32_BYTES
"""Fused linear + cross-entropy keeps one chunk of bf16 logits and its fp32 gradient."""


def num_logit_elements(arch: ModelArch, num_tokens: int) -> int:
    return num_tokens * arch.vocab_size


def liger_chunk_rows(arch: ModelArch, num_tokens: int) -> int:
    """Rows per chunk of Liger's fused linear cross-entropy:
    next_pow2(ceil(BT / ceil(V / H))), so a chunk's logits are about BT·H elements.
    Source: Liger-Kernel ops/fused_linear_cross_entropy.py (`chunk_size`)."""
    inc_factor = math.ceil(arch.vocab_size / arch.hidden_size)
    rows = math.ceil(num_tokens / inc_factor)
    return 1 << max(rows - 1, 0).bit_length()


def training_logits_bytes(arch: ModelArch, mode: LogitsMode, num_tokens: int, chunk_rows: int, lm_head_trainable: bool) -> int:
    """Peak bytes of logits/log-prob tensors in the training forward+backward of one micro-batch.

    - full: 14 B per logit (see TRAIN_FULL_BYTES_PER_LOGIT).
    - chunked: 4 B per logit + 12 B per logit of one chunk.
    - fused: one chunk of logits (2 + 4 B per element) + the fp32 accumulator of the
      lm_head weight gradient when that weight trains (Liger allocates grad_weight).
    """
    if mode == LogitsMode.full:
        return num_logit_elements(arch, num_tokens) * TRAIN_FULL_BYTES_PER_LOGIT
    if mode == LogitsMode.chunked:
        chunk = min(chunk_rows, num_tokens)
        return (
            num_logit_elements(arch, num_tokens) * TRAIN_CHUNKED_BYTES_PER_LOGIT
            + num_logit_elements(arch, chunk) * CHUNK_WORK_BYTES_PER_LOGIT
        )
    chunk = min(liger_chunk_rows(arch, num_tokens), num_tokens)
    grad_weight = arch.vocab_size * arch.hidden_size * C.FP32_BYTES if lm_head_trainable else 0
    return num_logit_elements(arch, chunk) * FUSED_CHUNK_BYTES_PER_LOGIT + grad_weight


def logprob_logits_bytes(arch: ModelArch, mode: LogitsMode, num_tokens: int, chunk_rows: int) -> int:
    """Peak bytes of logits in a no-grad log-prob forward (reference or old policy)."""
    if mode == LogitsMode.full:
        return num_logit_elements(arch, num_tokens) * LOGPROB_FULL_BYTES_PER_LOGIT
    if mode == LogitsMode.chunked:
        chunk = min(chunk_rows, num_tokens)
        return (
            num_logit_elements(arch, num_tokens) * C.BF16_BYTES
            + num_logit_elements(arch, chunk) * C.FP32_BYTES
        )
    chunk = min(liger_chunk_rows(arch, num_tokens), num_tokens)
    return num_logit_elements(arch, chunk) * FUSED_CHUNK_BYTES_PER_LOGIT
