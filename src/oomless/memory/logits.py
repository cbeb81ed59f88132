"""Memory of logits and per-token log-probs: the [tokens, vocab] tensors of GRPO/PPO.

TRL (0.19–0.2x `_get_per_token_logps_and_entropies`) asks the model for
``logits_to_keep = c + 1`` positions, drops the last (``[:, :-1]``), keeps the last c
(``[:, -c:]``) and divides by the temperature (a copy). Symbols: c completion tokens, b
sequences, V vocabulary, E = b·c·V and E₁ = b·(c + 1)·V logit elements. Each term is the
largest of the moments the traced step goes through (`oomless trace`, `tests/trace/`); the
mechanisms: TRL `trainer/utils.py::selective_log_softmax`, verl `utils/torch_functional.py`,
Liger `chunked_loss/fused_linear_ppo.py`; research/memory-model.md §6.
"""

from __future__ import annotations

from ..catalog.models import ModelArch
from ..spec.run import LogitsMode
from . import constants as C
from .activation_calibration import family_coefficients
from .activations import TIED_GRADIENT_COPIES_AT_EMBEDDING_BACKWARD, tied_head_gradient_bytes

B = C.BF16_BYTES
F = C.FP32_BYTES

FUSED_SEQUENCE_BYTES_PER_LOGIT = B + F + F + F
"""Liger's GRPO loss runs `log_softmax(logits.float())` under `torch.func.grad_and_value` one
sequence at a time (chunk_size=1): bf16 logits (2) + fp32 log-softmax output (4) + fp32
gradient from the gather (4) + fp32 gradient of the logits (4) = 14 (research §6). Not traced."""
VERL_FUSED_CHUNK_TOKENS = 512
"""verl `FusedLinearForPPO(chunk_size=512)`: tokens per chunk. Source: verl
utils/experimental/torch_functional.py (0.4.1 to HEAD), models/transformers/dense_common.py."""
VERL_FUSED_BACKWARD_BYTES_PER_LOGIT = B + F + F + F + F + F
"""verl `_fused_linear_for_ppo_bwd` on one chunk: the bf16 logits (2), their fp32 upcast (4), the
softmax (4), the one-hot scatter (4), (one_hot − probs) (4) and dlogits (4) = 22; the entropy's
gradient adds log_softmax and its products (`VERL_FUSED_ENTROPY_EXTRA_BYTES_PER_LOGIT`). Read
from the code, not traced."""
VERL_FUSED_ENTROPY_EXTRA_BYTES_PER_LOGIT = F + F
VERL_FUSED_FORWARD_BYTES_PER_LOGIT = B + F + F + F
"""`_fused_linear_for_ppo_fwd` on one chunk: bf16 logits, fp32 copy, softmax, log_softmax = 14."""
FP32_GATHER_BACKWARD_COPIES = 4
"""fp32 branch, at `GatherBackward`: the divided fp32 logits (kept by `gather`), the stacked
`logsumexp` gradients, and the zero-filled gather gradient with its `scatter_add` result."""
CHUNK_BACKWARD_FP32_COPIES = 3
"""Chunked backward, per chunk: the recomputed fp32 log-softmax, the gather's gradient and the
log-softmax gradient (the zero-filled gather buffer is freed before the last)."""
CHUNK_FORWARD_FP32_COPIES = 2
"""Chunked forward, per chunk: the fp32 upcast and its log-softmax."""
HEAD_TILE_POSITIONS = 4096
"""trl 1.16.0 `trl/kernels/chunked_logprob.py::TOKEN_CHUNK_SIZE`: positions per LM-head tile."""
HEAD_TILE_VOCAB = 32768
"""trl 1.16.0 `trl/trainer/utils.py::_CHUNKED_LOGPROB_CHUNK_SIZE`: vocabulary columns per tile.
The work buffer has this width even when the vocabulary is narrower."""
HEAD_FP32_GRADIENT_BYTES = F
"""`ChunkedLogProbFunction.backward` accumulates the hidden and weight gradients in fp32."""
FP32_ALL_POSITIONS_BACKWARD_BYTES = F + F + B
"""OpenRLHF at the loss's backward, per logit: its fp32 logits (kept by the `output` that
`Actor.forward` returns to the trainer, and saved by flash-attn's cross-entropy), the
cross-entropy's fp32 gradient (`torch.empty_like(logits)`, inplace_backward False) and the bf16
gradient the upcast's backward makes of it: 4 + 4 + 2. Source: OpenRLHF 0.7.5-0.11.2
models/actor.py (``output["logits"].to(torch.float32)``), trainer/ray/ppo_actor.py
(`training_step_actor` keeps ``output`` through `strategy.backward`), models/utils.py
`log_probs_from_logits`; flash-attn flash_attn/ops/triton/cross_entropy.py (CrossEntropyLoss)."""


def num_logit_elements(arch: ModelArch, num_tokens: int) -> int:
    return num_tokens * arch.vocab_size


def lm_head_input_bytes(arch: ModelArch, num_sequences: int, completion_len: int, seq_len: int) -> int:
    """What the LM head keeps for backward: the bf16 hidden states of the c + 1 kept positions,
    copied because the slice of a batch is not contiguous; with one sequence (or no prompt)
    the slice is a view and keeps the final norm's whole output alive.
    Source: transformers `slice_logits_to_keep` + `F.linear` (matmul reshapes, copying
    non-contiguous input)."""
    rows = completion_len + 1
    contiguous = num_sequences == 1 or rows >= seq_len
    return B * arch.hidden_size * num_sequences * (seq_len if contiguous else rows)


def _final_softcap_bytes(arch: ModelArch, num_sequences: int, completion_len: int) -> int:
    """Gemma 2 soft-caps the final logits (`/ cap`, `tanh`, `* cap`): the calibration table's
    bytes per logit that the soft-cap adds (the `tanh` output kept for backward)."""
    per_logit = family_coefficients(arch.text_model_type).final_logit_softcap_bytes_per_logit
    return per_logit * num_sequences * (completion_len + 1) * arch.vocab_size


def head_work_buffer_bytes(num_positions: int) -> int:
    """`mm_buf`: min(positions, 4096) × 32,768 logits in the compute dtype (bf16), made once
    in the kernel's forward and once in its backward. Source: trl 1.16.0
    `trl/kernels/chunked_logprob.py` (`ChunkedLogProbFunction`)."""
    return B * min(num_positions, HEAD_TILE_POSITIONS) * HEAD_TILE_VOCAB


def chunked_head_training_bytes(arch: ModelArch, num_sequences: int, completion_len: int, seq_len: int,
                                frozen_head: bool) -> int:
    """TRL >= 1.0 `add_fused_lm_head` on CUDA: the backbone's last hidden states of the N = b·c
    completion positions are gathered (`hidden_states[mask]`, bf16 N×h, saved by the kernel);
    the forward folds the logits tile by tile in the work buffer; the backward recomputes each
    tile into the logits gradient and accumulates the fp32 hidden (N×h) and, when the head
    trains, weight (V×h) gradients, which it returns cast to bf16 while the fp32 ones, the
    buffer and the saved hidden states are still alive. The bf16 weight gradient is the head's
    gradient (`.grad`, or the tied gradient waiting for the embedding's: `tied_head_gradient_bytes`).
    Then the gather's and the slice's backward scatter the hidden gradient into zero-filled
    b×(s−1)×h and b×s×h bf16 tensors. Assumes: compute dtype bf16, no entropy gradient.
    Source: trl 1.16.0 `trl/trainer/utils.py::add_fused_lm_head`, `trl/kernels/chunked_logprob.py`."""
    n, h, v = num_sequences * completion_len, arch.hidden_size, arch.vocab_size
    hidden = B * n * h
    forward = hidden + head_work_buffer_bytes(n)
    weight_grads = 0 if frozen_head else HEAD_FP32_GRADIENT_BYTES * v * h + tied_head_gradient_bytes(arch)
    backward = hidden + head_work_buffer_bytes(n) + (HEAD_FP32_GRADIENT_BYTES + B) * n * h + weight_grads
    scatter = B * h * num_sequences * (2 * seq_len - 1) + (0 if frozen_head else tied_head_gradient_bytes(arch))
    return max(forward, backward, scatter)


def accumulating_gradient_bytes(arch: ModelArch, frozen_head: bool, saved: int, logits: int, transient: int) -> int:
    """How much higher a later micro-batch's work peaks than the first's.

    The plan's train phase holds every gradient (`.grad` keeps the earlier micro-batches' sums
    under gradient accumulation), so each new weight gradient is a separate tensor until
    autograd adds it in place (`AccumulateGrad`). Only the vocabulary-sized ones matter (bf16
    V×h, ``g``): untied, the LM head's arrives at the head's backward (on top of the logits
    moment) and the embedding's at the very end (every activation freed); tied, the summed
    head + embedding gradient arrives at the end beside the two it sums (3g instead of the
    first micro-batch's 2g, `activations.TIED_GRADIENT_COPIES_AT_EMBEDDING_BACKWARD`).
    ``saved``, ``logits`` and ``transient`` are the first micro-batch's saved activations,
    logits peak and backward transient. Source: real steps with two micro-batches
    (`scripts/validate_real.py`, docs/validation.md); torch/csrc/autograd/functions/accumulate_grad.h.
    """
    if frozen_head:
        return 0
    g = B * arch.vocab_size * arch.hidden_size
    first = saved + max(logits, transient)
    if arch.tie_word_embeddings:
        later = max(first, (TIED_GRADIENT_COPIES_AT_EMBEDDING_BACKWARD + 1) * g)
    else:
        later = max(saved + max(logits + g, transient), g)
    return later - first


def _whole_row_head(arch: ModelArch, num_sequences: int, seq_len: int, frozen_head: bool) -> tuple[int, int]:
    """The LM head over every position of its rows (no ``logits_to_keep`` slice): its kept bf16
    input B·h·b·s, and its backward moment (that input, the bf16 gradient of its output, the
    tied weight gradient, the input gradient), before what the caller still holds."""
    b, s, h = num_sequences, seq_len, arch.hidden_size
    lm_input = 0 if frozen_head else B * h * b * s
    tied = 0 if frozen_head else tied_head_gradient_bytes(arch)
    return lm_input, lm_input + B * b * s * arch.vocab_size + tied + B * h * b * s


def all_positions_training_bytes(arch: ModelArch, num_sequences: int, seq_len: int, frozen_head: bool) -> int:
    """`fp32_all_positions` (OpenRLHF): E_s = b·s·V logits, every position. The largest of the
    upcast (bf16 head output + its fp32 copy, 6 E_s), the loss's backward
    (`FP32_ALL_POSITIONS_BACKWARD_BYTES`) and the LM head's backward beside the still-kept fp32
    logits; the head keeps its whole bf16 input (no slice). Source: OpenRLHF 0.7.5-0.11.2
    models/actor.py, trainer/ray/ppo_actor.py, models/utils.py; flash-attn
    ops/triton/cross_entropy.py; checked by `oomless trace` (tests/trace/test_agreement.py)."""
    es = num_sequences * seq_len * arch.vocab_size
    lm_input, head_backward = _whole_row_head(arch, num_sequences, seq_len, frozen_head)
    return max(lm_input + (B + F) * es, lm_input + FP32_ALL_POSITIONS_BACKWARD_BYTES * es, head_backward + F * es)


BF16_ALL_POSITIONS_BACKWARD_COPIES = 4
"""ORZ at `LogSoftmaxBackward`, per logit of the row: the logits (the trainer's ``output``), the
saved log-softmax, the gather's zero-filled gradient and the log-softmax gradient, bf16 each; the
entropy's completion log-probs (a `torch.cat` of the completion slices, a local until the step
returns) come on top. Source: Open-Reasoner-Zero orz/ppo/models.py (`log_probs_from_logits`:
``F.log_softmax`` then ``gather``), orz/ppo/actors.py (`training_step`: ``output`` and the
no-grad entropy block before ``strategy.backward``)."""


def orz_training_bytes(arch: ModelArch, num_sequences: int, completion_len: int, seq_len: int, frozen_head: bool) -> int:
    """`bf16_all_positions` (ORZ): E_s = b·s·V logits of every position, E_c = b·min(c, s)·V of
    the completions (a packed row's completions are bounded by the row). The largest of the
    entropy block (logits, saved log-softmax, the no-grad log-softmax and its completion copy,
    bf16: 3 E_s + E_c; the slice's backward holds as much), the log-softmax backward
    (`BF16_ALL_POSITIONS_BACKWARD_COPIES` E_s + the completion copy) and the LM head's backward
    beside the kept logits and the completion copy. Source: as
    `BF16_ALL_POSITIONS_BACKWARD_COPIES`; checked by `oomless trace` (tests/trace/test_agreement.py)."""
    b, s, v = num_sequences, seq_len, arch.vocab_size
    es, ec = b * s * v, b * min(completion_len, s) * v
    lm_input, head_backward = _whole_row_head(arch, b, s, frozen_head)
    return max(lm_input + B * (3 * es + ec), lm_input + B * (BF16_ALL_POSITIONS_BACKWARD_COPIES * es + ec),
               head_backward + B * (es + ec))


FLASH_CE_ENTROPY_BACKWARD_COPIES = 3
"""verl in training with entropy, per logit of every position, bf16 at the backward: the logits
(saved by the cross-entropy and by the compiled entropy), the cross-entropy's gradient (a new
tensor once ``inplace_backward`` is off) and the entropy's gradient, before autograd sums them.
Source: verl 0.4.1-0.8 workers/actor/dp_actor.py and 0.9.1 workers/engine/fsdp/transformer_impl.py
(``inplace_backward = False`` when ``calculate_entropy``; the entropy ``torch.compile``'d when
``use_torch_compile``, the default: its forward fuses softmax, product and sum, so no [tokens,
vocab] intermediate stays); flash-attn ops/triton/cross_entropy.py. Not traced (the compiled
kernel has no fake-tensor form); eager entropy keeps the softmax and more: planned the same."""


FLASH_CE_TEMPERATURE_COPIES = {"in_place": (2, 1), "copy": (2, 2), "none": (1, 1)}
"""bf16 copies of every position's logits at the peak, (training, no-grad log-prob pass), by how the
temperature is applied (`spec.enums.TemperatureScaling`). in_place: verl 0.4.1-0.8 and EasyR1
``logits_rmpad.div_(temperature)`` (dp_actor.py): one tensor without grad; in training the
division's backward makes a new gradient beside the one the cross-entropy wrote over the logits
(traced: `oomless trace`, tests/trace/test_agreement.py). copy: verl 0.9.0 always, 0.9.1 at a temperature other
than 1 (workers/engine/fsdp/transformer_impl.py `_scale_logits_by_temperature`, out of place): the
raw logits (still held by the model output) and the scaled ones in the forward, the scaled
storage holding the cross-entropy's gradient and the division's new gradient in backward. none:
verl 0.9.1 at temperature 1 (the same function returns its input): the logits alone, the gradient
written over them (flash-attn ``inplace_backward``). Read from the verl 0.9.0 and 0.9.1 wheels; all three traced
(trace/logprobs.py `verl_logps`; tests/trace/test_agreement.py: training within 2 %, the no-grad
copy within 5 % of one bf16 copy)."""


def flash_ce_training_bytes(arch: ModelArch, num_sequences: int, seq_len: int, frozen_head: bool, entropy: bool,
                            temperature: str = "in_place") -> int:
    """`bf16_flash_ce` / `bf16_flash_ce_entropy` (verl, EasyR1 padding-free): E_s = b·s·V bf16
    logits, every position (remove-padding packs the real tokens into one row; the model is called
    without logits_to_keep), log-probs by flash-attn's cross-entropy. Without entropy it writes its
    gradient over the logits (``inplace_backward``) and the temperature's scaling may make a second
    copy (`FLASH_CE_TEMPERATURE_COPIES`, by ``temperature``: `spec.enums.TemperatureScaling`); with
    entropy the backward holds `FLASH_CE_ENTROPY_BACKWARD_COPIES` E_s (traced with the in-place
    division; kept for the other two, not traced). Source: as the two constants; verl
    utils/torch_functional.py `logprobs_from_logits_flash_attn`."""
    es = num_sequences * seq_len * arch.vocab_size
    lm_input, head_backward = _whole_row_head(arch, num_sequences, seq_len, frozen_head)
    if entropy:
        return max(lm_input + B * FLASH_CE_ENTROPY_BACKWARD_COPIES * es, head_backward)
    return max(lm_input + B * FLASH_CE_TEMPERATURE_COPIES[temperature][0] * es, head_backward)


def training_logits_bytes(
    arch: ModelArch, mode: LogitsMode, num_sequences: int, completion_len: int, chunk_rows: int, seq_len: int | None = None,
    frozen_head: bool = False, temperature: str = "in_place",
) -> int:
    """Peak bytes of logits/log-prob tensors in the training forward+backward of one
    micro-batch, with the LM head's kept input (`lm_head_input_bytes`).

    - full_bf16: max of the division (LM head output E₁ + its divided copy E), the per-
      sequence loop's backward (every sequence's bf16 log-softmax output E, plus one
      sequence's gather gradient and log-softmax gradient: E·(1 + 2/b)), and the two slices'
      backward (their zero-filled gradients E + E₁), all bf16.
    - full_fp32: the fp32 upcast of E₁ and the divided copy, then at `GatherBackward` four
      fp32 copies of E (`FP32_GATHER_BACKWARD_COPIES`).
    - chunked: the bf16 logits E (divided copy, kept by the checkpointed chunks) plus, in
      backward, the bf16 gradients of the chunks already done and the fp32 work of the last
      chunk (the first r rows); `torch.split`'s backward concatenates the chunk gradients (2E).
    - every mode ends with the LM head's backward: the bf16 gradient of its output (E₁), its
      input gradient, and with tied embeddings its weight gradient (`tied_head_gradient_bytes`).
    - fused: Liger, one sequence at a time (not traced).
    - chunked_head: TRL >= 1.0's tiled LM head (`chunked_head_training_bytes`).
    - fp32_all_positions: OpenRLHF, every position in fp32 (`all_positions_training_bytes`).
    - bf16_all_positions: ORZ, every position in bf16 with an entropy pass (`orz_training_bytes`).
    - bf16_flash_ce(_entropy): verl, every position in bf16, flash-attn's cross-entropy (`flash_ce_training_bytes`).
    A frozen LM head (LoRA) keeps no input and makes no weight gradient.
    """
    b, c, v = num_sequences, completion_len, arch.vocab_size
    s = seq_len if seq_len is not None else c + 1
    if mode == LogitsMode.fp32_all_positions:
        return all_positions_training_bytes(arch, b, s, frozen_head)
    if mode == LogitsMode.bf16_all_positions:
        return orz_training_bytes(arch, b, c, s, frozen_head)
    if mode in (LogitsMode.bf16_flash_ce, LogitsMode.bf16_flash_ce_entropy):
        return flash_ce_training_bytes(arch, b, s, frozen_head, mode == LogitsMode.bf16_flash_ce_entropy, temperature)
    if mode == LogitsMode.fused_token_chunks:
        return verl_fused_training_bytes(arch, b * s, frozen_head)
    e, e1 = b * c * v, b * (c + 1) * v
    lm_input = 0 if frozen_head else lm_head_input_bytes(arch, b, c, s)
    kept = lm_input + _final_softcap_bytes(arch, b, c)
    tied = 0 if frozen_head else tied_head_gradient_bytes(arch)
    head_backward = lm_input + B * e1 + tied + B * arch.hidden_size * b * (c + 1)
    if mode == LogitsMode.full_bf16:
        return max(kept + B * max(e1 + e, c * v * (b + 2), e + e1), head_backward)
    if mode == LogitsMode.full_fp32:
        return max(kept + max(B * e1 + F * e1, F * (e1 + e), FP32_GATHER_BACKWARD_COPIES * F * e), head_backward)
    if mode == LogitsMode.chunked_head:
        return chunked_head_training_bytes(arch, b, c, s, frozen_head)
    if mode == LogitsMode.chunked:
        r = min(chunk_rows, b * c) * v
        forward = max(B * (e1 + e), B * e + CHUNK_FORWARD_FP32_COPIES * F * r)
        backward = max(B * e + B * (e - r) + CHUNK_BACKWARD_FP32_COPIES * F * r, 2 * B * e, B * (e + e1))
        return max(kept + max(forward, backward), head_backward)
    return num_logit_elements(arch, completion_len) * FUSED_SEQUENCE_BYTES_PER_LOGIT + fused_grad_weight_bytes(arch)


def logprob_logits_bytes(arch: ModelArch, mode: LogitsMode, num_sequences: int, completion_len: int, chunk_rows: int,
                         seq_len: int | None = None, temperature: str = "in_place") -> int:
    """Peak bytes of logits in a no-grad log-prob forward (reference or old policy): the LM
    head output with its divided copy (bf16; fp32 upcast first for full_fp32), the bf16
    copy with one chunk's fp32 upcast and log-softmax, (chunked_head) the gathered hidden
    states with the work buffer, or every position's bf16 logits (``seq_len`` a row) with
    their fp32 copy (fp32_all_positions, OpenRLHF), their bf16 log-softmax (bf16_all_positions,
    ORZ), or alone (verl 0.4-0.8 and EasyR1 divide by the temperature in place, flash-attn's
    cross-entropy keeps per-row sums, the old-log-prob entropy is compiled and fused), twice where
    the temperature makes a scaled copy (verl 0.9.0, or 0.9.1 at a temperature other than 1:
    `FLASH_CE_TEMPERATURE_COPIES`)."""
    b, c, v = num_sequences, completion_len, arch.vocab_size
    if mode in (LogitsMode.fp32_all_positions, LogitsMode.bf16_all_positions, LogitsMode.bf16_flash_ce,
                LogitsMode.bf16_flash_ce_entropy):  # + fp32 copy / + log-softmax / verl: the logits alone
        per_logit = {LogitsMode.fp32_all_positions: B + F, LogitsMode.bf16_all_positions: B + B}.get(
            mode, B * FLASH_CE_TEMPERATURE_COPIES[temperature][1])
        return per_logit * b * (seq_len if seq_len is not None else c + 1) * v
    if mode == LogitsMode.fused_token_chunks:
        return min(VERL_FUSED_CHUNK_TOKENS, b * (seq_len if seq_len is not None else c + 1)) * v * VERL_FUSED_FORWARD_BYTES_PER_LOGIT
    e, e1 = b * c * v, b * (c + 1) * v
    if mode == LogitsMode.full_bf16:
        return B * (e1 + e)
    if mode == LogitsMode.full_fp32:
        return max(B * e1 + F * e1, F * (e1 + e))
    if mode == LogitsMode.chunked:
        r = min(chunk_rows, b * c) * v
        return max(B * (e1 + e), B * e + CHUNK_FORWARD_FP32_COPIES * F * r)
    if mode == LogitsMode.chunked_head:
        return B * b * c * arch.hidden_size + head_work_buffer_bytes(b * c)
    return num_logit_elements(arch, completion_len) * (B + F)


def verl_fused_training_bytes(arch: ModelArch, num_tokens: int, frozen_head: bool) -> int:
    """verl's fused LM head in training, N packed tokens: it keeps the final hidden states for
    backward (bf16, N·h), and in backward allocates the input gradient (N·h) and, for a trained
    head, the weight gradient (V·h) in full, beside one chunk's fp32 work
    (`VERL_FUSED_BACKWARD_BYTES_PER_LOGIT`, with the entropy's extra, which verl's fused path
    always computes). Source: verl utils/experimental/torch_functional.py
    (`FusedLinearForPPOFunction.backward`: `torch.zeros_like(hidden_states)`,
    `torch.zeros_like(vocab_weights)`). Assumes: the torch backend (`fused_kernel_options.impl_backend`)."""
    chunk = min(VERL_FUSED_CHUNK_TOKENS, num_tokens) * arch.vocab_size
    per_logit = VERL_FUSED_BACKWARD_BYTES_PER_LOGIT + VERL_FUSED_ENTROPY_EXTRA_BYTES_PER_LOGIT
    hidden = B * num_tokens * arch.hidden_size
    weight_grad = 0 if frozen_head else B * arch.vocab_size * arch.hidden_size
    return hidden + hidden + weight_grad + chunk * per_logit


def fused_grad_weight_bytes(arch: ModelArch) -> int:
    """Liger allocates `grad_weight = torch.zeros_like(weight)` for the lm_head in its dtype
    (bf16) whether or not the head trains (argnums=(0, 1)).
    Source: Liger-Kernel chunked_loss/fused_linear_ppo.py (LigerFusedLinearPPOBase)."""
    return arch.vocab_size * arch.hidden_size * C.BF16_BYTES
