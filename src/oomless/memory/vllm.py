"""GPU memory of a vLLM (V1) engine worker: its budget, weights, profile peak and KV cache.

vLLM reserves ``ceil(utilization × total)`` per GPU (a per-instance limit), checks at start-up
that that much is free, profiles one dummy forward, and gives what is left of the budget to
the KV cache:

    available_kv = requested − (weights + profile activation peak + non-torch + CUDA graphs)

Source: vllm/v1/worker/gpu_worker.py (`init_device`, `determine_available_memory`),
vllm/utils/mem_utils.py (`memory_profiling`); research/memory-model.md §2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..catalog.models import ModelArch
from . import activations as A
from . import constants as C
from . import vllm_sampler as VS


def requested_bytes(capacity_bytes: int, utilization: float) -> int:
    """The engine's budget on one GPU: ceil(total × gpu_memory_utilization)."""
    return math.ceil(capacity_bytes * utilization)


def weight_bytes_per_rank(model_weight_bytes: int, tensor_parallel_size: int) -> int:
    """Engine weights per TP rank: linears and the vocab-parallel embedding/head are split
    over TP ranks (Megatron-style layers in vllm/model_executor/layers/linear.py).
    Assumes: replicated norms are negligible."""
    return math.ceil(model_weight_bytes / tensor_parallel_size)


def kv_heads_per_rank(arch: ModelArch, tensor_parallel_size: int) -> int:
    """KV heads on one TP rank; replicated when there are fewer KV heads than ranks.
    Source: vllm QKVParallelLinear (`num_kv_head_replicas`)."""
    return max(1, arch.num_kv_heads // tensor_parallel_size)


def kv_bytes_per_token(arch: ModelArch, tensor_parallel_size: int) -> int:
    """KV-cache bytes per token on one rank: 2 (K and V) · layers · kv heads · head_dim · 2 B.
    MLA caches one compressed latent (kv_lora_rank + rope dim) per layer, not split by TP.
    Source: vllm/v1/kv_cache_interface.py (`FullAttentionSpec.page_size_bytes`, `MLAAttentionSpec`)."""
    if arch.kv_lora_rank:
        return arch.num_layers * (arch.kv_lora_rank + arch.qk_rope_head_dim) * C.BF16_BYTES
    return 2 * arch.num_layers * kv_heads_per_rank(arch, tensor_parallel_size) * arch.head_dim * C.BF16_BYTES


def kv_bytes_for_sequence(arch: ModelArch, tensor_parallel_size: int, num_tokens: int) -> int:
    """KV bytes one sequence of ``num_tokens`` needs, rounded up to whole 16-token blocks."""
    blocks = math.ceil(num_tokens / C.VLLM_BLOCK_SIZE)
    return blocks * C.VLLM_BLOCK_SIZE * kv_bytes_per_token(arch, tensor_parallel_size)


def default_max_num_batched_tokens(capacity_bytes: int, is_a100: bool) -> int:
    """vLLM LLM-class default: 16384 on GPUs with >= 70 GiB that are not A100, else 8192.
    Source: vllm/engine/arg_utils.py `EngineArgs.get_batch_defaults`."""
    large = capacity_bytes >= C.VLLM_LARGE_GPU_BYTES and not is_a100
    return C.VLLM_MAX_NUM_BATCHED_TOKENS_LARGE if large else C.VLLM_MAX_NUM_BATCHED_TOKENS_SMALL


def default_max_num_seqs(capacity_bytes: int, is_a100: bool) -> int:
    """vLLM default max_num_seqs: 1024 on >= 70 GiB non-A100 GPUs, else 256 (same source)."""
    large = capacity_bytes >= C.VLLM_LARGE_GPU_BYTES and not is_a100
    return C.VLLM_MAX_NUM_SEQS_LARGE if large else C.VLLM_MAX_NUM_SEQS_SMALL


def profile_activation_bytes(arch: ModelArch, tensor_parallel_size: int, max_num_batched_tokens: int, max_num_seqs: int,
                             vllm_version: str | None = None) -> int:
    """Torch peak of vLLM's profile run: the larger of the dummy forward over
    max_num_batched_tokens tokens and the dummy sampler run over
    min(max_num_seqs, max_num_batched_tokens) rows of vocab logits (plus the forward's hidden
    states that profile_run keeps meanwhile), by vLLM version (None: the newest release); plus
    model runner V2's persistent sampler state, which vLLM also subtracts before the KV cache.
    Source: vllm/v1/worker/gpu_model_runner.py `profile_run`, `_dummy_sampler_run`;
    memory/vllm_sampler.py for what each version's sampler holds at its peak."""
    forward = A.inference_forward_peak_bytes(arch, max_num_batched_tokens, tensor_parallel_size)
    sampler = profile_sampler_bytes(arch, max_num_batched_tokens, max_num_seqs, vllm_version)
    return max(forward, sampler) + VS.sampler_state_bytes(vllm_version, max_num_seqs, arch.vocab_size)


def profile_sampler_bytes(arch: ModelArch, max_num_batched_tokens: int, max_num_seqs: int, vllm_version: str | None) -> int:
    """The dummy sampler run's peak plus the forward output profile_run holds through it.
    Assumes: the [R, hidden] last-token states and their random copy are negligible; the
    logits span the whole vocabulary on every TP rank (gathered before sampling)."""
    rows = VS.sampler_rows(max_num_batched_tokens, max_num_seqs)
    return (VS.sampler_peak_bytes(vllm_version, rows, arch.vocab_size)
            + VS.retained_forward_output_bytes(vllm_version, max_num_batched_tokens, arch.hidden_size))


def non_torch_bytes(tensor_parallel_size: int) -> int:
    """Non-torch memory growth during engine start: cuBLAS etc., plus NCCL when TP > 1."""
    nccl = C.NCCL_COMMUNICATOR_BYTES if tensor_parallel_size > 1 else 0
    return C.VLLM_NON_TORCH_BYTES + nccl


def cuda_graph_bytes(enforce_eager: bool) -> int:
    """CUDA graph pool: none with enforce_eager (see constants.VLLM_CUDA_GRAPH_BYTES)."""
    return 0 if enforce_eager else C.VLLM_CUDA_GRAPH_BYTES


GRAPHS_IN_BUDGET_FROM = (0, 21)
"""First vLLM release that profiles CUDA graphs inside gpu_memory_utilization (`EngineBudget.graphs_in_budget`;
research/memory-model.md: `VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS` default-on from v0.21)."""


@dataclass(frozen=True)
class EngineBudget:
    """How one vLLM worker's budget on one GPU splits; ``kv_cache_bytes`` may be negative,
    which is vLLM's "No available memory for the cache blocks" error."""

    requested_bytes: int
    weight_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    cuda_graph_bytes: int
    graphs_in_budget: bool = True
    """vLLM >= 0.21 profiles CUDA graphs inside the budget; older versions capture them after
    the KV cache is sized, on top of it (vllm#11251; v0.21 release notes)."""

    @property
    def kv_cache_bytes(self) -> int:
        graphs = self.cuda_graph_bytes if self.graphs_in_budget else 0
        return self.requested_bytes - self.weight_bytes - self.activation_bytes - self.non_torch_bytes - graphs

    @property
    def footprint_bytes(self) -> int:
        """What the engine holds on the GPU awake, beyond its CUDA context."""
        return self.requested_bytes + (0 if self.graphs_in_budget else self.cuda_graph_bytes)


def engine_budget(
    arch: ModelArch,
    model_weight_bytes: int,
    capacity_bytes: int,
    utilization: float,
    tensor_parallel_size: int,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    enforce_eager: bool,
    graphs_in_budget: bool = True,
    vllm_version: str | None = None,
) -> EngineBudget:
    return EngineBudget(
        requested_bytes=requested_bytes(capacity_bytes, utilization),
        weight_bytes=weight_bytes_per_rank(model_weight_bytes, tensor_parallel_size),
        activation_bytes=profile_activation_bytes(arch, tensor_parallel_size, max_num_batched_tokens, max_num_seqs, vllm_version),
        non_torch_bytes=non_torch_bytes(tensor_parallel_size),
        cuda_graph_bytes=cuda_graph_bytes(enforce_eager),
        graphs_in_budget=graphs_in_budget,
    )
