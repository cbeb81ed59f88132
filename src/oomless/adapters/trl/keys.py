"""TRL GRPO keys: what they mean for memory (hand-written): the ones without a memory effect, the
ones not modelled, and keys of earlier releases read with their old meaning. Which release has
which key, and its default, is the generated table `data/key_table.json` (`key_tables.load("trl")`;
transformers' TrainingArguments in `data/transformers_key_table.json`)."""

from __future__ import annotations

NO_MEMORY_EFFECT = frozenset({
    "output_dir", "learning_rate", "num_train_epochs", "max_steps", "logging_steps", "save_steps",
    "save_strategy", "save_total_limit", "eval_strategy", "evaluation_strategy", "eval_steps", "report_to", "run_name", "seed",
    "warmup_ratio", "warmup_steps", "lr_scheduler_type", "weight_decay", "max_grad_norm", "adam_beta1",
    "adam_beta2", "temperature", "top_p", "top_k", "min_p", "repetition_penalty", "epsilon", "epsilon_high",
    "delta", "loss_type", "scale_rewards", "num_iterations", "importance_sampling_level", "log_completions",
    "num_completions_to_print", "dataset_name", "dataset_config", "dataset_train_split", "dataset_test_split",
    "reward_funcs", "reward_weights", "model_revision", "trust_remote_code", "push_to_hub", "hub_model_id",
    "logging_dir", "disable_dropout", "shuffle_dataset", "mask_truncated_completions", "sync_ref_model",
    "ref_model_mixup_alpha", "ref_model_sync_steps", "top_entropy_quantile", "vllm_server_host",
    "vllm_server_port", "vllm_server_timeout", "vllm_group_port", "vllm_server_base_url", "use_rslora",
    "lora_task_type", "vllm_importance_sampling_correction", "vllm_importance_sampling_mode",
    "vllm_importance_sampling_cap", "vllm_model_impl", "log_unique_prompts", "dataloader_num_workers",
    "remove_unused_columns", "bf16_full_eval", "ddp_timeout", "gradient_checkpointing_kwargs", "env",
    "chat_template_kwargs", "generation_kwargs", "multi_objective_aggregation", "use_bias_correction_kl",
    "dataset_streaming", "ignore_bias_buffers", "logging_first_step", "save_only_model", "do_eval",
    "hub_strategy", "log_level", "logging_strategy", "overwrite_output_dir", "lr_scheduler_kwargs",
})


OPEN_R1_NO_MEMORY_EFFECT = frozenset({
    "benchmarks", "callbacks", "chat_template", "system_prompt", "hub_model_revision", "overwrite_hub_revision",
    "push_to_hub_revision", "wandb_entity", "wandb_project", "wandb_run_group", "wandb_log_unique_prompts",
    "cosine_min_value_wrong", "cosine_max_value_wrong", "cosine_min_value_correct", "cosine_max_value_correct",
    "cosine_max_len", "repetition_n_grams", "repetition_max_penalty", "code_language", "code_eval_test_batch_size",
    "parallel_code_exec_per_proc", "dataset_prompt_column", "e2b_router_url", "morph_router_url", "code_provider",
    "ioi_provider",
})
"""open-r1's own GRPOConfig and GRPOScriptArguments fields (not TRL keys; open-r1
`src/open_r1/configs.py`, commit 078c5e17): logging, hub, reward-function and code-sandbox
settings without a memory effect. `system_prompt` lengthens prompts, which the prompt bound
(max_prompt_length or the max_prompt_tokens directive) already covers."""


PPO_NO_MEMORY_EFFECT = frozenset({
    "num_ppo_epochs", "total_episodes", "missing_eos_penalty", "stop_token", "stop_token_id", "whiten_rewards",
    "cliprange", "vf_coef", "cliprange_value", "gamma", "lam", "kl_estimator", "num_sample_generations",
    "exp_name", "dataset_num_proc", "model_adapter_name", "ref_adapter_name", "world_size", "num_total_batches",
    "micro_batch_size", "local_batch_size", "batch_size", "local_mini_batch_size", "mini_batch_size", "rloo_k",
    "normalize_reward", "normalize_advantage", "token_level_kl",
})
"""PPOConfig (OnPolicyConfig up to 0.25) keys without a memory effect: loss and schedule
settings, and the batch sizes PPOTrainer computes itself and overwrites (`args.local_batch_size =
...` in trl 1.12.0 experimental/ppo/ppo_trainer.py). num_ppo_epochs reuses the rollout that is
held anyway."""


NOT_MODELLED = {
    "use_transformers_continuous_batching": "transformers' paged KV cache is not modelled (planned as generate)",
    "transformers_continuous_batching_config": "transformers' paged KV cache is not modelled",
    "ds3_gather_for_generation": "ZeRO-3 generation without a full gather is not modelled",
    "lora_modules_to_save": "fully trained extra modules beside LoRA are not modelled",
    "use_dora": "DoRA's magnitude vectors are not modelled (planned as LoRA)",
    "torch_empty_cache_steps": "periodic empty_cache is not modelled",
    "pad_to_multiple_of": "padding to a multiple is not modelled",
    "per_device_eval_batch_size": "evaluation is not planned",
    "num_generations_eval": "evaluation is not planned",
    "model_init_kwargs": "extra from_pretrained arguments are not read",
    "lora_target_parameters": "LoRA on parameters (MoE experts) is not modelled",
}


LEGACY_KEYS: dict[str, tuple[str, str]] = {
    "use_liger_loss": ("use_liger_loss", "the Liger GRPO loss alone before 0.25, then copied into use_liger_kernel "
                       "(trl PR #4364); read so (liger.py)"),
    "torch_dtype": ("dtype", "ModelConfig's name before transformers 4.56 renamed it dtype; read as it"),
    "max_prompt_length": ("max_prompt_length", "prompts were truncated to it (default 512); read as the prompt bound"),
}
"""Keys of earlier TRL GRPOConfig/ModelConfig releases that 1.x dropped or renamed, read with the
meaning they had then: old name -> (name read as, meaning). Which releases have each comes from
the generated table (`data/key_table.json`: max_prompt_length and use_liger_loss up to 0.27,
torch_dtype up to 0.26), so the note names them. Source: trl 0.24.0 `trl/trainer/grpo_config.py`
(max_prompt_length 512, use_liger_loss), `trl/trainer/model_config.py` (torch_dtype)."""


SPEC_SOURCES: dict[str, str] = {
    "model": "sft_model_path | model_name_or_path",
    "algorithm": "trl grpo | ppo.py | ppo_tldr.py | rloo.py | rloo_vlm.py | trl rloo",
    "critic": "reward_model_path", "reward_model": "reward_model_name_or_path | reward_model_path",
    "finetune.method": "use_peft | load_in_4bit", "finetune.double_quant": "use_bnb_nested_quant", "finetune.lora_rank": "lora_r",
    "finetune.lora_alpha": "lora_alpha", "finetune.lora_targets": "lora_target_modules",
    "distribution": "deepspeed | accelerate_config | config_file", "precision": "bf16 | fp16 | dtype | torch_dtype",
    "gradient_checkpointing": "gradient_checkpointing", "attention": "attn_implementation",
    "logits": "use_liger_kernel | use_liger_loss | cast_lm_head_to_fp32",
    "liger_kernels": "use_liger_kernel | liger_kernel_config", "kl_beta": "beta | kl_coef",
    "batch.micro_batch_size": "per_device_train_batch_size", "batch.num_generations": "num_generations",
    "batch.gradient_accumulation_steps": "gradient_accumulation_steps", "batch.steps_per_generation": "steps_per_generation",
    "batch.padding_free": "padding_free", "lengths.max_completion_tokens": "max_completion_length | response_length",
    "batch.logprob_micro_batch_size": "local_rollout_forward_batch_size",
    "lengths.max_prompt_tokens": "max_prompt_tokens | max_prompt_length", "rollout.engine": "use_vllm | vllm_mode",
    "rollout.gpu_memory_utilization": "vllm_gpu_memory_utilization | gpu_memory_utilization",
    "rollout.tensor_parallel_size": "vllm_tensor_parallel_size | tensor_parallel_size",
    "rollout.max_model_len": "vllm_max_model_length | max_model_len", "rollout.sleep_level": "vllm_enable_sleep_mode",
    "hardware.gpus_per_node": "num_processes | nproc_per_node", "hardware.num_nodes": "num_machines | nnodes",
    "optimizer_implementation": "optim",
}
"""Spec field (or section) → the native key(s) it is read from, alternatives separated by `|`
(GRPO/RLOO's, then PPO's: sft_model_path, reward_model_path, kl_coef, response_length,
local_rollout_forward_batch_size); `oomless import` comments every value with the one the file sets."""
