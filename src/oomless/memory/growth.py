"""Memory that grows with the step count, and memory that comes back at every checkpoint.

Pure functions of integers, one term each, bytes per node. The step timeline
(``planner.timeline``) adds them to a plan's steady host peak.

Terms:

- ``vllm_v0_parallel_sampling_leak_bytes_per_step``: vLLM's V0 ``LLMEngine`` keeps every
  request of a ``SamplingParams(n > 1)`` call in ``seq_id_to_seq_group`` after it finishes
  (``ParallelSampleSequenceGroup.add_request`` adds the pair, nothing removes it), with its
  processed inputs: prompt token ids and, for VLMs, the image processor's ``pixel_values``.
  Source: vllm-project/vllm issue #14353 (2025-03-06, vLLM 0.7.3) and #15597 (Qwen2-VL, from
  0.7.0), fixes vllm PR #14326 and #16472; ms-swift PR #3515 (the same leak under GRPO with
  n > 1). Applies to the V0 engine of vLLM 0.7.x (``LEAKING_VLLM``).
- ``checkpoint_save_host_bytes``: what a checkpoint save adds to the node's host RAM while it
  runs: the gathered 16-bit weights on rank 0 (DeepSpeed ZeRO-3
  ``stage3_gather_16bit_weights_on_model_save`` / FSDP ``FULL_STATE_DICT`` with
  ``offload_to_cpu`` and ``rank0_only``), plus each rank's optimizer partition serialised by
  ``torch.save`` through host memory unless only the model is saved.

Not modelled as growth, with the reason: the Ray object store keeps its high-water pages (freed
chunks are reused, not returned), which the plan holds from the first step on at the worst
step's batch (``memory.host.ray_object_store_bytes``; a framework that leaks object references
would grow it up to its size, which no source we read shows); PyTorch's pinned-host cache keeps one block per
power-of-two size class, so offloads of varying sizes reach a plateau that the plan's
power-of-two rounding already bounds (``memory.pinned``); allocator fragmentation is a GPU term
of the plan (``allocator_fragmentation``).
"""

from __future__ import annotations

import math

from ..spec.releases import in_releases

LEAKING_VLLM = ">=0.7.0,<0.8.0"
"""vLLM releases whose default (V0) engine leaks finished n > 1 requests: the leak arrived
with ``ParallelSampleSequenceGroup`` in 0.7.0 (vllm #15597) and the V1 engine, default from
0.8.0, keeps no ``seq_id_to_seq_group``. Users who force V0 on 0.8.x (``VLLM_USE_V1=0``) keep
the leak until vllm PR #16472; that case is not detected."""

TOKEN_ID_BYTES_PER_SEQUENCE = 8 + 8 + 28
"""Host bytes per token id a finished V0 sequence keeps: ``SequenceData`` holds prompt and
output ids in ``array('l')`` (8 B each) and a cached list of all ids (an 8 B pointer to a
28 B Python int; ids above 256 are not interned). Source: vllm/sequence.py (v0.7.3,
``SequenceData._prompt_token_ids``, ``_output_token_ids``, ``_cached_all_token_ids``);
CPython ``sys.getsizeof(1000) == 28``."""

PIXEL_VALUE_BYTES = 4
"""Image processors return ``pixel_values`` in float32 (rescale + normalize), and vLLM V0
keeps them as the processor returned them. Source: transformers
image_processing_qwen2_vl.py (``rescale``/``normalize`` on float32 arrays)."""


def is_leaking_vllm(version: str | None) -> bool:
    """True for a vLLM version in ``LEAKING_VLLM``; False when unknown or unparsable."""
    return in_releases(version, LEAKING_VLLM)


def pixel_value_bytes_per_image(num_patches: int, patch_size: int, temporal_patch_size: int, in_chans: int) -> int:
    """``pixel_values`` of one image: one row per patch of in_chans × temporal × patch²
    values (Qwen2/2.5-VL: 3 × 2 × 14² = 1,176 floats per patch row).
    Source: transformers image_processing_qwen2_vl.py (``flatten_patches``)."""
    return num_patches * in_chans * max(temporal_patch_size, 1) * patch_size * patch_size * PIXEL_VALUE_BYTES


def retained_request_bytes(prompt_tokens: int, completion_tokens: int, num_samples: int,
                           pixel_value_bytes_per_prompt: int) -> int:
    """Host bytes one leaked n-sample request keeps: the processed inputs once (shared by the
    n sub-requests: ``_add_processed_request(..., **kwargs)`` passes the same object), and each
    sub-request's sequence with its prompt and output ids.
    Assumes: every completion reaches ``completion_tokens`` (the limit, or a typical length)."""
    per_sequence = (prompt_tokens + completion_tokens) * TOKEN_ID_BYTES_PER_SEQUENCE
    return pixel_value_bytes_per_prompt + num_samples * per_sequence


def vllm_v0_parallel_sampling_leak_bytes_per_step(prompts_per_node_per_step: int, retained_bytes_per_prompt: int,
                                                   engine_copies_per_prompt: int = 1) -> int:
    """Host bytes the node's engines leak per optimizer step: every prompt generated for
    (with n > 1) stays referenced, once in every process that holds an ``LLMEngine`` for it.

    ``engine_copies_per_prompt``: SPMD engines (``distributed_executor_backend=
    "external_launcher"``: verl's and EasyR1's ``vllm_rollout_spmd.py``, TRL's colocate mode)
    run one ``LLMEngine`` in every tensor-parallel rank, each given the whole TP group's prompts
    (EasyR1 ``verl/workers/sharding_manager/fsdp_vllm.py`` ``preprocess_data`` all-gathers the
    batch and its ``non_tensor_batch``, images included, across the TP group; verl likewise),
    so each rank keeps its own copy: the TP size. A server engine (vLLM's own worker processes)
    keeps one copy in its engine process: 1. Source: EasyR1 ``verl/workers/rollout/
    vllm_rollout/vllm_rollout_spmd.py`` (2025-03, ``LLM(..., distributed_executor_backend=
    "external_launcher")``); vLLM ``ExecutorWithExternalLauncher`` docs (every rank runs the
    engine)."""
    return prompts_per_node_per_step * retained_bytes_per_prompt * max(engine_copies_per_prompt, 1)


def checkpoint_save_host_bytes(gathered_weight_bytes: int, optimizer_partition_bytes_per_rank: int,
                               ranks_on_node: int, rank0_on_node: bool, save_only_model: bool) -> int:
    """Host bytes a checkpoint save adds on one node while it runs.

    Source: DeepSpeed ``_zero3_consolidated_16bit_state_dict`` (16-bit weights gathered to rank
    0's CPU), torch FSDP ``FullStateDictConfig(offload_to_cpu=True, rank0_only=True)`` (verl's
    HF export, EasyR1), DeepSpeed ``save_checkpoint`` / FSDP sharded optimizer save (each rank
    ``torch.save``s its partition: device tensors are copied to host while serialised).
    Assumes: ranks save at the same time (one barrier), so their copies coexist."""
    weights = gathered_weight_bytes if rank0_on_node else 0
    optimizer = 0 if save_only_model else optimizer_partition_bytes_per_rank * ranks_on_node
    return weights + optimizer


def first_step_over(base_bytes: int, growth_bytes_per_step: int, limit_bytes: int, horizon_steps: int,
                    spike_bytes: int = 0, spike_every: int | None = None) -> int | None:
    """The first step (1-based) whose host peak crosses ``limit_bytes``: the steady peak plus
    ``growth × (step − 1)`` (nothing leaked before the first rollout), plus ``spike_bytes`` at
    steps divisible by ``spike_every``. None if no step up to ``horizon_steps`` crosses."""
    if base_bytes > limit_bytes:
        return 1
    candidates = []
    if growth_bytes_per_step > 0:
        step = (limit_bytes - base_bytes) // growth_bytes_per_step + 2  # growth × (step − 1) > room
        if step <= horizon_steps:
            candidates.append(step)
    if spike_every and spike_bytes > 0:
        room = limit_bytes - base_bytes - spike_bytes
        if room < 0:
            first_save = spike_every
        elif growth_bytes_per_step > 0:
            first_save = math.ceil((room // growth_bytes_per_step + 2) / spike_every) * spike_every
        else:
            first_save = horizon_steps + 1
        if first_save <= horizon_steps:
            candidates.append(first_save)
    return min(candidates) if candidates else None
