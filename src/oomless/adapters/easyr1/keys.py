"""EasyR1 keys: dataclass defaults of main (0.3.3.dev0) and the keys without a memory effect."""

from __future__ import annotations

from typing import Any

ACT, ROL, REF = "worker.actor", "worker.rollout", "worker.ref"
DEFAULTS: dict[str, Any] = {
    "data.max_prompt_length": 512, "data.max_response_length": 512, "data.rollout_batch_size": 512,
    "data.max_pixels": 4194304, "data.min_pixels": 262144,
    "algorithm.adv_estimator": "grpo", "algorithm.disable_kl": False, "algorithm.use_kl_loss": False,
    "algorithm.kl_coef": 1e-3,
    "trainer.nnodes": 1, "trainer.n_gpus_per_node": 8, "trainer.max_steps": None, "trainer.save_freq": -1,
    "trainer.save_model_only": False,
    f"{ACT}.global_batch_size": 256, f"{ACT}.micro_batch_size_per_device_for_update": 4,
    f"{ACT}.micro_batch_size_per_device_for_experience": 16, f"{ACT}.padding_free": True,
    f"{ACT}.dynamic_batching": True, f"{ACT}.ulysses_size": 1, f"{ACT}.ulysses_sequence_parallel_size": 1,
    f"{ACT}.ppo_epochs": 1, f"{ACT}.model.model_path": None, f"{ACT}.model.enable_gradient_checkpointing": True,
    f"{ACT}.model.freeze_vision_tower": False, f"{ACT}.model.lora.rank": 0, f"{ACT}.model.lora.alpha": 16,
    f"{ACT}.model.lora.target_modules": "all-linear", f"{ACT}.optim.strategy": "adamw",
    f"{ACT}.fsdp.enable_full_shard": True, f"{ACT}.fsdp.enable_cpu_offload": False,
    f"{ACT}.fsdp.enable_rank0_init": True, f"{ACT}.fsdp.torch_dtype": None,
    f"{ACT}.offload.offload_params": False, f"{ACT}.offload.offload_optimizer": False,
    f"{ROL}.n": 1, f"{ROL}.gpu_memory_utilization": 0.6, f"{ROL}.tensor_parallel_size": 2,
    f"{ROL}.max_num_batched_tokens": 8192, f"{ROL}.max_model_len": None, f"{ROL}.enforce_eager": False,
    f"{ROL}.limit_images": 0, f"{ROL}.enable_chunked_prefill": False,
    f"{REF}.fsdp.enable_cpu_offload": False, f"{REF}.offload.offload_params": False,
    "worker.critic.model.model_path": None,
}


NO_MEMORY_EFFECT = (
    "data.train_files", "data.val_files", "data.prompt_key", "data.answer_key", "data.image_key", "data.val_batch_size",
    "data.shuffle", "data.seed", "data.format_prompt", "data.filter_overlong_prompts",
    "data.format_prompt_path",
    "algorithm.use_kl_loss", "algorithm.kl_penalty", "algorithm.kl_type", "algorithm.gamma", "algorithm.lam",
    f"{ACT}.max_grad_norm",
    f"{ACT}.ppo_epochs", f"{ACT}.model.trust_remote_code", f"{ACT}.optim.lr", f"{ACT}.optim.weight_decay",
    f"{ACT}.optim.lr_warmup_ratio", f"{ROL}.temperature", f"{ROL}.top_p", f"{ROL}.enable_chunked_prefill",
    "worker.reward.", "trainer.total_episodes", "trainer.total_epochs", "trainer.project_name",
    "trainer.experiment_name", "trainer.logger", "trainer.val_", "trainer.save_limit", "trainer.save_checkpoint_path", "trainer.load_",
    "trainer.critic_warmup", f"{ROL}.val_override_config", f"{ROL}.top_k", f"{ROL}.seed", f"{ROL}.ignore_eos",
    f"{ROL}.disable_", f"{ROL}.dtype", f"{ROL}.name",
)


SPEC_SOURCES: dict[str, str] = {
    "model": "worker.actor.model.model_path", "distribution": "worker.actor.fsdp.enable_full_shard",
    "optimizer_implementation": "worker.actor.optim.strategy",
    "distribution.offload_params": "worker.actor.fsdp.enable_cpu_offload", "precision": "worker.actor.fsdp.torch_dtype",
    "gradient_checkpointing": "worker.actor.model.enable_gradient_checkpointing", "finetune": "worker.actor.model.lora.rank",
    "batch.micro_batch_size": "worker.actor.micro_batch_size_per_device_for_update",
    "batch.logprob_micro_batch_size": "worker.actor.micro_batch_size_per_device_for_experience",
    "batch.padding_free": "worker.actor.padding_free", "logits": "worker.actor.padding_free",
    "distribution.sequence_parallel_size": "worker.actor.ulysses_size|worker.actor.ulysses_sequence_parallel_size (with padding_free)",
    "batch.max_tokens_per_gpu": "worker.actor.dynamic_batching (× micro_batch_size_per_device_for_update × padded length)",
    "batch.logprob_max_tokens_per_gpu": "worker.actor.dynamic_batching (× micro_batch_size_per_device_for_experience × padded length)",
    "batch.num_generations": "worker.rollout.n", "lengths.max_prompt_tokens": "data.max_prompt_length",
    "lengths.max_completion_tokens": "data.max_response_length", "vision.max_pixels": "data.max_pixels",
    "vision.min_pixels": "data.min_pixels", "vision.freeze_tower": "worker.actor.model.freeze_vision_tower",
    "rollout.gpu_memory_utilization": "worker.rollout.gpu_memory_utilization",
    "rollout.tensor_parallel_size": "worker.rollout.tensor_parallel_size",
    "rollout.max_num_batched_tokens": "worker.rollout.max_num_batched_tokens",
    "rollout.offload_model": "worker.actor.offload.offload_params",
    "rollout.offload_optimizer": "worker.actor.offload.offload_optimizer", "kl_beta": "algorithm.kl_coef",
    "batch.gradient_accumulation_steps": "worker.actor.global_batch_size (× rollout.n / GPUs / micro-batch)",
    "batch.steps_per_generation": "data.rollout_batch_size (× rollout.n / GPUs / micro-batch)",
    "schedule.max_steps": "trainer.max_steps (rounds × optimizer steps per round)",
    "schedule.save_steps": "trainer.save_freq (rounds × optimizer steps per round)",
    "schedule.save_only_model": "trainer.save_model_only", "rollout.samples_per_request": "worker.rollout.n",
    "algorithm": "algorithm.adv_estimator", "hardware.gpus_per_node": "trainer.n_gpus_per_node",
    "hardware.num_nodes": "trainer.nnodes",
}
"""Spec field (or section) → the native key(s) it is read from, alternatives separated by `|`;
`oomless import` comments every value with the one the file sets."""
