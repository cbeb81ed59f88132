"""Derived quantities of a run: how many GPUs train, token counts per forward, vLLM settings.

Everything here is plain arithmetic on the spec, the architecture and the GPU, computed once
per plan so that the phase builders receive only numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..catalog.gpus import GpuSpec
from ..catalog.models import ModelArch
from ..memory import vllm as V
from ..spec.run import RolloutEngine, RunSpec
from ..units import gib_to_bytes


@dataclass(frozen=True)
class RunShape:
    capacity_bytes: int
    num_train_gpus_per_node: int
    num_rollout_gpus_per_node: int
    """GPUs per node that only run vLLM (vllm_separate); 0 otherwise."""
    data_parallel_size: int
    """N: training ranks over all nodes, the shard degree of ZeRO/FSDP."""
    seq_len: int
    completion_len: int
    train_sequences: int
    logprob_sequences: int
    generation_sequences_per_gpu: int
    """Completions each training rank generates per rollout (TRL: per_device_train_batch_size
    × steps_per_generation)."""
    needs_logprob_pass: bool
    vllm_max_num_batched_tokens: int
    vllm_max_num_seqs: int
    vllm_max_model_len: int


def capacity_bytes(spec: RunSpec, gpu: GpuSpec | None) -> int:
    if spec.hardware.gpu_capacity_gib is not None:
        return gib_to_bytes(spec.hardware.gpu_capacity_gib)
    assert gpu is not None, "spec validation guarantees a GPU or an explicit capacity"
    return gpu.capacity_bytes


def needs_logprob_pass(spec: RunSpec) -> bool:
    """A no-grad log-prob forward runs when KL needs reference log-probs (beta > 0) or when a
    rollout batch feeds more than one optimizer step, which needs the old policy's log-probs
    (TRL: steps_per_generation > gradient_accumulation_steps)."""
    reuses_rollout = spec.steps_per_generation > spec.batch.gradient_accumulation_steps
    return spec.kl_beta > 0 or reuses_rollout


def run_shape(spec: RunSpec, arch: ModelArch, gpu: GpuSpec | None) -> RunShape:
    hw, ro = spec.hardware, spec.rollout
    cap = capacity_bytes(spec, gpu)
    rollout_gpus = ro.num_gpus if ro.engine == RolloutEngine.vllm_separate else 0
    train_gpus = hw.gpus_per_node - rollout_gpus
    is_a100 = gpu is not None and gpu.id.startswith("A100")
    return RunShape(
        capacity_bytes=cap,
        num_train_gpus_per_node=train_gpus,
        num_rollout_gpus_per_node=rollout_gpus,
        data_parallel_size=train_gpus * hw.num_nodes,
        seq_len=spec.max_sequence_tokens,
        completion_len=spec.lengths.max_completion_tokens,
        train_sequences=spec.batch.micro_batch_size,
        logprob_sequences=spec.logprob_micro_batch_size,
        generation_sequences_per_gpu=spec.batch.micro_batch_size * spec.steps_per_generation,
        needs_logprob_pass=needs_logprob_pass(spec),
        vllm_max_num_batched_tokens=ro.max_num_batched_tokens or V.default_max_num_batched_tokens(cap, is_a100),
        vllm_max_num_seqs=ro.max_num_seqs or V.default_max_num_seqs(cap, is_a100),
        vllm_max_model_len=ro.max_model_len or spec.max_sequence_tokens,
    )
