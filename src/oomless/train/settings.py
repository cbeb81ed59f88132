"""From a run spec to TRL's `GRPOConfig` keyword arguments: pure, no torch.

The spec's batch is kept exactly: one optimizer step sees `micro_batch_size ×
gradient_accumulation_steps` completions per rank. TRL is handed that whole step as its
per-device batch with `gradient_accumulation_steps=1`, and `OomlessGRPOTrainer` splits it into
micro-batches itself, so an out-of-memory error can re-split the same samples (see
`oomless.train.trainer`). A rollout still covers `steps_per_generation` micro-steps: TRL's
`steps_per_generation` becomes the number of optimizer steps per rollout.

Source: trl 1.16.0 `trl/trainer/grpo_config.py` (field names and defaults).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import InputError
from ..spec.run import (
    Algorithm,
    FinetuneMethod,
    LogitsMode,
    Optimizer,
    OptimizerImplementation,
    Precision,
    RolloutEngine,
    RunSpec,
    Strategy,
)
from ..spec.train_section import TrainSection

HF_OPTIMIZER = {
    Optimizer.adamw: "adamw_torch",
    Optimizer.adamw_8bit: "adamw_bnb_8bit",
    Optimizer.adafactor: "adafactor",
    Optimizer.sgd: "sgd",
}
"""transformers `OptimizerNames` for each spec optimizer."""


@dataclass(frozen=True)
class Machine:
    """What the training process runs on (found by `oomless.train.environment`)."""

    device: str
    """"cuda" or "cpu"."""
    num_gpus: int = 0
    has_vllm: bool = False
    has_bitsandbytes: bool = False
    has_liger: bool = False


@dataclass(frozen=True)
class BatchLayout:
    """Completions per rank per optimizer step, split into micro-batches."""

    micro_batch_size: int
    gradient_accumulation_steps: int
    steps_per_rollout: int
    """Optimizer steps served by one rollout (TRL `steps_per_generation`)."""
    logprob_micro_batch_size: int

    @property
    def step_batch_size(self) -> int:
        return self.micro_batch_size * self.gradient_accumulation_steps


def batch_layout(spec: RunSpec) -> BatchLayout:
    b, ga = spec.batch, spec.batch.gradient_accumulation_steps
    micro_steps = spec.steps_per_generation
    if micro_steps % ga:
        raise InputError(
            "batch.steps_per_generation",
            f"{micro_steps} is not a multiple of gradient_accumulation_steps={ga}; `oomless train` runs whole "
            "optimizer steps per rollout",
        )
    step_batch = b.micro_batch_size * ga
    if step_batch % b.num_generations:
        raise InputError(
            "batch.num_generations",
            f"{b.num_generations} does not divide micro_batch_size × gradient_accumulation_steps = {step_batch}",
        )
    return BatchLayout(b.micro_batch_size, ga, micro_steps // ga, spec.logprob_micro_batch_size)


def hf_optimizer_name(spec: RunSpec) -> str:
    """The Trainer's `optim` for the spec: torch AdamW as the plan steps it (`adamw_torch` is
    foreach on CUDA, `adamw_torch_fused` the fused kernel; unset plans foreach under DDP/FSDP)."""
    if spec.optimizer == Optimizer.adamw and spec.optimizer_implementation == OptimizerImplementation.fused:
        return "adamw_torch_fused"
    return HF_OPTIMIZER[spec.optimizer]


def refusals(spec: RunSpec, machine: Machine) -> list[str]:
    """Reasons this run cannot start on this machine, one line each (empty: it can)."""
    out = []
    if spec.algorithm == Algorithm.ppo:
        out.append("algorithm: ppo needs a critic; `oomless train` runs TRL's GRPOTrainer (grpo, dapo, rloo)")
    if spec.finetune.method == FinetuneMethod.qlora and (machine.device != "cuda" or not machine.has_bitsandbytes):
        out.append("finetune.method: qlora needs bitsandbytes and a CUDA GPU; use lora on this machine")
    if spec.optimizer_implementation == OptimizerImplementation.for_loop:
        out.append("optimizer_implementation: for_loop has no Trainer `optim`; use foreach (adamw_torch) or fused (adamw_torch_fused)")
    if spec.optimizer == Optimizer.adamw_8bit and (machine.device != "cuda" or not machine.has_bitsandbytes):
        out.append("optimizer: adamw_8bit needs bitsandbytes and a CUDA GPU; use adamw on this machine")
    if spec.rollout.engine != RolloutEngine.hf and not (machine.device == "cuda" and machine.has_vllm):
        out.append(
            f"rollout.engine: {spec.rollout.engine.value} needs vLLM on a CUDA GPU "
            f"({'vLLM is not installed' if not machine.has_vllm else 'no GPU'}); use engine hf here"
        )
    if spec.logits == LogitsMode.fused and not machine.has_liger:
        out.append("logits: fused needs liger-kernel (TRL use_liger_kernel); use full_bf16")
    if spec.liger_kernels and spec.logits != LogitsMode.fused:
        out.append("liger_kernels: TRL applies Liger's model kernels only with its fused loss (use_liger_kernel); "
                   "set logits: fused as well, or liger_kernels: false")
    return out


def notes(spec: RunSpec, machine: Machine) -> list[str]:
    """Differences between what was planned and what will run, one line each."""
    out = []
    if machine.device == "cpu" and spec.precision != Precision.bf16:
        out.append(
            f"precision: {spec.precision.value} is planned, the CPU run computes in fp32 (TRL on CPU: bf16=False)"
        )
    if spec.algorithm == Algorithm.dapo:
        out.append("algorithm: dapo runs as GRPO with loss_type dapo and beta 0; dynamic sampling is not applied")
    if machine.device == "cpu" and spec.distribution.strategy.value != "ddp":
        out.append(f"distribution.strategy: {spec.distribution.strategy.value} applies on GPUs only; one CPU process")
    return out


def weights_dtype(spec: RunSpec, machine: Machine) -> str:
    """dtype the policy is loaded in. CPU: fp32 (bf16 only when the spec asks for pure bf16).
    GPU: half precision for pure bf16, for LoRA/QLoRA bases (adapters stay fp32, PEFT
    autocast_adapter_dtype) and under ZeRO/FSDP (DeepSpeed/FSDP keep the fp32 master copy);
    fp32 under plain DDP, where the Trainer's autocast supplies bf16/fp16 compute."""
    half = "float16" if spec.precision == Precision.fp16_mixed else "bfloat16"
    if machine.device != "cuda":
        return "bfloat16" if spec.precision == Precision.bf16 else "float32"
    if spec.precision == Precision.bf16 or spec.finetune.method != FinetuneMethod.full:
        return half
    return "float32" if spec.distribution.strategy == Strategy.ddp else half


def model_init_kwargs(spec: RunSpec, machine: Machine) -> dict[str, Any]:
    """`from_pretrained` keyword arguments of the policy (TRL's `model_init_kwargs`)."""
    kwargs: dict[str, Any] = {"attn_implementation": spec.attention.value, "dtype": weights_dtype(spec, machine)}
    if spec.finetune.method == FinetuneMethod.qlora:
        kwargs["quantization_config"] = qlora_quantization_config(weights_dtype(spec, machine), spec.finetune.double_quant)
    return kwargs


def qlora_quantization_config(compute_dtype: str, double_quant: bool = True) -> Any:
    """The 4-bit base the planner sizes (`memory.states.frozen_weight_bytes`): NF4, double
    quantisation as the spec says, compute in the run's half precision (QLoRA paper §3; TRL's
    `get_quantization_config` with `--load_in_4bit --bnb_4bit_quant_type nf4 [--use_bnb_nested_quant]`)."""
    import torch
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=double_quant,
                              bnb_4bit_compute_dtype=getattr(torch, compute_dtype), bnb_4bit_quant_storage=torch.uint8)


def grpo_config_kwargs(spec: RunSpec, train: TrainSection, machine: Machine, output_dir: str, max_steps: int,
                       report_to: tuple[str, ...] = ("none",)) -> dict[str, Any]:
    """Keyword arguments of `trl.GRPOConfig` for this spec on this machine; ``report_to``
    (transformers' loggers: "tensorboard", "wandb", ...) is passed through."""
    layout = batch_layout(spec)
    gpu = machine.device == "cuda"
    mixed = gpu and spec.precision != Precision.bf16
    beta = 0.0 if spec.algorithm == Algorithm.dapo else spec.kl_beta
    kwargs: dict[str, Any] = {
        "output_dir": output_dir,
        "max_steps": max_steps,
        "learning_rate": train.learning_rate,
        "lr_scheduler_type": train.lr_scheduler,
        "logging_steps": train.logging_steps,
        "save_strategy": "steps" if train.save_steps else "no",
        "save_steps": train.save_steps or 500,
        "save_total_limit": 2,
        "seed": train.seed,
        "temperature": train.temperature,
        "loss_type": train.loss_type,
        "max_grad_norm": train.max_grad_norm,
        "num_iterations": train.num_iterations,
        "per_device_train_batch_size": layout.step_batch_size,
        "gradient_accumulation_steps": 1,
        "steps_per_generation": layout.steps_per_rollout,
        "num_generations": spec.batch.num_generations,
        "max_completion_length": spec.lengths.max_completion_tokens,
        "beta": beta,
        "gradient_checkpointing": spec.gradient_checkpointing,
        "optim": hf_optimizer_name(spec),
        "bf16": mixed and spec.precision == Precision.bf16_mixed,
        "fp16": mixed and spec.precision == Precision.fp16_mixed,
        "use_cpu": not gpu,
        "report_to": list(report_to),
        "disable_tqdm": True,
        "use_liger_kernel": spec.logits == LogitsMode.fused,
        "model_init_kwargs": model_init_kwargs(spec, machine),
        "reward_weights": [r.weight for r in train.rewards],
        "dataloader_num_workers": 0,
        "use_vllm": spec.rollout.engine != RolloutEngine.hf,
    }
    if kwargs["use_vllm"]:
        ro = spec.rollout
        kwargs.update(
            vllm_mode="colocate" if ro.engine == RolloutEngine.vllm_colocate else "server",
            vllm_gpu_memory_utilization=ro.gpu_memory_utilization,
            vllm_tensor_parallel_size=ro.tensor_parallel_size,
            vllm_enable_sleep_mode=ro.sleep_level > 0,
            vllm_max_model_length=ro.max_model_len or spec.max_sequence_tokens,
        )
    if spec.rollout.empty_cache_before_rollout and gpu:
        kwargs["torch_empty_cache_steps"] = 1
    return kwargs


def lora_kwargs(spec: RunSpec) -> dict[str, Any] | None:
    """`peft.LoraConfig` keyword arguments, or None for full fine-tuning."""
    ft = spec.finetune
    if ft.method == FinetuneMethod.full:
        return None
    return {
        "r": ft.lora_rank,
        "lora_alpha": ft.lora_alpha,
        "lora_dropout": ft.lora_dropout,
        "target_modules": ft.lora_targets,
        "task_type": "CAUSAL_LM",
    }
