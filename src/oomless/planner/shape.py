"""Derived quantities of a run: token counts per forward, batch sizes, vLLM settings.

Everything here is plain arithmetic on the spec, the architecture and the GPU, computed once
per plan so that the phase builders receive only numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..catalog.gpus import GpuSpec
from ..catalog.models import ModelArch
from ..memory import vllm as V
from ..spec.run import RunSpec
from ..units import gib_to_bytes
from . import vision_terms as VT


@dataclass(frozen=True)
class RunShape:
    capacity_bytes: int
    image_tokens_per_prompt: int
    """LLM tokens the prompt's images add, at the worst case the declared limits allow."""
    prompt_len: int
    """Longest prompt: max_prompt_tokens of text plus the image tokens."""
    seq_len: int
    completion_len: int
    train_sequences: int
    logprob_sequences: int
    generation_sequences_per_gpu: int
    """Completions each training rank generates per rollout (TRL: per_device_train_batch_size
    × steps_per_generation), times DAPO's over-sampling factor."""
    reuses_rollout: bool
    """One rollout batch feeds several optimizer steps, so old log-probs are computed
    (TRL: steps_per_generation > gradient_accumulation_steps)."""
    vllm_max_num_batched_tokens: int
    vllm_max_num_seqs: int
    vllm_max_model_len: int


def capacity_bytes(spec: RunSpec, gpu: GpuSpec | None) -> int:
    if spec.hardware.gpu_capacity_gib is not None:
        return gib_to_bytes(spec.hardware.gpu_capacity_gib)
    assert gpu is not None, "spec validation guarantees a GPU or an explicit capacity"
    return gpu.capacity_bytes


def run_shape(spec: RunSpec, arch: ModelArch, gpu: GpuSpec | None) -> RunShape:
    ro = spec.rollout
    cap = capacity_bytes(spec, gpu)
    is_a100 = gpu is not None and gpu.id.startswith("A100")
    image_tokens = VT.image_tokens_per_prompt(spec, arch)
    prompt = spec.lengths.max_prompt_tokens + image_tokens
    seq = prompt + spec.lengths.max_completion_tokens
    generated = spec.batch.micro_batch_size * spec.steps_per_generation
    return RunShape(
        capacity_bytes=cap,
        image_tokens_per_prompt=image_tokens,
        prompt_len=prompt,
        seq_len=seq,
        completion_len=spec.lengths.max_completion_tokens,
        train_sequences=spec.batch.micro_batch_size,
        logprob_sequences=spec.logprob_micro_batch_size,
        generation_sequences_per_gpu=math.ceil(generated * spec.batch.oversample_factor),
        reuses_rollout=spec.steps_per_generation > spec.batch.gradient_accumulation_steps,
        vllm_max_num_batched_tokens=ro.max_num_batched_tokens or V.default_max_num_batched_tokens(cap, is_a100),
        vllm_max_num_seqs=ro.max_num_seqs or V.default_max_num_seqs(cap, is_a100),
        vllm_max_model_len=ro.max_model_len or seq,
    )
