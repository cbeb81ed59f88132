"""ms-swift facts the swift adapter relies on: version profiles, flags, DeepSpeed presets.

Sources (looked up in the ms-swift repository; file, version):
- 3.x: `swift/llm/argument/rlhf_args.py` (GRPO: beta 0.04, num_generations 8, max_completion_length
  512, gradient_accumulation_steps 1, sleep_level forced to 0 without colocated vLLM, no reference
  model with beta 0 or LoRA), `swift/trainers/arguments.py` (TrainArgumentsMixin: per-device batch 1,
  gradient_checkpointing true; VllmArguments: vllm_gpu_memory_utilization 0.9, tensor parallel 1,
  max_num_seqs 256, max_model_len None, compat aliases removed in 3.8; GRPOArgumentsMixin:
  vllm_mode, sleep_level 0, offload_model/optimizer false, move_model_batches None,
  gc_collect_after_offload deprecated), `swift/llm/argument/tuner_args.py` (LoRA rank 8, alpha 32,
  dropout 0.05, target_modules all-linear, freeze_vit true), `swift/llm/ds_config/*.json`.
- 3.2-3.4: GRPOArgumentsMixin with `num_infer_workers` 1 and TRL's `vllm_device` auto (the engine
  on the last visible GPU); `vllm_mode` arrived in 3.5.
- 4.x: `swift/rlhf_trainers/args_mixin.py` (vllm_mode required with use_vllm, vllm_max_num_seqs
  None), `swift/arguments/tuner_args.py` (`tuner_type` replaces `train_type`, ms-swift issue 7823),
  `swift/config/*.json` (presets with overlap_comm false; zero3_offload offloads both).
Not verified (assumed, stated in notes): the 3.x zero1 preset (taken as zero2 without buckets'
differences), the version gc_collect_after_offload became a no-op (3.7: PR 4770, 2025-07), and
the vLLM version each ms-swift release ran with.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...memory.vllm import GRAPHS_IN_BUDGET_FROM

Version = tuple[int, ...]

MIN_VERSION: Version = (3, 2)
MAX_VERSION: Version = (5,)
LATEST: Version = (4, 6)
VLLM_GRAPHS_IN_BUDGET: Version = GRAPHS_IN_BUDGET_FROM
"""vLLM >= 0.21 profiles CUDA graphs inside gpu_memory_utilization (oomless.memory.vllm)."""


@dataclass(frozen=True)
class Profile:
    """What changes between ms-swift releases, as oomless needs it."""

    version: Version

    @property
    def has_vllm_mode(self) -> bool:
        return self.version >= (3, 5)

    @property
    def mode_follows_server_host(self) -> bool:
        """ms-swift 3.5.0-3.11.0 set `vllm_mode` from the server host whatever the flag says:
        `server` when `--vllm_server_host` (or, from 3.7.2, `--vllm_server_base_url`) is given,
        else `colocate`, with a warning (swift/llm/argument/rlhf_args.py v3.5.0 L161-169, v3.7.1
        L213, v3.7.2 L213, v3.11.0 L358). 3.11.1 drops the override and requires the flag with
        --use_vllm (v3.11.1 L360: "vllm_mode is required when use_vllm is true"); "3.11" reads as 3.11.0."""
        return (3, 5) <= self.version < (3, 11, 1)

    @property
    def base_url_is_a_host(self) -> bool:
        """`--vllm_server_base_url` counts as a server host in the override from 3.7.2 (v3.7.2 L213)."""
        return self.version >= (3, 7, 2)

    @property
    def tuner_flag(self) -> str:
        return "tuner_type" if self.version >= (4,) else "train_type"

    @property
    def presets(self) -> dict[str, dict[str, Any]]:
        return PRESETS_4X if self.version >= (4,) else PRESETS_3X

    @property
    def always_empties_cache(self) -> bool:
        """gc_collect_after_offload became a deprecated no-op (cache always emptied) in 3.7."""
        return self.version >= (3, 7)

    @property
    def default_max_num_seqs(self) -> int | None:
        """`--vllm_max_num_seqs` unset on an engine ms-swift builds from VllmArguments (3.2-3.4
        engines, `swift rollout`): 256 in every release read (swift/llm/argument/infer_args.py
        `max_num_seqs: int = 256` v3.5.3/v3.6.4; swift/rlhf_trainers/args_mixin.py
        VllmArguments `vllm_max_num_seqs: int = 256` v4.0.4 L41 and HEAD, which RolloutArguments
        inherits through DeployArguments/InferArguments). A 3.5+ colocated engine sizes itself
        instead: `colocate_max_num_seqs_flag`."""
        return 256

    @property
    def colocate_max_num_seqs_flag(self) -> bool:
        """Whether a 3.5+ colocated engine reads `--vllm_max_num_seqs`. It is sized
        per_device_train_batch_size × vllm_tensor_parallel_size × steps_per_generation: always in
        3.5-3.10 (swift/trainers/rlhf_trainer/grpo_trainer.py `_prepare_vllm` at v3.5.3 L420,
        v3.6.4 L452, v3.7.3 L509; 3.5 deprecates the flag, 3.6 drops it), and where the flag is
        unset from 3.11 (`args.vllm_max_num_seqs or (per_rollout_batch_size *
        steps_per_generation)`, rollout_mixin.py v3.11.3 L193, v4.0.4 L199; GRPO's default None)."""
        return self.version >= (3, 11)

    @property
    def has_compat_aliases(self) -> bool:
        """gpu_memory_utilization / tensor_parallel_size / max_model_len / limit_mm_per_prompt."""
        return self.version < (3, 8)

    @property
    def generation_batch_divides(self) -> bool:
        """ms-swift >= 3.5 checks generation_batch_size % num_generations (TRL >= 0.18's
        generation batch: per device batch × processes × steps_per_generation)."""
        return self.version >= (3, 5)

    @property
    def accumulation_in_generation_batch(self) -> bool:
        """ms-swift 3.4's own check is per device batch × processes × gradient accumulation steps
        divisible by num_generations (swift/trainers/rlhf_trainer/grpo_trainer.py `__init__`,
        v3.4.0 L203); 3.2-3.3 checked per device batch × processes (v3.2.2 L179, v3.3.1 L201)."""
        return self.version >= (3, 4)

    @property
    def teacher_allows_one_generation(self) -> bool:
        """From 4.5 num_generations 1 is allowed with --teacher_model/--teacher_model_server (OPD-RL):
        swift/arguments/rlhf_args.py `_check_teacher` (v4.5.0 L394-410) raises for 1 only without a
        teacher, and rlhf_trainers/arguments.py no longer checks `< 2` (it did at v4.3.2 L119)."""
        return self.version >= (4, 5)

    @property
    def default_vllm(self) -> Version:
        return (0, 8, 5) if self.version < (4,) else VLLM_GRAPHS_IN_BUDGET


def _zero(stage: int, overlap: bool, offload_optimizer: bool = False, offload_param: bool = False) -> dict[str, Any]:
    zero: dict[str, Any] = {"stage": stage}
    if stage >= 1:
        zero["offload_optimizer"] = {"device": "cpu" if offload_optimizer else "none", "pin_memory": True}
    if stage == 3:
        zero["offload_param"] = {"device": "cpu" if offload_param else "none", "pin_memory": True}
        zero.update({"overlap_comm": overlap, "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
                     "stage3_param_persistence_threshold": "auto", "stage3_max_live_parameters": 1e9,
                     "sub_group_size": 1e9})
    elif stage >= 0:
        zero.update({"overlap_comm": overlap, "reduce_bucket_size": 2e8})
    return {"bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"}, "zero_optimization": zero}


PRESETS_3X = {
    "zero0": _zero(0, True),
    "zero1": _zero(1, True),
    "zero2": _zero(2, True),
    "zero2_offload": _zero(2, True, offload_optimizer=True),
    "zero3": _zero(3, True),
    "zero3_offload": _zero(3, True, offload_param=True),
}
"""swift/llm/ds_config/*.json, ms-swift 3.x: zero2/zero2_offload reduce_bucket_size 2e8 and
overlap_comm true (zero2.json, zero2_offload.json), zero3 "auto" buckets and overlap_comm true
(zero3.json); zero3_offload offloads parameters only (the stored copies, commits 7258e11b and
401737e2, keep offload_optimizer "none")."""

PRESETS_4X = {
    "zero0": _zero(0, False),
    "zero1": _zero(1, False),
    "zero2": _zero(2, False),
    "zero2_offload": _zero(2, False, offload_optimizer=True),
    "zero3": _zero(3, False),
    "zero3_offload": _zero(3, False, offload_optimizer=True, offload_param=True),
}
"""swift/config/*.json, ms-swift 4.x: the same values with overlap_comm false, and zero3_offload
offloading both optimizer and parameters."""

ALL_VERSIONS = "3.2-4.x"
FLAGS: dict[str, tuple[Version, Version | None, str]] = {
    # name: (first version, first version without it, source file)
    "rlhf_type": ((3, 2), None, "swift/llm/argument/rlhf_args.py; 4.x swift/arguments/rlhf_args.py"),
    "model": ((3, 2), None, "swift/llm/argument/base_args/model_args.py"),
    "dataset": ((3, 2), None, "swift/llm/argument/base_args/data_args.py"),
    "reward_funcs": ((3, 2), None, "swift/llm/argument/rlhf_args.py (GRPOArguments)"),
    "reward_model": ((3, 2), None, "swift/llm/argument/rlhf_args.py (RewardModelArguments)"),
    "beta": ((3, 2), None, "swift/llm/argument/rlhf_args.py (_init_grpo: 0.04)"),
    "max_completion_length": ((3, 2), None, "swift/llm/argument/rlhf_args.py (512)"),
    "num_generations": ((3, 2), None, "swift/llm/argument/rlhf_args.py (GRPOArguments: 8)"),
    "train_type": ((3, 2), (4,), "swift/llm/argument/train_args.py (3.x; 'lora')"),
    "tuner_type": ((4,), None, "swift/arguments/tuner_args.py (4.x; 'lora')"),
    "lora_rank": ((3, 2), None, "swift/llm/argument/tuner_args.py (8)"),
    "lora_alpha": ((3, 2), None, "swift/llm/argument/tuner_args.py (32)"),
    "lora_dropout": ((3, 2), None, "swift/llm/argument/tuner_args.py (0.05)"),
    "lora_dtype": ((3, 2), None, "swift/llm/argument/tuner_args.py (None: the model's dtype)"),
    "target_modules": ((3, 2), None, "swift/llm/argument/tuner_args.py (['all-linear'])"),
    "freeze_vit": ((3, 2), None, "swift/llm/argument/tuner_args.py (true)"),
    "quant_bits": ((3, 2), None, "swift/llm/argument/base_args/quant_args.py"),
    "quant_method": ((3, 2), None, "swift/llm/argument/base_args/quant_args.py"),
    "torch_dtype": ((3, 2), None, "swift/llm/argument/base_args/model_args.py (None: config.json)"),
    "attn_impl": ((3, 2), None, "swift/llm/argument/base_args/model_args.py (None: transformers' sdpa)"),
    "max_length": ((3, 2), None, "swift/llm/argument/base_args/template_args.py (None: the model's)"),
    "per_device_train_batch_size": ((3, 2), None, "swift/trainers/arguments.py TrainArgumentsMixin (1)"),
    "gradient_accumulation_steps": ((3, 2), None, "swift/llm/argument/rlhf_args.py _set_default (GRPO: 1)"),
    "gradient_checkpointing": ((3, 2), None, "swift/trainers/arguments.py TrainArgumentsMixin (true)"),
    "vit_gradient_checkpointing": ((3, 5), None, "swift/trainers/arguments.py (None: follows)"),
    "use_liger_kernel": ((3, 2), None, "swift/trainers/arguments.py TrainArgumentsMixin (false)"),
    "optim": ((3, 2), None, "transformers TrainingArguments (adamw_torch)"),
    "deepspeed": ((3, 2), None, "swift/llm/argument/train_args.py (zero0..zero3_offload or a JSON path)"),
    "steps_per_generation": ((3, 5), None, "swift/trainers/arguments.py GRPOArgumentsMixin (TRL >= 0.18)"),
    "generation_batch_size": ((3, 5), None, "swift/trainers/arguments.py GRPOArgumentsMixin (TRL >= 0.18)"),
    "advantage_estimator": ((3, 10), None, "swift/llm/argument/rlhf_args.py _init_grpo (late 3.x; grpo)"),
    "use_vllm": ((3, 2), None, "swift/trainers/arguments.py GRPOArgumentsMixin (false)"),
    "vllm_mode": ((3, 5), None, "swift/trainers/arguments.py GRPOArgumentsMixin (colocate|server)"),
    "vllm_server_host": ((3, 4), None, "swift/trainers/arguments.py GRPOArgumentsMixin (3.4: rlhf_args.py L188, external vLLM)"),
    "vllm_server_port": ((3, 4), None, "swift/trainers/arguments.py GRPOArgumentsMixin ([8000]; 3.4: rlhf_args.py L193)"),
    "num_infer_workers": ((3, 2), (3, 5), "swift/trainers/arguments.py GRPOArgumentsMixin 3.2-3.4 (1)"),
    "vllm_device": ((3, 2), (3, 5), "trl GRPOConfig 0.14-0.16 via ms-swift 3.2-3.4 ('auto': last GPU)"),
    "vllm_gpu_memory_utilization": ((3, 2), None, "swift/trainers/arguments.py VllmArguments (0.9)"),
    "vllm_tensor_parallel_size": ((3, 5), None, "swift/trainers/arguments.py VllmArguments (1)"),
    "tensor_parallel_size": ((3, 2), (3, 8), "swift/trainers/arguments.py VllmArguments compat alias"),
    "vllm_max_model_len": ((3, 2), None, "swift/trainers/arguments.py VllmArguments (None: the model's)"),
    "vllm_max_num_seqs": ((3, 2), None, "swift/trainers/arguments.py VllmArguments (3.x 256; 4.x None)"),
    "vllm_enforce_eager": ((3, 2), None, "swift/trainers/arguments.py VllmArguments (false)"),
    "vllm_limit_mm_per_prompt": ((3, 2), None, "swift/trainers/arguments.py VllmArguments (None)"),
    "sleep_level": ((3, 4), None, "swift/trainers/arguments.py GRPOArgumentsMixin (0)"),
    "offload_model": ((3, 4), None, "swift/trainers/arguments.py GRPOArgumentsMixin (false)"),
    "offload_optimizer": ((3, 4), None, "swift/trainers/arguments.py GRPOArgumentsMixin (false)"),
    "gc_collect_after_offload": ((3, 4), (3, 10), "swift/trainers/arguments.py (deprecated no-op from 3.7)"),
    "move_model_batches": ((3, 4), None, "swift/trainers/arguments.py GRPOArgumentsMixin (None: whole model)"),
}
"""Every flag the swift exporter writes (and the importer maps), with the versions whose reader
profile reads it and where it is defined: (first version, first version that no longer reads it,
source). The generated table (`data/key_table.json`, `key_tables.load("swift")`) has the releases
each flag exists in; tests check that it exists from the first version here and is gone by the
newest release read where a removal is given. A removal here can be a deprecation: ms-swift
3.5 still parses num_infer_workers and vllm_device (deprecated, for removal in 3.6), and
tensor_parallel_size is parsed up to 3.9 (not in 3.6), though 3.8 reads it no more in this adapter."""

NO_MEMORY_EFFECT = frozenset({
    "teacher_model_server",
    "dataset", "val_dataset", "external_plugins", "reward_funcs", "reward_weights", "learning_rate",
    "num_train_epochs", "max_steps", "save_steps", "save_strategy", "save_total_limit", "save_only_model",
    "eval_steps", "eval_strategy", "evaluation_strategy", "logging_steps", "output_dir", "warmup_ratio", "warmup_steps",
    "dataloader_num_workers", "dataset_num_proc", "temperature", "top_p", "top_k", "repetition_penalty",
    "system", "log_completions", "report_to", "num_iterations", "epsilon", "epsilon_high", "delta",
    "loss_type", "seed", "load_from_cache_file", "split_dataset_ratio", "max_grad_norm", "weight_decay",
    "lr_scheduler_type", "model_type", "model_revision", "use_hf", "vllm_server_port", "vllm_server_timeout",
    "vllm_enable_prefix_caching", "vllm_use_async_engine", "vllm_disable_custom_all_reduce", "adam_beta1",
    "adam_beta2", "truncation_strategy", "scale_rewards", "importance_sampling_level", "log_entropy",
    "top_entropy_quantile", "overlong_filter", "soft_max_length", "soft_cache_length", "stop_words",
    "template", "dataset_shuffle", "streaming", "lazy_tokenize", "add_version", "run_name", "logging_dir",
    "deepspeed_autotp_size", "wandb_log_unique_prompts", "sync_ref_model", "ref_model_sync_steps",
    "ref_model_mixup_alpha", "use_rslora", "init_weights", "ref_adapters", "lorap_lr_ratio", "vit_lr",
    "aligner_lr", "metric_for_best_model", "load_best_model_at_end", "ddp_timeout", "check_model",
    "resume_from_checkpoint", "resume_only_model", "multi_turn_scheduler", "max_turns", "loss_scale",
    "vllm_server_pass_dataset", "cosine_max_len", "repetition_n_grams", "repetition_max_penalty",
    "vllm_reasoning_parser", "ddp_find_unused_parameters", "push_to_hub", "hub_model_id", "ignore_args_error",
    "agent_template", "reward_model_plugin", "vllm_server_host", "chord_mu_warmup_steps", "chord_mu_decay_steps",
    "chord_mu_peak", "chord_mu_valley", "chord_enable_phi_function",
    # PPO (swift/arguments/rlhf_args.py PPOArguments): update rules, not shapes
    "num_ppo_epochs", "whiten_rewards", "cliprange", "vf_coef", "cliprange_value", "gamma", "lam",
    "missing_eos_penalty", "num_sample_generations", "reward_model_type", "reward_model_revision",
})
"""ms-swift flags understood to have no effect on the memory oomless plans."""

NOT_MODELLED = {
    "teacher_model": "the OPD-RL teacher on the training GPUs (its weights and logits)",
    "offload_teacher_model": "the OPD-RL teacher's CPU offload",
    "packing": "packed sequences (planned padded)",
    "vllm_enable_lora": "syncing only the adapter to vLLM is not modelled (planned as a merged-weight sync)",
    "vllm_max_lora_rank": "vLLM LoRA slots are not modelled",
    "vllm_pipeline_parallel_size": "vLLM pipeline parallelism is not modelled",
    "vllm_data_parallel_size": "vLLM data parallelism is not modelled",
    "vllm_quantization": "a quantized vLLM copy is not modelled (planned bf16)",
    "vllm_enable_expert_parallel": "expert parallelism is not modelled",
    "dynamic_sample": "DAPO resampling (extra rollout batches) is not modelled",
    "max_resample_times": "DAPO resampling is not modelled",
    "ds3_gather_for_generation": "ZeRO-3 generation without a full gather is not modelled",
    "freeze_llm": "a frozen language model is not modelled (planned trainable)",
    "freeze_aligner": "the aligner is planned with the language model",
    "freeze_parameters": "partly frozen full fine-tuning is not modelled",
    "freeze_parameters_ratio": "partly frozen full fine-tuning is not modelled",
    "trainable_parameters": "partly frozen full fine-tuning is not modelled",
    "modules_to_save": "fully trained extra modules beside LoRA are not modelled",
    "use_dora": "DoRA's magnitude vectors are not modelled (planned as LoRA)",
    "lora_bias": "trainable biases are not modelled",
    "target_regex": "a regex target is not modelled (planned as target_modules)",
    "ref_model": "a reference model of another architecture is not modelled (planned as --model)",
    "per_device_eval_batch_size": "evaluation is not planned",
    "vllm_server_base_url": "a server elsewhere: its GPUs are those beyond NPROC_PER_NODE",
    "num_generations_eval": "evaluation is not planned",
    "chord_sft_dataset": "CHORD's SFT loss on a second dataset is not modelled",
    "chord_sft_per_device_train_batch_size": "CHORD's SFT micro-batches beside the GRPO ones are not modelled",
    "use_lmdeploy": "an LMDeploy rollout engine is not modelled",
    "async_generate": "generating the next batch while training (an extra batch in flight) is not modelled",
}
"""Flags that change memory in ways the spec has no field for: reported, not planned."""

COMPAT_ALIASES = {
    "gpu_memory_utilization": "vllm_gpu_memory_utilization",
    "tensor_parallel_size": "vllm_tensor_parallel_size",
    "max_model_len": "vllm_max_model_len",
    "limit_mm_per_prompt": "vllm_limit_mm_per_prompt",
}
"""Pre-3.8 spellings (VllmArguments._handle_compatibility)."""

ATTENTION = {"flash_attn": "flash_attention_2", "flash_attention_2": "flash_attention_2", "sdpa": "sdpa",
             "eager": "eager"}
TORCH_DTYPES = {"bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "fp16": "fp16", "half": "fp16"}
LORA_TYPES = ("lora", "longlora")
EXAMPLE_DATASET = "AI-MO/NuminaMath-TIR#1000"
"""The dataset ms-swift's own GRPO examples use (examples/train/grpo/*.sh)."""


SPEC_SOURCES: dict[str, str] = {
    "model": "--model", "finetune.method": "--tuner_type | --train_type", "finetune.lora_rank": "--lora_rank",
    "finetune.lora_alpha": "--lora_alpha", "finetune.lora_targets": "--target_modules",
    "distribution": "--deepspeed | --fsdp", "precision": "--torch_dtype", "gradient_checkpointing": "--gradient_checkpointing",
    "attention": "--attn_impl", "logits": "--use_liger_kernel", "kl_beta": "--beta",
    "batch.micro_batch_size": "--per_device_train_batch_size", "batch.num_generations": "--num_generations",
    "batch.gradient_accumulation_steps": "--gradient_accumulation_steps", "batch.padding_free": "--padding_free",
    "lengths.max_completion_tokens": "--max_completion_length", "lengths.max_prompt_tokens": "--max_length",
    "rollout.engine": "--use_vllm | --vllm_mode", "rollout.gpu_memory_utilization": "--vllm_gpu_memory_utilization",
    "rollout.tensor_parallel_size": "--vllm_tensor_parallel_size", "rollout.max_model_len": "--vllm_max_model_len",
    "rollout.sleep_level": "--sleep_level", "rollout.offload_model": "--offload_model",
    "rollout.offload_optimizer": "--offload_optimizer", "rollout.weight_sync_batches": "--move_model_batches",
    "rollout.num_gpus": "swift rollout", "vision.max_pixels": "MAX_PIXELS | --max_pixels",
    "hardware.gpus_per_node": "NPROC_PER_NODE | CUDA_VISIBLE_DEVICES", "hardware.num_nodes": "NNODES",
    "distribution.sequence_parallel_size": "--sequence_parallel_size", "optimizer_implementation": "--optim",
}
"""Spec field (or section) → the native key(s) it is read from, alternatives separated by `|`;
`oomless import` comments every value with the one the file sets."""
