"""ms-swift PPO (`swift rlhf --rlhf_type ppo`): the parts of the spec that differ from GRPO.

ms-swift runs PPO with TRL's PPOTrainer (swift/rlhf_trainers/ppo_trainer.py at HEAD,
swift/trainers/rlhf_trainer/ppo_trainer.py in 3.x: `PPOTrainer(SwiftMixin, trl PPOTrainer)`),
so the run holds what TRL's does (read in `adapters/trl/ppo.py`): the policy; a frozen reference
copy in full fine-tuning (`ref_model = ref_model or model`; LoRA runs disable the adapters
instead: swift/arguments/rlhf_args.py `__post_init__`); a value model and a reward model, both
loaded from `--reward_model` (one id: `assert len(model_id_or_path) == 1`); generation with
transformers `generate` inside `unwrap_model_for_generation(PolicyAndValueWrapper)`, which under
ZeRO-3 gathers the value model with the policy (`critic.wrapped_with_actor`). ms-swift builds the
value model through `prepare_model`, i.e. with the run's tuner: under `--tuner_type lora` it trains
LoRA adapters too (`critic.lora`; swift/pipelines/train/rlhf.py `_prepare_single_model` at HEAD,
swift/llm/train/rlhf.py L76-78 in v3.5.0).

Keys (swift/arguments/rlhf_args.py `PPOArguments`, HEAD and 3.x): `kl_coef` 0.05,
`local_rollout_forward_batch_size` 64 (the no-grad forwards' chunk), `num_mini_batches` 1 (must
divide per_device_train_batch_size × gradient_accumulation_steps: TRL `exact_div`),
`response_length`/`max_new_tokens`/`max_completion_length` (one value, `_init_max_completion_length`);
`--max_length` bounds the encoded prompt as in GRPO (`prompts.lengths`). No vLLM.
Assumes: gradient checkpointing as the script says (default on), as ms-swift's SwiftMixin prepares
the policy for the Trainer; TRL's own PPO example never enables it.
"""

from __future__ import annotations

from typing import Any

from ...errors import InputError
from .layout import Run

GRPO_ONLY = ("num_generations", "use_vllm", "vllm_mode", "vllm_server_host", "vllm_server_port",
             "vllm_gpu_memory_utilization", "vllm_tensor_parallel_size", "vllm_max_model_len", "sleep_level",
             "offload_model", "offload_optimizer", "beta", "steps_per_generation", "generation_batch_size",
             "reward_funcs", "num_iterations", "move_model_batches")


def ppo_sections(run: Run, method: str) -> dict[str, Any]:
    """algorithm, critic, reward_model, kl_beta, rollout and batch of a PPO script."""
    f = run.flags
    for name in GRPO_ONLY:
        f.ignore(name, "no effect with --rlhf_type ppo (ms-swift's PPOTrainer is TRL's: transformers generate, "
                       "one completion per prompt)")
    reward = f.list("reward_model")
    if not reward:
        raise InputError("--reward_model", "required with --rlhf_type ppo: the reward model, whose checkpoint "
                         "is also the value model's")
    if len(reward) > 1:
        raise InputError("--reward_model", f"{len(reward)} models; PPO takes one (ms-swift asserts it)")
    critic: dict[str, Any] = {"model": reward[0], "wrapped_with_actor": True}
    if method != "full":
        critic["lora"] = True
    rollout: dict[str, Any] = {"engine": "hf", "keeps_generation_scores": True}  # TRL's `logitss`
    if method == "full":  # generate's scores are the old log-probs; LoRA's reference pass is the policy's
        rollout["recompute_old_logprobs"] = False
    return {"algorithm": "ppo", "critic": critic, "reward_model": {"model": reward[0]},
            "kl_beta": f.float("kl_coef", 0.05), "rollout": rollout, "batch": _batch(run)}


def _batch(run: Run) -> dict[str, Any]:
    f = run.flags
    micro = f.int("per_device_train_batch_size", 1, minimum=1)
    accumulation = f.int("gradient_accumulation_steps", 1, minimum=1)
    local = micro * accumulation
    mini = f.int("num_mini_batches", 1, minimum=1)
    if local % mini:
        raise InputError("--num_mini_batches", f"{mini} does not divide the rollout batch per process, "
                         f"per_device_train_batch_size × gradient_accumulation_steps = {local} (TRL exact_div)")
    chunk = f.int("local_rollout_forward_batch_size", 64, minimum=1)
    out: dict[str, Any] = {"micro_batch_size": micro, "gradient_accumulation_steps": accumulation, "num_generations": 1}
    if min(chunk, local) != micro:
        out["logprob_micro_batch_size"] = min(chunk, local)
    return out


# --- writing ---------------------------------------------------------------------------------

GRPO_FLAGS_NOT_IN_PPO = frozenset({"num_generations", "steps_per_generation", "reward_funcs", "beta", "use_vllm"})


def ppo_problem(spec: Any) -> tuple[str, str] | None:
    """(spec field, why) a `--rlhf_type ppo` script cannot say, or None (the reader's rules above)."""
    full = spec.finetune.method.value == "full"
    if spec.rollout.engine.value != "hf":
        return ("rollout.engine", f"{spec.rollout.engine.value} (ms-swift's PPOTrainer generates with transformers)")
    if spec.batch.num_generations != 1:
        return ("batch.num_generations", f"{spec.batch.num_generations} (PPO samples one completion per prompt)")
    if spec.reward_model.model is None or (spec.critic.model or spec.model) != spec.reward_model.model:
        return ("critic.model", "a value model other than --reward_model's checkpoint (ms-swift loads both from it)")
    if not spec.critic.wrapped_with_actor:
        return ("critic.wrapped_with_actor", "false (TRL's PPOTrainer wraps policy and value model in one module)")
    if spec.critic.lora == full:
        return ("critic.lora", f"{spec.critic.lora} (ms-swift gives the value model the policy's tuner)")
    return None


def ppo_flags(spec: Any, flags: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """The GRPO flags the writer renders, turned into a PPO script's: `--rlhf_type ppo`, KL as
    `--kl_coef`, the no-grad forward chunk as `--local_rollout_forward_batch_size`."""
    out = [("rlhf_type", "ppo") if name == "rlhf_type" else (name, value) for name, value in flags
           if name not in GRPO_FLAGS_NOT_IN_PPO]
    chunk = spec.batch.logprob_micro_batch_size or spec.batch.micro_batch_size
    return out + [("kl_coef", repr(spec.kl_beta)), ("local_rollout_forward_batch_size", str(chunk))]
