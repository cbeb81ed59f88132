"""VLM-R1 keys: TRL 0.14 GRPOConfig defaults and VLM-R1's script arguments."""

from __future__ import annotations

from typing import Any

DEFAULTS: dict[str, Any] = {
    "per_device_train_batch_size": 8, "gradient_accumulation_steps": 1, "num_generations": 8,
    "max_prompt_length": 512, "max_completion_length": 256, "max_pixels": 12845056, "min_pixels": None,
    "beta": 0.04, "gradient_checkpointing": False, "attn_implementation": None, "use_peft": False,
    "lora_r": 16, "lora_alpha": 32, "lora_dropout": 0.05, "lora_target_modules": None,
    "freeze_vision_modules": False, "use_vllm": False, "bf16": False, "fp16": False,
    "optim": "adamw_torch",  # transformers 4.49 TrainingArguments (adamw_torch_fused only from 4.54 with torch 2.8)
}


VLMR1_DEEPSPEED_OPTIMIZER: dict[str, bool] = {
    "zero2.json": True, "zero3.json": False, "zero3_offload.json": True, "zero_stage2_config.json": False,
}
"""Whether each of VLM-R1's own DeepSpeed JSONs (src/open-r1-multimodal/local_scripts/) has an
`optimizer` section (DeepSpeed then builds its own; without one the Trainer's `optim` steps)."""


NO_MEMORY_EFFECT = {
    "output_dir", "dataset_name", "image_root", "logging_steps", "torch_dtype", "data_seed", "report_to",
    "num_train_epochs", "run_name", "save_steps", "save_only_model", "learning_rate", "data_file_paths",
    "image_folders", "is_reward_customized_from_vlm_module", "task_type", "reward_funcs", "dataset_config",
    "seed", "warmup_ratio", "lr_scheduler_type", "save_total_limit", "eval_strategy", "logging_dir",
}


SPEC_SOURCES: dict[str, str] = {
    "model": "--model_name_or_path", "distribution": "--deepspeed", "batch.micro_batch_size": "--per_device_train_batch_size",
    "batch.num_generations": "--num_generations", "batch.gradient_accumulation_steps": "--gradient_accumulation_steps",
    "lengths.max_prompt_tokens": "--max_prompt_length", "lengths.max_completion_tokens": "--max_completion_length",
    "vision.max_pixels": "--max_pixels", "vision.min_pixels": "--min_pixels", "vision.freeze_tower": "--freeze_vision_modules",
    "finetune": "--use_peft", "finetune.lora_rank": "--lora_r", "finetune.lora_alpha": "--lora_alpha",
    "gradient_checkpointing": "--gradient_checkpointing", "attention": "--attn_implementation", "kl_beta": "--beta",
    "precision": "--bf16 | --fp16", "hardware.gpus_per_node": "--nproc_per_node", "hardware.num_nodes": "--nnodes",
    "optimizer_implementation": "--optim",
}
"""Spec field (or section) → the native key(s) it is read from, alternatives separated by `|`;
`oomless import` comments every value with the one the file sets."""
