"""Every byte multiplier and empirical constant of the memory model, with its provenance.

Multipliers are built from their parts. Empirical constants say which measurement or report
they come from and which versions; none is fitted to the seed cases the planner is judged on.
"""

from __future__ import annotations

from .. import units

# --- dtype sizes -------------------------------------------------------------------------
FP32_BYTES = 4
BF16_BYTES = 2
INT8_BYTES = 1

NF4_BITS_PER_PARAM = 4
NF4_DOUBLE_QUANT_OVERHEAD_BITS = 8 / 64 + 32 / (64 * 256)
"""Per-parameter cost of NF4 quantisation constants with double quantisation: an 8-bit
absmax per 64-weight block plus one fp32 second-level constant per 256 blocks.
Source: Dettmers et al. 2023, QLoRA (arXiv 2305.14314), section 3 "Double Quantization"
(0.5 -> 0.127 bits per parameter)."""
NF4_BITS_PER_PARAM_TOTAL = NF4_BITS_PER_PARAM + NF4_DOUBLE_QUANT_OVERHEAD_BITS

# --- optimizer states --------------------------------------------------------------------
ADAM_NUM_STATES = 2
"""Adam keeps exp_avg (m) and exp_avg_sq (v) per trainable parameter (torch.optim.AdamW)."""
ADAM_8BIT_BLOCK_SIZE = 2048
"""bitsandbytes 8-bit optimizers quantise states block-wise with one fp32 absmax per 2048
values. Source: Dettmers et al. 2022, 8-bit Optimizers via Block-wise Quantization
(arXiv 2110.02861), section 2."""

# --- DeepSpeed / ZeRO ----------------------------------------------------------------------
ZERO_PAPER_MIXED_ADAM_K = FP32_BYTES * (1 + ADAM_NUM_STATES)
"""K = 12 in the ZeRO paper: fp32 master params + Adam m + v (Rajbhandari et al. 2020,
arXiv 1910.02054, section 3.1)."""

# --- per-process GPU overheads -----------------------------------------------------------
CUDA_CONTEXT_BYTES = 512 * units.MiB
"""CUDA context + kernel images per process per GPU with lazy module loading (CUDA >= 11.7).
Reports range 300-616 MiB (pytorch#107667, pytorch#109888); we take 512 MiB, inside that
range. Every process touching a GPU pays it (trainer rank, vLLM worker)."""

NCCL_COMMUNICATOR_BYTES = 410 * units.MiB
"""GPU memory of NCCL communicators and their buffers in a process using collectives.
Source: llm-d config_explorer empirical-vllm-memory-results.md (H100): vLLM non-torch
memory 0.13-0.15 GiB at TP=1 vs 0.55 GiB at TP=2; the difference, ~0.41 GiB, is NCCL."""

VLLM_NON_TORCH_BYTES = int(0.15 * units.GiB)
"""vLLM's non-torch memory at TP=1 (cuBLAS workspace etc.), upper end of 0.13-0.15 GiB.
Source: llm-d empirical-vllm-memory-results.md (H100, vLLM V1)."""

VLLM_CUDA_GRAPH_BYTES = 1 * units.GiB
"""CUDA graph pool of a vLLM worker when enforce_eager is false. verl's docs give
0.1-1.5 GiB typically; we take 1 GiB, in the upper half, because the pool stays on the GPU
through sleep and an underestimate crashes the run. Counted inside the utilization budget
(vLLM >= 0.21 profiles graphs by default)."""

VLLM_SAMPLER_BYTES_PER_LOGIT = BF16_BYTES + FP32_BYTES + FP32_BYTES
"""vLLM's dummy sampler run in profile_run: bf16 logits from lm_head, their fp32 copy and
fp32 probabilities, over min(max_num_seqs, max_num_batched_tokens) rows.
Source: vllm/v1/worker/gpu_model_runner.py `_dummy_sampler_run`, v1/sample/sampler.py."""

VLLM_BLOCK_SIZE = 16
"""vLLM KV-cache block size in tokens (default). Source: vllm/config/cache.py."""

ALLOCATOR_FRAGMENTATION_FRACTION = 0.10
"""Reserved-but-unallocated memory of PyTorch's caching allocator on top of live tensors,
as a fraction of the trainer's live tensor bytes. Research notes (shared/research
memory-model.md section 8) put it at 5-15 % without expandable segments; we take 10 %."""

CUDA_MIN_BLOCK_BYTES = 512
"""The caching allocator rounds every block up to 512 B (c10/cuda/CUDACachingAllocator.cpp
kMinBlockSize)."""

# --- vLLM scheduler defaults (EngineArgs.get_batch_defaults, LLM class) -------------------
VLLM_LARGE_GPU_BYTES = 70 * units.GiB
VLLM_MAX_NUM_BATCHED_TOKENS_LARGE = 16384
VLLM_MAX_NUM_BATCHED_TOKENS_SMALL = 8192
VLLM_MAX_NUM_SEQS_LARGE = 1024
VLLM_MAX_NUM_SEQS_SMALL = 256

# --- Ray -----------------------------------------------------------------------------------
RAY_OBJECT_STORE_CAP_BYTES = 200 * units.GB
"""Ray caps the default object store at 200 GB (ray_constants.py
DEFAULT_OBJECT_STORE_MAX_MEMORY_BYTES)."""

HF_CHECKPOINT_SHARD_BYTES = 5 * units.GB
"""transformers `save_pretrained(max_shard_size="5GB")` default: the largest checkpoint file
a rank loads at once under sharded initialisation."""
