"""Derived quantities of a run: token counts per forward, batch sizes, vLLM settings.

Everything here is plain arithmetic on the spec, the architecture and the GPU, computed once
per plan so that the phase builders receive only numbers.
"""

from __future__ import annotations

import dataclasses

import math
from dataclasses import dataclass

from ..catalog.gpus import GpuSpec
from ..catalog.models import ModelArch
from ..memory import vllm as V
from ..spec.run import RolloutEngine, RunSpec
from ..units import gib_to_bytes
from . import vision_terms as VT
from .batches import DataLengths, MicroBatch, budget_micro_batch, packed_micro_batch, padded_micro_batch


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
    × steps_per_generation), times DAPO's over-sampling factor.

    Not a function of num_generations: `batch.micro_batch_size` counts completions, and the
    group size only decides how many distinct prompts they come from. Source: TRL 1.16.0
    trl/trainer/grpo_trainer.py: the dataloader yields per_device_train_batch_size ×
    steps_per_generation rows per process, prompts already repeated num_generations times
    (l. 1268-1275, RepeatSampler l. 1311-1312); one `unwrapped_model.generate` holds that whole
    slice (l. 1873); log-prob forwards take per_device_train_batch_size rows at a time (l. 2505,
    2651). TRL 0.14.0, where per_device_train_batch_size counted prompts and generate
    (`num_return_sequences=num_generations`, l. 335, 422) and every forward (l. 444, 448) held
    prompts × num_generations rows, is read into completions by its adapters
    (adapters/vlmr1/reader.py). num_generations enters the plan only as vLLM's n per request
    (`planner/timeline.py`, V0's retained n > 1 requests)."""
    reuses_rollout: bool
    """One rollout batch feeds several optimizer steps, so old log-probs are computed
    (TRL: steps_per_generation > gradient_accumulation_steps)."""
    vllm_max_num_batched_tokens: int
    vllm_max_num_seqs: int
    vllm_max_model_len: int
    lengths: DataLengths
    """What the planned batch's sequences hold (the limits for the worst case)."""
    train_batch: MicroBatch
    logprob_batch: MicroBatch
    worst: bool = True
    """The worst batch the limits allow (else a typical one)."""


def capacity_bytes(spec: RunSpec, gpu: GpuSpec | None) -> int:
    if spec.hardware.gpu_capacity_gib is not None:
        return gib_to_bytes(spec.hardware.gpu_capacity_gib)
    assert gpu is not None, "spec validation guarantees a GPU or an explicit capacity"
    return gpu.capacity_bytes


def limit_lengths(spec: RunSpec) -> DataLengths:
    """The declared limits: the worst case every sequence may reach."""
    return DataLengths(
        spec.lengths.max_prompt_tokens, spec.lengths.max_completion_tokens, None, spec.vision.images_per_prompt,
    )


def engine_capped(spec: RunSpec, data: DataLengths, image_tokens: int) -> DataLengths:
    """Sequences as vLLM can produce them: none longer than an explicit ``rollout.max_model_len``.

    vLLM rejects a prompt longer than max_model_len and stops a request when prompt + output
    reach it (V1 ``check_stop``: ``num_tokens >= max_model_len`` → FINISHED_LENGTH_CAPPED), so a
    trained sequence holds at most max_model_len tokens whatever the prompt/completion limits
    say. The worst such sequence keeps the longest completion the cap leaves after the images
    (logits grow with completion tokens), the prompt text filling the rest.
    Source: vllm/v1/core/sched/utils.py (check_stop), vllm/v1/engine/processor.py
    (``_validate_model_input``: prompt longer than max_model_len). Applies to vLLM rollouts
    with ``rollout.max_model_len`` set; HF generation has no such cap."""
    cap = spec.rollout.max_model_len
    inside = image_tokens if spec.lengths.max_prompt_counts_images else 0  # images counted in the prompt field
    text = max(0, data.prompt_tokens - inside)
    if spec.rollout.engine == RolloutEngine.hf or cap is None or text + image_tokens + data.completion_tokens <= cap:
        return data
    completion = max(1, min(data.completion_tokens, cap - image_tokens - 1))
    text = max(0, min(text, cap - image_tokens - completion)) + inside
    return dataclasses.replace(data, prompt_tokens=text, completion_tokens=completion)


def micro_batches(spec: RunSpec, seq_len: int, completion_len: int, generated: int, worst: bool) -> tuple[MicroBatch, MicroBatch]:
    """Training and log-prob micro-batches on one GPU when every sequence holds ``seq_len``
    tokens (`batches.py`): token budgets, packing, padding; sequence parallel slices."""
    b, sp = spec.batch, spec.distribution.sequence_parallel_size

    def one(budget: int | None, sequences: int, available: int) -> MicroBatch:
        if budget is not None:
            return budget_micro_batch(budget, available, seq_len, worst, b.token_budget_balance, sp, padded=not b.padding_free)
        if b.padding_free:
            return packed_micro_batch(sequences * seq_len, sequences, sp)
        return padded_micro_batch(sequences, seq_len, completion_len, sp)

    train = one(b.max_tokens_per_gpu, b.micro_batch_size, b.micro_batch_size * b.gradient_accumulation_steps)
    logprob = one(b.logprob_token_budget, spec.logprob_micro_batch_size, generated)
    return train, logprob


def run_shape(spec: RunSpec, arch: ModelArch, gpu: GpuSpec | None, lengths: DataLengths | None = None, worst: bool = True) -> RunShape:
    """The shape of a run whose sequences hold ``lengths`` (default: the limits). ``worst``
    packs token budgets at the most they allow, else at a typical step's balanced part."""
    ro = spec.rollout
    cap = capacity_bytes(spec, gpu)
    is_a100 = gpu is not None and gpu.id.startswith("A100")
    data = lengths or limit_lengths(spec)
    image_tokens = VT.image_tokens(spec, arch, data.image_pixels, data.images_per_prompt)
    data = engine_capped(spec, data, image_tokens)
    prompt = VT.prompt_tokens_with_images(spec, data.prompt_tokens, image_tokens)
    seq = prompt + data.completion_tokens
    limit_seq = (VT.prompt_tokens_with_images(spec, spec.lengths.max_prompt_tokens, VT.image_tokens_per_prompt(spec, arch))
                 + spec.lengths.max_completion_tokens)
    generated = spec.batch.micro_batch_size * spec.steps_per_generation
    generation = math.ceil(generated * spec.batch.oversample_factor)
    train, logprob = micro_batches(spec, seq, data.completion_tokens, generation, worst)
    return RunShape(
        capacity_bytes=cap,
        image_tokens_per_prompt=image_tokens,
        prompt_len=prompt,
        seq_len=seq,
        completion_len=data.completion_tokens,
        train_sequences=spec.batch.micro_batch_size,
        logprob_sequences=spec.logprob_micro_batch_size,
        generation_sequences_per_gpu=generation,
        reuses_rollout=spec.steps_per_generation > spec.batch.gradient_accumulation_steps,
        vllm_max_num_batched_tokens=ro.max_num_batched_tokens or V.default_max_num_batched_tokens(cap, is_a100),
        vllm_max_num_seqs=ro.max_num_seqs or V.default_max_num_seqs(cap, is_a100),
        vllm_max_model_len=ro.max_model_len or limit_seq,
        lengths=data,
        train_batch=train,
        logprob_batch=logprob,
        worst=worst,
    )
