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
INT32_BYTES = 4
INT64_BYTES = 8

NF4_BITS_PER_PARAM = 4
NF4_DOUBLE_QUANT_OVERHEAD_BITS = 8 / 64 + 32 / (64 * 256)
"""Per-parameter cost of NF4 quantisation constants with double quantisation: an 8-bit
absmax per 64-weight block plus one fp32 second-level constant per 256 blocks.
Source: Dettmers et al. 2023, QLoRA (arXiv 2305.14314), section 3 "Double Quantization"
(0.5 -> 0.127 bits per parameter)."""
NF4_BITS_PER_PARAM_TOTAL = NF4_BITS_PER_PARAM + NF4_DOUBLE_QUANT_OVERHEAD_BITS
NF4_SINGLE_QUANT_OVERHEAD_BITS = 32 / 64
"""Without double quantisation: one fp32 absmax per 64-weight block, 0.5 bits per parameter.
Source: QLoRA paper (arXiv 2305.14314) section 3; bitsandbytes `quantize_4bit` (blocksize 64,
fp32 absmax unless `compress_statistics`, which transformers' `bnb_4bit_use_double_quant` sets)."""

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
through sleep and an underestimate crashes the run. vLLM >= 0.21 profiles graphs and counts
them inside the utilization budget; older versions capture them after sizing the KV cache,
on top of the budget (`rollout.cuda_graphs_in_budget`). What vLLM captures: 0.10.2 captures
batch sizes 1, 2, 4 and every multiple of 8 up to min(2 × max_num_seqs, 512), capped at
max_num_batched_tokens (config/__init__.py, SchedulerConfig.cuda_graph_sizes), as piecewise
graphs of the torch.compile'd model; the cookbook's 0.10.2 logs show 35 sizes (max_num_seqs
128) taking 0.23 GiB (Qwen2-0.5B) and 0.29 GiB (Qwen3-4B). The source gives no bytes per
graph (the shared pool holds the largest size's piece outputs, the driver the graph nodes),
so the constant is not replaced by a formula."""

VLLM_BLOCK_SIZE = 16
"""vLLM KV-cache block size in tokens (default). Source: vllm/config/cache.py."""

# --- vLLM start-up profile: the dummy sampler run (memory/vllm_sampler.py) ------------
CUDA_INT2_BYTES = 8
"""CUDA ``int2``: two int32, the (segment, position) pairs of torch's full-sort path."""

VLLM_SAMPLER_LIVE_BYTES_PER_LOGIT_SORT = BF16_BYTES + FP32_BYTES + FP32_BYTES + INT64_BYTES
"""18 = bf16 logits held by ``_dummy_sampler_run`` (2) + their fp32 copy in ``Sampler.forward``
(``logits.to(torch.float32)``, 4) + ``logits.sort``'s outputs in ``apply_top_k_top_p``:
fp32 values (4) and int64 indices (8). Source: vllm 0.8.5-0.16 v1/sample/sampler.py,
v1/sample/ops/topk_topp_sampler.py (``forward_native``, ``apply_top_k_top_p``)."""

TORCH_SORT_SEGMENTED_WORKSPACE_BYTES_PER_ELEMENT = INT64_BYTES + FP32_BYTES + INT64_BYTES
"""20 = torch's stable CUDA sort of >= 128 rows (or one row): an int64 iota of positions (8) +
CUB segmented radix sort's alternate key (4) and value (8) buffers in its temp storage.
Source: pytorch aten/src/ATen/native/cuda/SortStable.cu (``segmented_sort_pairs``,
``segmented_sort_large_segments``), CUB dispatch_radix_sort.cuh
(``DispatchSegmentedRadixSort::InvokePasses``: num_items × (sizeof(KeyT) + sizeof(ValueT)))."""

TORCH_SORT_FULL_SORT_WORKSPACE_BYTES_PER_ELEMENT = CUDA_INT2_BYTES + CUDA_INT2_BYTES + FP32_BYTES + FP32_BYTES + CUDA_INT2_BYTES
"""32 = torch's sort of 2-127 rows (``segmented_sort_pairs_by_full_sort``): two int2
(segment, position) buffers (8 + 8) + the keys output CUB needs (4) + CUB's alternate key (4)
and int2 value (8) buffers. Same sources."""

TORCH_SORT_FULL_SORT_MAX_ROWS = 127
"""SortStable.cu sorts 2-127 segments by one full sort (``nsegments < 128``)."""

TORCH_SORT_ONE_ROW_AT_A_TIME_VOCAB = 1_000_000
"""SortStable.cu sorts row by row when a row has >= 1,000,000 elements."""

VLLM_SAMPLER_LIVE_BYTES_PER_LOGIT_TRITON = BF16_BYTES + FP32_BYTES + FP32_BYTES + FP32_BYTES
"""14 = bf16 logits (2) + fp32 copy (4) + two fp32 [R, V] temporaries at once. Model runner V1
0.17-0.28: a Triton kernel masks the fp32 logits in place for top-k/top-p, then ``softmax``
gives probs (4) and ``random_sample`` its exponential noise (4); from 0.21 the FlashInfer call
before it (``top_k_top_p_sampling_from_logits``: ``top_k_mask_logits`` output 4 + softmax 4) is
as large. Model runner V2 >= 0.33, warmup pass: fp32 copy, then ``flashinfer_sample`` (4 + 4).
Source: vllm 0.17-0.28 v1/sample/ops/topk_topp_sampler.py (``forward_native``,
``random_sample``, ``flashinfer_sample``), flashinfer 0.6.8/0.7.2 sampling.py; vllm 0.33
v1/worker/gpu/sample/sampler.py (``apply_sampling_params``, ``_sample_random``)."""

VLLM_SAMPLER_LIVE_BYTES_PER_LOGIT_V2_DEFAULT_PASS = BF16_BYTES
"""2 = the bf16 logits only: model runner V2's profile pass with default sampling parameters
leaves them unprocessed (``apply_sampling_params`` returns them as they are, no fp32 copy) and
Gumbel-samples them in blocks. Source: vllm 0.29-0.32 v1/worker/gpu/sample/sampler.py,
v1/worker/gpu/model_runner.py ``_dummy_sampler_run``."""

PROMPT_BIN_MASK_TOKENS_PER_WORD = 32
"""Model runner V2 keeps one bit per vocabulary token of the prompt in int32 words
(``cdiv(vocab_size, 32)``). Source: vllm 0.29-0.33 v1/worker/gpu/sample/penalties.py."""

CUDA_MAX_SM_COUNT = 148
"""Upper bound on a GPU's streaming multiprocessors for the Triton sampler's buffer rows:
B200 148, H100/H200 SXM 132, A100 108 (NVIDIA datasheets). The planner does not know the SM
count of a GPU; the bound costs at most (148 − SMs) × V × 4 bytes."""

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

RAY_LIVE_BATCH_COPIES = 2
"""A worker-group call's arguments and its results live in the object store together until the
caller has them: verl/EasyR1's single controller passes the step's DataProto as `.remote()`
arguments and `ray.get`s the returned DataProto (verl single_controller/ray/base.py), and Ray
stores arguments and returns above `max_direct_call_object_size` (100 KiB) in plasma."""

DATAPROTO_SEQUENCE_BYTES_PER_TOKEN = 3 * INT64_BYTES
"""input_ids, attention_mask, position_ids (int64) over prompt + response: verl
trainer/ppo/ray_trainer.py and EasyR1's fork (the batch a step passes between workers)."""

DATAPROTO_RESPONSE_BYTES_PER_TOKEN = 2 * INT64_BYTES + 6 * FP32_BYTES
"""responses and response_mask (int64), old_log_probs, ref_log_prob, token_level_scores,
token_level_rewards, advantages and returns (fp32) over the response (same source)."""

MROPE_EXTRA_POSITION_ROWS = 2
"""Qwen2/2.5-VL's position_ids are [3, seq] (temporal, height, width: mrope): two rows more
than a text model's (verl/EasyR1 `get_rope_index` for Qwen2-VL processors)."""

HF_CHECKPOINT_SHARD_BYTES = 5 * units.GB
"""transformers `save_pretrained(max_shard_size="5GB")` default: the largest checkpoint file
a rank loads at once under sharded initialisation."""

# --- vision (image processors; used by memory/vision.py) ------------------------------------
QWEN_VL_MIN_PIXELS = 4 * 28 * 28
"""3,136 = 56·56: 4 LLM tokens of 28×28 px. transformers `Qwen2VLImageProcessor` default
`min_pixels=56 * 56`; qwen-vl-utils `MIN_PIXELS = 4 * 28 * 28` (vision_process.py)."""

QWEN_VL_MAX_PIXELS = 16384 * 28 * 28
"""12,845,056: 16,384 LLM tokens of 28×28 px. qwen-vl-utils `MAX_PIXELS = 16384 * 28 * 28`
(vision_process.py) and Qwen2.5-VL's preprocessor_config.json; what vLLM profiles with."""

HF_QWEN2_VL_PROCESSOR_MAX_PIXELS = 1280 * 28 * 28
"""1,003,520: transformers `Qwen2VLImageProcessor.__init__` default `max_pixels=28 * 28 * 1280`
(models/qwen2_vl/image_processing_qwen2_vl.py), used when no preprocessor config overrides it."""

QWEN_VL_MAX_ASPECT_RATIO = 200
"""`smart_resize` rejects max(h, w) / min(h, w) > 200 (transformers and qwen-vl-utils)."""

INTERNVL_MIN_TILES = 1
INTERNVL_MAX_TILES = 12
"""InternVL `dynamic_preprocess(min_num=1, max_num=12)`; InternVL2.5/3 config.json
`min_dynamic_patch: 1`, `max_dynamic_patch: 12`."""

INTERNVL_USE_THUMBNAIL = True
"""InternVL configs set `use_thumbnail: true`: an image cut into more than one tile gets one
extra whole-image 448 px tile (`dynamic_preprocess(..., use_thumbnail=True)`)."""

# --- pinned host memory (used by memory/pinned.py) ------------------------------------------
CUDA_SMALL_REQUEST_MAX_BYTES = 1 * units.MiB
"""kSmallSize: blocks up to 1 MiB are served from the small pool, larger ones from the large
pool. Source: c10/cuda/CUDACachingAllocator.cpp (torch 2.x; moved to c10/core/AllocatorConfig.h
in newer releases), `get_pool`."""

CUDA_SMALL_SEGMENT_BYTES = 2 * units.MiB
"""kSmallBuffer: a new small-pool segment is 2 MiB, shared by small blocks.
Source: c10/cuda/CUDACachingAllocator.cpp `get_allocation_size`."""

CUDA_LARGE_SEGMENT_BYTES = 20 * units.MiB
"""kLargeBuffer: a block of 1-10 MiB opens a 20 MiB segment that later blocks share (newer
torch: `large_segment_size`, default 20 MiB). Source: `get_allocation_size`."""

CUDA_MIN_LARGE_ALLOC_BYTES = 10 * units.MiB
"""kMinLargeAlloc: a block of at least 10 MiB that fits no free block gets its own segment.
Source: `get_allocation_size`."""

CUDA_LARGE_ROUNDING_BYTES = 2 * units.MiB
"""kRoundLarge: such an own segment is rounded up to a multiple of 2 MiB.
Source: `get_allocation_size`."""

VLLM_VOCAB_PADDING_SIZE = 64
"""vLLM pads the vocab of VocabParallelEmbedding/ParallelLMHead to a multiple of 64 before
splitting it over TP ranks. Source: vllm/model_executor/layers/vocab_parallel_embedding.py
(DEFAULT_VOCAB_PADDING_SIZE, pad_vocab_size)."""
