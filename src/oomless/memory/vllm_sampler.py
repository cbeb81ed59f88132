"""The dummy sampler run of vLLM's start-up profile, by vLLM version.

``profile_run`` (vllm/v1/worker/gpu_model_runner.py) runs a dummy forward of
``max_num_batched_tokens`` tokens spread over R = min(max_num_seqs, max_num_batched_tokens)
dummy requests, then ``_dummy_sampler_run`` on the last hidden state of each request: the
lm_head gives bf16 logits [R, V]. The torch peak of the whole profile is vLLM's "peak
activation" (gpu_worker.py ``determine_available_memory``). The count below is which [R, V]
tensors are alive at the same time at the sampler's peak, read from the source of each
version; a Python local keeps its tensor alive until its function returns, in-place ops
allocate nothing. Four rules (CUDA):

- < 0.17, model runner V1: the dummy request samples with temperature 0.5, top_p 0.9 and
  top_k = V − 1, and ``apply_top_k_top_p`` sorts the logits: 18 B per logit alive in vLLM plus
  torch's sort workspace (38 B per logit at >= 128 rows, 50 B at 2-127).
- 0.17-0.28, model runner V1: the same request; a Triton kernel masks in place (FlashInfer
  samples first from 0.21): 14 B per logit plus the Triton kernel's cached buffer.
- 0.29-0.32, model runner V2 (the default for all models from 0.29): one pass with default
  sampling parameters, no fp32 copy: the bf16 logits only (2 B per logit), plus the sampler's
  persistent per-request penalty counts.
- >= 0.33, model runner V2: a second pass with ``SamplingParams.for_sampler_warmup`` (fp32
  copy, FlashInfer top-k/top-p): 14 B per logit, plus the penalty counts.

Versions read (wheels from PyPI): 0.8.5, 0.9.0, 0.9.1, 0.9.2, 0.10.0, 0.10.2, 0.11.0, 0.12.0,
0.13.0, 0.15.0, 0.16.0, 0.17.0, 0.19.0, 0.20.0, 0.21.0, 0.23.0, 0.25.0, 0.27.0, 0.28.0, 0.29.0,
0.31.0, 0.32.0, 0.33.0.

Known limitations: vLLM's default install and environment (FlashInfer's sampler is opt-in
before 0.21: an optional extra in 0.10-0.11, ``VLLM_USE_FLASHINFER_SAMPLER=1`` in 0.12-0.20;
with it those releases peak at 14 B per logit); R < 8 rows take the torch sort path in
0.17-0.28; model runner V2 for the few architectures that used it by default in 0.23-0.28
(Llama, Mistral, Qwen3 in 0.23) is planned as V1; the V0 engine (< 0.8's default) is planned
with the oldest V1 rule. Model runner V2 before 0.33 profiles less than real sampling with
top-k/top-p uses ("the sampler may skip top_k, top_p, and logprobs", 0.29-0.32
``_dummy_sampler_run``); the plan follows the profile, as vLLM's budget does.
"""

from __future__ import annotations

import math
import re

from . import constants as C

TRITON_TOP_K_TOP_P_FROM = (0, 17)
"""First release whose ``apply_top_k_top_p`` masks in place with a Triton kernel
(v1/sample/ops/topk_topp_triton.py) instead of ``logits.sort`` (read: 0.16.0 sorts, 0.17.0
does not, for R >= 8)."""

KEEPS_FORWARD_OUTPUT_FROM = (0, 9, 2)
"""First release whose ``profile_run`` keeps the forward's whole hidden states
(``hidden_states, last_hidden_states = self._dummy_run(...)``) while the sampler runs; 0.9.0
and 0.9.1 return only the gathered last rows from ``_dummy_run``."""

MODEL_RUNNER_V2_FROM = (0, 29)
"""First release whose default for every model is model runner V2 (vllm/v1/worker/gpu/
model_runner.py); ``VllmConfig.use_v2_model_runner`` in 0.28 still defaults to V2 only for
``DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES``."""

SAMPLER_WARMUP_PASS_FROM = (0, 33)
"""First release whose model runner V2 ``_dummy_sampler_run`` runs a second pass with
``SamplingParams.for_sampler_warmup()`` (0.32 runs only the default pass)."""


def vllm_release(version: str | None) -> tuple[int, ...] | None:
    """The numeric release of a vLLM version string (``0.10.2rc1`` → (0, 10, 2)); None when
    unknown, which the rules below read as the newest release."""
    if not version:
        return None
    match = re.match(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?", version)
    return tuple(int(part) for part in match.groups() if part is not None) if match else None


def at_least(version: str | None, release: tuple[int, ...]) -> bool:
    """Whether ``version`` is ``release`` or later; an unknown version is the newest."""
    parsed = vllm_release(version)
    return parsed is None or parsed >= release


def torch_sort_workspace_bytes(num_rows: int, vocab_size: int) -> int:
    """Temporary memory of ``torch.sort`` over [num_rows, vocab_size] fp32 on CUDA, beyond its
    outputs (see the TORCH_SORT_* constants)."""
    if num_rows == 1 or vocab_size >= C.TORCH_SORT_ONE_ROW_AT_A_TIME_VOCAB:
        return vocab_size * C.TORCH_SORT_SEGMENTED_WORKSPACE_BYTES_PER_ELEMENT
    if num_rows <= C.TORCH_SORT_FULL_SORT_MAX_ROWS:
        return num_rows * vocab_size * C.TORCH_SORT_FULL_SORT_WORKSPACE_BYTES_PER_ELEMENT
    return num_rows * vocab_size * C.TORCH_SORT_SEGMENTED_WORKSPACE_BYTES_PER_ELEMENT


def triton_top_k_top_p_buffer_bytes(num_rows: int, vocab_size: int) -> int:
    """The fp32 scratch rows the Triton top-k/top-p keeps per device: one per program,
    min(next_power_of_2(min(SMs, R)), SMs) rows, cached (``_TRITON_BUFFER_CACHE``) from its
    first call. Source: vllm 0.17-0.33 v1/sample/ops/topk_topp_triton.py
    (``apply_top_k_top_p_triton``). Assumes: CUDA_MAX_SM_COUNT SMs (an upper bound)."""
    rows = min(1 << max(num_rows - 1, 0).bit_length(), C.CUDA_MAX_SM_COUNT)
    return rows * vocab_size * C.FP32_BYTES


def sampler_rows(max_num_batched_tokens: int, max_num_seqs: int) -> int:
    """Dummy requests of the profile: min(max_num_seqs, max_num_batched_tokens).
    Source: gpu_model_runner.py ``_dummy_run`` (``num_reqs = min(num_tokens, max_num_reqs)``)."""
    return min(max_num_seqs, max_num_batched_tokens)


def retained_forward_output_bytes(vllm_version: str | None, max_num_batched_tokens: int, hidden_size: int) -> int:
    """The dummy forward's bf16 hidden states [max_num_batched_tokens, hidden], which
    ``profile_run`` keeps alive through the sampler run from 0.9.2 (KEEPS_FORWARD_OUTPUT_FROM)."""
    if not at_least(vllm_version, KEEPS_FORWARD_OUTPUT_FROM):
        return 0
    return max_num_batched_tokens * hidden_size * C.BF16_BYTES


def sampler_live_bytes_per_logit(vllm_version: str | None) -> int:
    """Bytes per logit alive in vLLM's own code at the sampler's peak (the rule of the
    version; see the module docstring and the VLLM_SAMPLER_* constants)."""
    if at_least(vllm_version, SAMPLER_WARMUP_PASS_FROM):
        return C.VLLM_SAMPLER_LIVE_BYTES_PER_LOGIT_TRITON
    if at_least(vllm_version, MODEL_RUNNER_V2_FROM):
        return C.VLLM_SAMPLER_LIVE_BYTES_PER_LOGIT_V2_DEFAULT_PASS
    if at_least(vllm_version, TRITON_TOP_K_TOP_P_FROM):
        return C.VLLM_SAMPLER_LIVE_BYTES_PER_LOGIT_TRITON
    return C.VLLM_SAMPLER_LIVE_BYTES_PER_LOGIT_SORT


def sampler_workspace_bytes(vllm_version: str | None, num_rows: int, vocab_size: int) -> int:
    """Memory the sampler's kernels add at its peak: torch's sort workspace before 0.17, the
    Triton top-k/top-p buffer in 0.17-0.28 (model runner V1), none under model runner V2
    (FlashInfer samples the warmup pass; the default pass filters nothing). Without FlashInfer
    (``flashinfer_sampler_supported`` false) V2's warmup pass holds less: bf16 + fp32 logits
    (6 B per logit) and the Triton buffer, at most 148 rows."""
    if at_least(vllm_version, MODEL_RUNNER_V2_FROM):
        return 0
    if at_least(vllm_version, TRITON_TOP_K_TOP_P_FROM):
        return triton_top_k_top_p_buffer_bytes(num_rows, vocab_size)
    return torch_sort_workspace_bytes(num_rows, vocab_size)


def sampler_peak_bytes(vllm_version: str | None, num_rows: int, vocab_size: int) -> int:
    """Torch peak of ``_dummy_sampler_run`` over [num_rows, vocab_size] logits: per-logit
    tensors alive in vLLM plus the kernels' workspace."""
    return num_rows * vocab_size * sampler_live_bytes_per_logit(vllm_version) + sampler_workspace_bytes(vllm_version, num_rows, vocab_size)


def sampler_state_bytes(vllm_version: str | None, max_num_seqs: int, vocab_size: int) -> int:
    """Model runner V2's persistent penalty statistics, one row per request slot:
    ``output_bin_counts`` [max_num_seqs, V] int32 and ``prompt_bin_mask``
    [max_num_seqs, ceil(V / 32)] int32, allocated when the model loads (after the weights are
    measured). vLLM >= 0.27 counts them in its non-KV memory (``total_consumed``,
    vllm/utils/mem_utils.py ``memory_profiling``), so the plan counts them with the profile.
    Source: vllm 0.29-0.33 v1/worker/gpu/sample/penalties.py (``PenaltiesState.__init__``)."""
    if not at_least(vllm_version, MODEL_RUNNER_V2_FROM):
        return 0
    return max_num_seqs * (vocab_size + math.ceil(vocab_size / C.PROMPT_BIN_MASK_TOKENS_PER_WORD)) * C.INT32_BYTES
