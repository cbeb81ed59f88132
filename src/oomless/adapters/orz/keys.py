"""Open-Reasoner-Zero keys: defaults of orz/exps/examples/ppo/ppo_base_exp.py (0.1.0)."""

from __future__ import annotations

from typing import Any

DEFAULTS: dict[str, Any] = {
    "ref_num_nodes": 1, "ref_num_gpus_per_node": 2, "reward_num_nodes": 1, "reward_num_gpus_per_node": 2,
    "actor_num_nodes": 1, "actor_num_gpus_per_node": 2, "critic_num_nodes": 1, "critic_num_gpus_per_node": 2,
    "colocate_critic_reward": True, "colocate_actor_ref": True, "colocate_all": False,
    "vllm_num_engines": 4, "vllm_tensor_parallel_size": 1, "pretrain": "example_path",
    "critic_pretrain": "example_path", "reward_pretrain": "example_path", "zero_stage": 3, "bf16": True,
    "adam_offload": True, "flash_attn": True, "gradient_checkpointing": True, "enable_prefix_caching": False,
    "enable_chunked_prefill": False, "max_num_batched_tokens": 2048, "enforce_eager": False,
    "gpu_memory_utilization": 0.85, "prompt_max_len": 1024, "generate_max_len": 1024, "train_batch_size": 256,
    "micro_train_batch_size": 8, "rollout_batch_size": 256, "micro_rollout_batch_size": 32,
    "micro_forward_batch_size": 32, "policy_update_steps": 4, "critic_update_steps": 4, "max_len": None,
    "n_samples_per_prompt": 1, "init_kl_coef": 0.01, "use_kl_loss": False, "kl_loss_coef": 0.0,
    "ref_reward_offload": False, "offload_ref_model": False, "target_modules": "all-linear", "zpg": 1,
    "grad_accum_dtype": None, "disable_trace_cache": False, "gradient_checkpointing_use_reentrant": False,
    "vllm_sync_backend": "nccl", "local_rank": -1, "ckpt_path": "example_path", "save_path": "example_path",
    "tensorboard_log_dir": "example_path", "prompt_data": [], "seed": 42, "load_checkpoint": False, "eval_steps": -1,
    "save_steps": -1, "save_interval": 100, "actor_learning_rate": 5e-7, "critic_learning_rate": 9e-6,
    "num_episodes": 1, "max_epochs": 1, "max_norm": 1.0, "num_warmup_steps": 5, "l2": 0.0, "eps_clip": 0.2,
    "value_clip": 0.2, "lambd": 1, "gamma": 1, "normalize_reward": True, "top_p": 1.0, "temperature": 1.0,
    "freezing_actor_steps": -1, "kl_target": None, "use_kl_estimator_k3": False, "use_abs_kl": False,
    "adam_betas": [0.9, 0.95], "reward_clip_range": [-10, 10], "use_compute_reward_fn": False,
    "advantage_normalize": True, "value_head_prefix": "value_head", "enable_eval": False, "eval_interval": -1,
    "update_ref_every_epoch": False,
}


SPEC_SOURCES: dict[str, str] = {
    "model": "pretrain", "critic.model": "critic_pretrain", "batch.micro_batch_size": "micro_train_batch_size",
    "batch.logprob_micro_batch_size": "micro_forward_batch_size", "batch.num_generations": "n_samples_per_prompt",
    "lengths.max_prompt_tokens": "prompt_max_len", "lengths.max_completion_tokens": "generate_max_len",
    "rollout.gpu_memory_utilization": "gpu_memory_utilization", "rollout.tensor_parallel_size": "vllm_tensor_parallel_size",
    "rollout.max_num_batched_tokens": "max_num_batched_tokens", "rollout.enforce_eager": "enforce_eager",
    "placement": "colocate_all | actor_num_gpus_per_node | vllm_num_engines", "distribution": "zero_stage",
    "kl_beta": "init_kl_coef", "gradient_checkpointing": "gradient_checkpointing",
}
"""Spec field (or section) → the native key(s) it is read from, alternatives separated by `|`;
`oomless import` comments every value with the one the file sets."""
