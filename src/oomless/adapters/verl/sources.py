"""verl: which native key each spec field is read from (`oomless import` comments). Hand-written;
`keys.py` beside it is generated."""

from __future__ import annotations


SPEC_SOURCES: dict[str, str] = {
    "model": "actor_rollout_ref.model.path", "distribution": "actor_rollout_ref.actor.strategy",
    "distribution.offload_params": "actor_rollout_ref.actor.fsdp_config.offload_policy",
    "distribution.sequence_parallel_size": "actor_rollout_ref.actor.ulysses_sequence_parallel_size",
    "precision": "actor_rollout_ref.actor.fsdp_config.model_dtype",
    "attention": "actor_rollout_ref.model.override_config.attn_implementation",
    "gradient_checkpointing": "actor_rollout_ref.model.enable_gradient_checkpointing", "finetune": "actor_rollout_ref.model.lora_rank",
    "logits": "actor_rollout_ref.model.use_fused_kernels | actor_rollout_ref.actor.entropy_from_logits_with_chunking"
              " | actor_rollout_ref.model.use_remove_padding",
    "batch.micro_batch_size": "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu | actor_rollout_ref.actor.ppo_max_token_len_per_gpu",
    "batch.max_tokens_per_gpu": "actor_rollout_ref.actor.ppo_max_token_len_per_gpu",
    "batch.logprob_max_tokens_per_gpu": "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu",
    "batch.padding_free": "actor_rollout_ref.model.use_remove_padding",
    "batch.length_sorted_micro_batches": "trainer.balance_batch",
    "batch.logprob_micro_batch_size": "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
    "batch.num_generations": "actor_rollout_ref.rollout.n", "lengths.max_prompt_tokens": "data.max_prompt_length",
    "lengths.max_completion_tokens": "data.max_response_length",
    "rollout.gpu_memory_utilization": "actor_rollout_ref.rollout.gpu_memory_utilization",
    "rollout.tensor_parallel_size": "actor_rollout_ref.rollout.tensor_model_parallel_size",
    "rollout.max_num_batched_tokens": "actor_rollout_ref.rollout.max_num_batched_tokens",
    "rollout.max_num_seqs": "actor_rollout_ref.rollout.max_num_seqs", "rollout.enforce_eager": "actor_rollout_ref.rollout.enforce_eager",
    "rollout.sleep_level": "actor_rollout_ref.rollout.free_cache_engine",
    "rollout.offload_model": "actor_rollout_ref.actor.fsdp_config.param_offload",
    "rollout.offload_optimizer": "actor_rollout_ref.actor.fsdp_config.optimizer_offload",
    "kl_beta": "actor_rollout_ref.actor.kl_loss_coef | algorithm.kl_ctrl.kl_coef", "algorithm": "algorithm.adv_estimator",
    "hardware.gpus_per_node": "trainer.n_gpus_per_node", "hardware.num_nodes": "trainer.nnodes",
    "optimizer_implementation": "actor_rollout_ref.actor.optim.override_optimizer_config.fused"
                                " | actor_rollout_ref.actor.optim.override_optimizer_config.foreach",
}
"""Spec field (or section) → the native key(s) it is read from, alternatives separated by `|`;
`oomless import` comments every value with the one the file sets."""
