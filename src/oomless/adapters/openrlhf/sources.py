"""openrlhf: which native key each spec field is read from (`oomless import` comments). Hand-written;
`keys.py` beside it is generated."""

from __future__ import annotations


SPEC_SOURCES: dict[str, str] = {
    "model": "--pretrain | --actor.model_name_or_path", "distribution": "--zero_stage | --ds.zero_stage",
    "distribution.offload_optimizer": "--adam_offload | --ds.adam_offload",
    "gradient_checkpointing": "--gradient_checkpointing | --actor.gradient_checkpointing_enable",
    "batch.micro_batch_size": "--micro_train_batch_size | --train.micro_batch_size",
    "batch.logprob_micro_batch_size": "--micro_rollout_batch_size | --rollout.micro_batch_size",
    "batch.num_generations": "--n_samples_per_prompt | --rollout.n_samples_per_prompt",
    "lengths.max_prompt_tokens": "--prompt_max_len | --max_len | --data.max_len",
    "lengths.max_completion_tokens": "--generate_max_len | --max_new_tokens | --rollout.max_new_tokens",
    "rollout.tensor_parallel_size": "--vllm_tensor_parallel_size | --vllm.tensor_parallel_size",
    "rollout.gpu_memory_utilization": "--vllm_gpu_memory_utilization | --vllm.gpu_memory_utilization",
    "rollout.num_gpus": "--vllm_num_engines | --vllm.num_engines", "placement": "--colocate_all_models | --train.colocate_all",
    "kl_beta": "--init_kl_coef | --algo.kl.init_coef", "finetune": "--lora_rank | --ds.lora.rank",
    "hardware.num_nodes": "--actor_num_nodes | --actor.num_nodes",
    "liger_kernels": "--use_liger_kernel | --ds.use_liger_kernel",
}
"""Spec field (or section) → the native key(s) it is read from, alternatives separated by `|`;
`oomless import` comments every value with the one the file sets."""
