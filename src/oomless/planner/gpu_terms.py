"""Pure terms the GPU phases use: what ZeRO-3 gathers to generate and to sync weights, LoRA's
saved branches and merge temporaries, and whether the actor recomputes log-probs
(`gpu_phases.GroupPlanner` assembles them into phases)."""

from __future__ import annotations

import functools

from ..catalog.models import ModelArch
from ..memory import activations as A
from ..memory import constants as C
from ..memory import params as P
from ..memory import states as S
from ..spec.run import Algorithm, FinetuneMethod, LoraSync, Role, RunSpec
from .roles import RoleModel, adapter_bytes
from .shape import RunShape


def generate_gathered_bytes(spec: RunSpec, models: dict[Role, RoleModel]) -> int:
    """What ZeRO-3 gathers beyond this GPU's shards while transformers generates: the actor,
    and the critic when it is one module with it (`critic.wrapped_with_actor`)."""
    if not S.SHARDING[spec.distribution.strategy].weights:
        return 0
    wrapped = [models[Role.critic]] if spec.critic.wrapped_with_actor and Role.critic in models else []
    return sum(m.weights_full - m.weights for m in (models[Role.actor], *wrapped))


def sync_gather_bytes(spec: RunSpec, m: RoleModel) -> int:
    """Unsharded 16-bit weights alive while the actor's weights go to the engine: the whole
    model, a 1/N batch of it (ms-swift `move_model_batches`), or one parameter at a time (TRL
    full fine-tuning: the largest module). LoRA merges need whole batches."""
    batches = spec.rollout.weight_sync_batches
    if batches is None and spec.finetune.method == FinetuneMethod.full:
        return P.num_largest_module_parameters(m.arch) * C.BF16_BYTES
    if spec.finetune.method != FinetuneMethod.full and spec.rollout.lora_sync == LoraSync.adapter_layers:
        return layered_summon_bytes(m)
    unsharded = m.weights_full - m.weights
    return unsharded // (batches or 1)


def layered_summon_bytes(m: RoleModel) -> int:
    """verl `layered_summon`: each FSDP unit (a decoder layer, or the embedding / LM head, the
    largest module) summoned alone, in the parameters' own dtype, beyond this GPU's shard of it.
    Source: verl utils/fsdp_utils.py `layered_summon_lora_params` (``FSDP.summon_full_params``
    per submodule, then ``empty_cache``), 0.4.1 to 0.9.1."""
    unit = largest_unit_bytes(m)
    return unit - unit // max(m.num_shards, 1)


def largest_unit_bytes(m: RoleModel) -> int:
    """The largest FSDP unit of ``m`` whole, in its parameters' dtype: a decoder layer, or the
    largest module (embedding / LM head) where that is bigger (sharding_terms `_gathered`)."""
    arch = m.arch
    per_param = m.weights_full // max(P.num_parameters(arch), 1)
    return max(P.num_decoder_layer_parameters(arch) // arch.num_layers, P.num_largest_module_parameters(arch)) * per_param


def lora_per_token(spec: RunSpec, arch: ModelArch) -> int:
    """Bytes the LoRA branches of one decoder layer save per token (0 for full fine-tuning);
    a token passes num_experts_per_tok of a layer's routed experts."""
    ft = spec.finetune
    if ft.method == FinetuneMethod.full:
        return 0
    inputs: list[int] = []
    for shape in P.decoder_linear_shapes(arch):
        if S.is_lora_target(shape.name, ft.lora_targets):
            inputs += [shape.in_features] * (arch.num_experts_per_tok if shape.num_per_layer > 1 else 1)
    return A.lora_saved_bytes_per_token(inputs, ft.lora_rank, ft.lora_dropout > 0, adapter_bytes(spec, ft) or C.FP32_BYTES)


@functools.lru_cache(maxsize=None)  # pure on a frozen arch (its hash is cached: catalog.arch)
def lora_merge_delta_bytes(arch: ModelArch) -> int:
    """`merge_adapter` adds ΔW = (B·A)·scaling module by module: two fp32 out×in temporaries
    (the product and its scaled copy) for the largest module (PEFT keeps adapters in fp32,
    autocast_adapter_dtype=True). Source: peft/tuners/lora/layer.py (`get_delta_weight`)."""
    largest = max(s.in_features * s.out_features for s, _ in S.linear_shapes_with_layer_counts(arch))
    return 2 * largest * C.FP32_BYTES


def actor_recomputes_logprobs(spec: RunSpec, shape: RunShape) -> bool:
    """Whether the actor runs a no-grad log-prob pass over the rollout batch.

    Set explicitly by `rollout.recompute_old_logprobs` (TRL >= 0.22 with vLLM computes old
    log-probs for its importance-sampling correction even with beta 0 and aligned steps:
    trl `grpo_trainer.py` `_generate_and_score_completions`, `vllm_importance_sampling_correction`
    default True, PR #3867); otherwise when the loss needs them: a rollout reused over several
    optimizer steps (TRL: gradient_accumulation_steps not a multiple of steps_per_generation),
    PPO, or a LoRA reference (the base with adapters disabled is the actor's module)."""
    if spec.rollout.recompute_old_logprobs is not None:
        return spec.rollout.recompute_old_logprobs
    lora_ref = spec.kl_beta > 0 and spec.finetune.method != FinetuneMethod.full and spec.algorithm != Algorithm.dapo
    return shape.reuses_rollout or spec.algorithm == Algorithm.ppo or lora_ref


def generation_scores_bytes(sequences: int, completion_tokens: int, vocab_size: int) -> int:
    """generate's per-step fp32 scores, stacked to [sequences, completion, vocab]: what TRL's
    PPOTrainer keeps as `logitss` from one rollout to the next (`rollout.keeps_generation_scores`).
    Source: transformers generation/utils.py `_sample` (`output_scores`: next-token scores in fp32),
    trl v0.17.0 trainer/utils.py `generate` (`torch.stack(output.scores, 1)`) and `batch_generation`
    (per-chunk scores, then `pad` copies them into one tensor), trainer/ppo_trainer.py `train`."""
    return sequences * completion_tokens * vocab_size * C.FP32_BYTES
