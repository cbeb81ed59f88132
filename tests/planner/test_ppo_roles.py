"""PPO and relatives: roles, placement groups, per-role states and processes."""

from __future__ import annotations

import pytest

from oomless.catalog.resolve import load_model
from oomless.memory import constants as C
from oomless.errors import InputError
from oomless.memory import params as P
from oomless.memory import states as S
from oomless.planner.roles import num_value_model_parameters
from oomless.spec.load import parse_spec
from oomless.spec.run import Role
from tests.helpers import BASE_SPEC, component, merged, plan_of

PPO = merged(BASE_SPEC, algorithm="ppo")


def test_value_model_drops_the_vocab_head_and_adds_a_scalar_head() -> None:
    arch = load_model("Qwen/Qwen2.5-7B-Instruct")  # untied lm_head of 152064 × 3584
    assert num_value_model_parameters(arch) == P.num_parameters(arch) - 152_064 * 3_584 + 3_584


def test_ppo_adds_a_trained_critic_with_its_own_phase() -> None:
    plan = plan_of(PPO)
    assert set(plan.models) == {Role.actor, Role.reference, Role.critic}
    names = [p.name for p in plan.devices[0].phases]
    assert names == ["load", "rollout", "logprob", "critic_train", "train", "optimizer", "weight_sync"]
    critic = plan.models[Role.critic]
    assert critic.trainable and critic.optimizer > 0
    # The critic's optimizer states sit on the GPU beside the actor's from load on.
    assert component(plan, "load", "critic.master_weights") + component(plan, "load", "critic.optimizer_states") == critic.optimizer
    assert component(plan, "critic_train", "critic.grads") == critic.grads
    assert component(plan, "critic_train", "logits") == 0  # a value head, no vocabulary logits


def test_grpo_has_no_critic_and_dapo_no_reference() -> None:
    assert Role.critic not in plan_of(BASE_SPEC).models
    dapo = plan_of(merged(BASE_SPEC, algorithm="dapo"))
    assert Role.reference not in dapo.models


def test_dapo_oversampling_grows_hf_generation() -> None:
    base = merged(BASE_SPEC, algorithm="dapo", **{"rollout.engine": "hf", "rollout.sleep_level": 0})
    once = plan_of(base)
    thrice = plan_of(merged(base, **{"batch.oversample_factor": 3}))
    assert component(thrice, "rollout", "generate.kv_cache") == 3 * component(once, "rollout", "generate.kv_cache")


def test_separate_groups_shard_each_model_over_its_own_gpus() -> None:
    # OpenRLHF without colocate_all: actor+reference on 2 GPUs, critic on 2, vLLM on 4.
    data = merged(PPO, **{
        "hardware.gpus_per_node": 8, "rollout.engine": "vllm_separate", "rollout.sleep_level": 0,
        "placement.groups": [
            {"roles": ["actor", "reference"], "gpus_per_node": 2},
            {"roles": ["critic"], "gpus_per_node": 2},
            {"roles": ["vllm"], "gpus_per_node": 4},
        ],
    })
    plan = plan_of(data)
    assert [d.role for d in plan.devices] == ["train", "critic", "rollout"]
    assert plan.models[Role.actor].num_shards == 2
    assert plan.models[Role.critic].num_shards == 2
    critic_gpu = plan.devices[1]
    assert [p.name for p in critic_gpu.phases] == ["load", "logprob", "critic_train", "optimizer"]


def test_process_per_role_pays_a_context_per_process() -> None:
    shared = plan_of(PPO)
    split = plan_of(merged(PPO, **{"placement.process_per_role": True}))
    ctx = lambda plan: sum(c.num_bytes for c in plan.devices[0].phases[0].components if c.name.endswith("cuda_context"))  # noqa: E731
    assert ctx(shared) == C.CUDA_CONTEXT_BYTES
    assert ctx(split) == 4 * C.CUDA_CONTEXT_BYTES  # actor, reference, critic, vLLM worker


def test_offloading_idle_models_frees_the_gpu_and_fills_the_host() -> None:
    on = plan_of(merged(PPO, **{"placement.offload_idle_models": True}))
    off = plan_of(PPO)
    assert component(on, "train", "critic.optimizer_states") == 0
    assert component(off, "train", "critic.optimizer_states") > 0
    host = {c.name for p in on.host.phases for c in p.components}
    assert "moved_to_cpu.critic.optimizer_states" in host


def test_engine_created_first_sees_an_empty_gpu() -> None:
    first = plan_of(merged(PPO, **{"rollout.engine_starts_first": True}))
    start = next(c for c in first.constraints if c.component == "vllm.gpu_memory_utilization")
    assert start.available_bytes == first.shape.capacity_bytes - C.CUDA_CONTEXT_BYTES - C.NCCL_COMMUNICATOR_BYTES


def test_reference_model_only_for_full_finetuning_with_kl() -> None:
    from oomless.planner.roles import has_reference_model
    assert has_reference_model(parse_spec(BASE_SPEC))
    assert not has_reference_model(parse_spec(merged(BASE_SPEC, kl_beta=0.0)))
    assert not has_reference_model(parse_spec(merged(BASE_SPEC, **{"finetune.method": "lora"})))
    assert not has_reference_model(parse_spec(merged(BASE_SPEC, algorithm="dapo")))


def test_a_value_model_wrapped_with_the_policy_is_gathered_for_generation() -> None:
    """TRL PPOTrainer generates inside `unwrap_model_for_generation(PolicyAndValueWrapper)`:
    under ZeRO-3 the value model is gathered with the policy."""
    hf = merged(PPO, **{"rollout.engine": "hf", "rollout.sleep_level": 0, "distribution.strategy": "zero3"})
    alone, wrapped = plan_of(hf), plan_of(merged(hf, **{"critic.wrapped_with_actor": True}))
    critic = wrapped.models[Role.critic]
    extra = critic.weights_full - critic.weights
    assert extra > 0
    assert component(wrapped, "rollout", "generate.gathered_weights") == component(alone, "rollout", "generate.gathered_weights") + extra
    # without ZeRO-3 nothing is gathered, wrapped or not
    ddp = merged(hf, **{"distribution.strategy": "zero2", "critic.wrapped_with_actor": True})
    assert component(plan_of(ddp), "rollout", "generate.gathered_weights") == 0


def test_only_ppo_has_a_value_model_to_wrap() -> None:
    with pytest.raises(InputError, match="wrapped_with_actor"):
        plan_of(merged(BASE_SPEC, **{"critic.wrapped_with_actor": True}))


def test_a_lora_critic_trains_its_adapters_and_value_head_only() -> None:
    """ms-swift PPO puts the run's LoRA on the value model too (`critic.lora`)."""
    lora = merged(PPO, finetune={"method": "lora", "lora_rank": 16})
    full_critic, lora_critic = plan_of(lora), plan_of(merged(lora, **{"critic.lora": True}))
    arch = lora_critic.models[Role.critic].arch
    spec = merged(lora, **{"critic.lora": True})
    adapters = S.num_trainable_parameters(arch, parse_spec(spec).finetune)
    assert lora_critic.models[Role.critic].num_trainable == adapters + arch.hidden_size + 1
    assert full_critic.models[Role.critic].num_trainable == num_value_model_parameters(arch)
    assert lora_critic.models[Role.critic].optimizer < full_critic.models[Role.critic].optimizer / 50
    # the critic's weights are still all there (frozen body, bf16)
    assert lora_critic.models[Role.critic].weights_full == full_critic.models[Role.critic].weights_full
    with pytest.raises(InputError, match="critic.lora"):
        plan_of(merged(PPO, **{"critic.lora": True}))  # full fine-tuning has no adapters to give it


def test_a_wrapped_value_model_trains_in_the_policys_backward() -> None:
    """TRL's PolicyAndValueWrapper: one backward of pg_loss + vf_coef * vf_loss, so there is no
    critic_train phase; the train phase holds the value model's activations and both gradients."""
    hf = merged(PPO, **{"rollout.engine": "hf", "rollout.sleep_level": 0})
    apart, joint = plan_of(hf), plan_of(merged(hf, **{"critic.wrapped_with_actor": True}))
    names = [p.name for p in joint.devices[0].phases]
    assert "critic_train" not in names and "train" in names
    critic_held = component(apart, "critic_train", "activations")
    assert critic_held > 0 and component(joint, "train", "critic.activations") == critic_held
    assert component(joint, "train", "critic.grads") == joint.models[Role.critic].grads
    assert component(joint, "train", "policy.grads") == joint.models[Role.actor].grads
    peak = {p.name: p.peak_bytes for p in joint.devices[0].phases}["train"]
    assert peak > {p.name: p.peak_bytes for p in apart.devices[0].phases}["train"]


def test_a_wrapped_value_model_is_stepped_with_the_policy() -> None:
    """One optimizer over PolicyAndValueWrapper: its step holds both models' gradients."""
    hf = merged(PPO, **{"rollout.engine": "hf", "rollout.sleep_level": 0, "distribution.strategy": "zero2"})
    joint = plan_of(merged(hf, **{"critic.wrapped_with_actor": True}))
    assert component(joint, "optimizer", "critic.grads") == joint.models[Role.critic].grads > 0
    assert component(joint, "optimizer", "policy.grads") == joint.models[Role.actor].grads
    fp32 = joint.models[Role.actor].fp32_grads + joint.models[Role.critic].fp32_grads
    assert component(joint, "optimizer", "optimizer.fp32_grads") == fp32


def test_kept_generation_scores_are_three_copies_at_the_rollouts_end() -> None:
    """From the second rollout: last rollout's `logitss`, this one's chunks and their padded copy."""
    hf = merged(PPO, **{"rollout.engine": "hf", "rollout.sleep_level": 0, "rollout.keeps_generation_scores": True})
    plan = plan_of(hf)
    kept = component(plan, "train", "generate.scores")
    assert kept > 0
    assert component(plan, "rollout", "generate.previous_scores") == component(plan, "rollout", "generate.scores_padded_copy") == kept
    assert component(plan, "optimizer", "generate.scores") == kept


def test_a_lora_value_model_keeps_its_adapter_branches() -> None:
    """Without checkpointing every layer keeps its LoRA branches' inputs (memory/activations.py)."""
    lora = merged(PPO, finetune={"method": "lora", "lora_rank": 16}, gradient_checkpointing=False)
    with_lora = component(plan_of(merged(lora, **{"critic.lora": True})), "critic_train", "activations")
    without = component(plan_of(lora), "critic_train", "activations")
    assert with_lora > without
