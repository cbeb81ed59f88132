"""Generation time: vLLM engines and transformers `generate`.

One engine (a TP group) generates its share of the rollout batch in waves. A wave admits as
many sequences as the KV cache holds at full length (the plan's `kv_cache_bytes`), capped by
`max_num_seqs`; it prefills their prompts (compute-bound) and then decodes `completion` tokens,
each step reading the engine's weights and the wave's KV cache (memory-bound) — whichever of
memory and compute takes longer — plus two TP all-reduces per layer and a fixed step overhead.

Source: roofline reasoning of vLLM's paper (Kwon et al. 2023, arXiv 2309.06180 §2.3: decoding
is memory-bound, batch size bounded by KV-cache capacity); Megatron TP (Shoeybi et al. 2019,
arXiv 1909.08053 §3): two all-reduces per layer in the forward.
Assumes: every sequence reaches max length (the planner's worst case), so waves are the
pessimistic count; mean context during decode = prompt + completion/2; chunked prefill and
prefix caching are ignored.
"""

from __future__ import annotations

import math

from ..catalog.models import ModelArch
from ..memory import constants as MC
from ..memory import vllm as V
from . import comm
from . import constants as K
from . import flops as F
from .hardware import GpuPerf

TP_ALLREDUCES_PER_LAYER = 2
"""Attention output and MLP output are each all-reduced across TP ranks (Megatron-style layers)."""


def engine_weight_bytes(arch: ModelArch, tensor_parallel_size: int) -> float:
    """bf16 weights one TP rank reads per decode step (experts included: a large batch touches them all)."""
    return F.num_matmul_parameters(arch) * MC.BF16_BYTES / tensor_parallel_size


def concurrency(kv_cache_bytes: int, kv_bytes_per_token: int, seq_len: int, max_num_seqs: int, num_sequences: int) -> int:
    """Sequences one engine holds at full length at once (0: not even one fits)."""
    if kv_cache_bytes <= 0:
        return 0
    held = (kv_cache_bytes // kv_bytes_per_token) // seq_len
    return int(min(held, max_num_seqs, num_sequences))


def prefill_s(arch: ModelArch, perf: GpuPerf, tp: int, num_sequences: int, prompt_len: int, vision_flops_per_prompt: float) -> float:
    flops = num_sequences * (prompt_len * F.forward_flops_per_token(arch, prompt_len) + vision_flops_per_prompt)
    compute = flops / (tp * perf.bf16_flops_per_s * K.PREFILL_MFU)
    activation_bytes = num_sequences * prompt_len * arch.hidden_size * MC.BF16_BYTES
    tp_comm = TP_ALLREDUCES_PER_LAYER * arch.num_layers * comm.all_reduce_s(activation_bytes, tp, perf)
    return compute + tp_comm


def decode_step_s(arch: ModelArch, perf: GpuPerf, tp: int, batch: int, context: float, enforce_eager: bool) -> float:
    """One token for ``batch`` sequences of mean length ``context``."""
    kv_read = batch * context * V.kv_bytes_per_token(arch, tp)
    memory = (engine_weight_bytes(arch, tp) + kv_read) / (perf.memory_bytes_per_s * K.DECODE_MBU)
    compute = batch * F.forward_flops_per_token(arch, int(context)) / (tp * perf.bf16_flops_per_s * K.PREFILL_MFU)
    tp_comm = TP_ALLREDUCES_PER_LAYER * arch.num_layers * comm.all_reduce_s(batch * arch.hidden_size * MC.BF16_BYTES, tp, perf)
    launches = arch.num_layers * K.KERNELS_PER_LAYER * K.KERNEL_LAUNCH_S if enforce_eager else 0.0
    return max(memory, compute) + tp_comm + K.VLLM_DECODE_STEP_OVERHEAD_S + launches


def vllm_generation_s(
    arch: ModelArch, perf: GpuPerf, *, tp: int, num_sequences: int, prompt_len: int, completion_len: int,
    kv_cache_bytes: int, max_num_seqs: int, enforce_eager: bool, vision_flops_per_prompt: float = 0.0,
) -> float:
    """Wall time for one engine to generate ``num_sequences`` completions; inf if its KV cache
    cannot hold one full-length sequence."""
    if num_sequences <= 0:
        return 0.0
    seq_len = prompt_len + completion_len
    batch = concurrency(kv_cache_bytes, V.kv_bytes_per_token(arch, tp), seq_len, max_num_seqs, num_sequences)
    if batch == 0:
        return math.inf
    context = prompt_len + completion_len / 2
    full_waves, last = divmod(num_sequences, batch)

    def wave(size: int) -> float:
        decode = completion_len * decode_step_s(arch, perf, tp, size, context, enforce_eager)
        return prefill_s(arch, perf, tp, size, prompt_len, vision_flops_per_prompt) + decode

    return full_waves * wave(batch) + (wave(last) if last else 0.0)


def hf_generation_s(
    arch: ModelArch, perf: GpuPerf, *, num_sequences: int, prompt_len: int, completion_len: int,
    vision_flops_per_prompt: float = 0.0,
) -> float:
    """transformers `generate` on one rank: all local sequences in one padded batch, eager
    kernels, per-layer Python overhead each token."""
    if num_sequences <= 0:
        return 0.0
    prefill = num_sequences * (prompt_len * F.forward_flops_per_token(arch, prompt_len) + vision_flops_per_prompt)
    prefill_time = prefill / (perf.bf16_flops_per_s * K.PREFILL_MFU)
    context = prompt_len + completion_len / 2
    kv_read = num_sequences * context * V.kv_bytes_per_token(arch, 1)
    memory = (engine_weight_bytes(arch, 1) + kv_read) / (perf.memory_bytes_per_s * K.HF_DECODE_MBU)
    compute = num_sequences * F.forward_flops_per_token(arch, int(context)) / (perf.bf16_flops_per_s * K.PREFILL_MFU)
    overhead = arch.num_layers * (K.KERNELS_PER_LAYER * K.KERNEL_LAUNCH_S + K.HF_DECODE_PYTHON_OVERHEAD_PER_LAYER_S)
    return prefill_time + completion_len * (max(memory, compute) + overhead)
