"""The vLLM engine budget of a run (one worker per GPU)."""

from __future__ import annotations

import dataclasses

from ..catalog.models import ModelArch
from ..memory import constants as C
from ..memory import params as P
from ..memory import states as S
from ..memory import vllm as V
from ..memory import vllm_sampler as VS
from ..spec.run import FinetuneMethod, RunSpec
from . import vision_terms as VT
from .memo import Memo, value_key
from .shape import RunShape


_BUDGETS = Memo()


def engine_budget(spec: RunSpec, arch: ModelArch, shape: RunShape) -> V.EngineBudget:
    """The budget, computed once per distinct input (`planner.memo`): the arch, the fields of
    the spec and the shape read here and by `vision_terms.engine_encoder_bytes`."""
    ro = spec.rollout
    key = (
        arch, value_key(spec.finetune), value_key(spec.vision), value_key(ro.gpu_memory_utilization),
        value_key(ro.tensor_parallel_size), value_key(ro.enforce_eager), value_key(ro.cuda_graphs_in_budget),
        value_key(ro.vllm_version), value_key(ro.limit_images_per_prompt), value_key(shape.capacity_bytes), value_key(shape.vllm_max_num_batched_tokens),
        value_key(shape.vllm_max_num_seqs), value_key(shape.vllm_max_model_len),
    )
    return _BUDGETS.get(key, lambda: _engine_budget(spec, arch, shape))


def _engine_budget(spec: RunSpec, arch: ModelArch, shape: RunShape) -> V.EngineBudget:
    """Engine weights are bf16 (QLoRA: the 4-bit base, as TRL loads bitsandbytes models into
    vLLM); the profile peak adds the vision encoder's profile for VLMs."""
    ro = spec.rollout
    qlora = spec.finetune.method == FinetuneMethod.qlora
    stored = S.prequantized_weight_bytes(arch) if spec.finetune.method != FinetuneMethod.full else None
    if stored is not None:  # LoRA on a GPTQ/AWQ/FP8/bnb checkpoint: vLLM serves the stored format
        weights = stored
    else:
        weights = S.frozen_weight_bytes(arch, spec.finetune) if qlora else P.num_parameters(arch) * C.BF16_BYTES
    budget = V.engine_budget(
        arch, weights, shape.capacity_bytes, ro.gpu_memory_utilization, ro.tensor_parallel_size,
        shape.vllm_max_num_batched_tokens, shape.vllm_max_num_seqs, ro.enforce_eager, ro.cuda_graphs_in_budget,
        ro.vllm_version,
    )
    encoder = VT.engine_encoder_bytes(spec, shape, arch)
    state = VS.sampler_state_bytes(ro.vllm_version, shape.vllm_max_num_seqs, arch.vocab_size)
    if encoder + state > budget.activation_bytes:  # the sampler's persistent state stays through the encoder profile
        budget = dataclasses.replace(budget, activation_bytes=encoder + state)
    return budget
