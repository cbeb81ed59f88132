"""Multi-GPU launch files generated from the spec: a DeepSpeed JSON (ZeRO-1/2/3 with the spec's
buckets and offload) or an accelerate YAML (DDP, DeepSpeed, FSDP). Pure: plain dicts out.

`oomless train` writes them into the output folder on a GPU machine, where the run is started
with `accelerate launch --config_file accelerate.yaml -m oomless train SPEC`. On a CPU-only
machine they are only generated (and tested) — there is nothing to distribute.

Source: DeepSpeed config JSON (deepspeed 0.17 `runtime/zero/config.py` keys), transformers
"auto" values (`integrations/deepspeed.py` `trainer_config_process`), accelerate 1.15
`commands/config/config_args.py` (YAML keys) and FSDP2 plugin keys.
"""

from __future__ import annotations

from typing import Any

from ..spec.run import Precision, RunSpec, Strategy

ZERO_STAGE = {Strategy.zero1: 1, Strategy.zero2: 2, Strategy.zero3: 3}
AUTO = "auto"
"""transformers fills these from the Trainer's arguments (batch sizes, clipping, precision)."""


def _bucket(value: int | str) -> int | str:
    return AUTO if value == "auto" else value


def deepspeed_config(spec: RunSpec) -> dict[str, Any] | None:
    """The DeepSpeed config of a ZeRO strategy, or None for ddp/fsdp."""
    d = spec.distribution
    stage = ZERO_STAGE.get(d.strategy)
    if stage is None:
        return None
    zero: dict[str, Any] = {
        "stage": stage,
        "overlap_comm": d.overlap_comm,
        "contiguous_gradients": True,
        "reduce_bucket_size": _bucket(d.reduce_bucket_size),
    }
    if d.offload_optimizer:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if stage == 3:
        zero.update(
            stage3_prefetch_bucket_size=_bucket(d.stage3_prefetch_bucket_size),
            stage3_max_live_parameters=d.stage3_max_live_parameters,
            stage3_param_persistence_threshold=_bucket(d.stage3_param_persistence_threshold),
            sub_group_size=d.sub_group_size,
            stage3_gather_16bit_weights_on_model_save=True,
        )
        if d.offload_params:
            zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    return {
        "bf16": {"enabled": AUTO},
        "fp16": {"enabled": AUTO},
        "zero_optimization": zero,
        "gradient_accumulation_steps": AUTO,
        "gradient_clipping": AUTO,
        "train_micro_batch_size_per_gpu": AUTO,
        "train_batch_size": AUTO,
    }


def _mixed_precision(spec: RunSpec) -> str:
    return "fp16" if spec.precision == Precision.fp16_mixed else "bf16"


def fsdp_config(spec: RunSpec) -> dict[str, Any]:
    """accelerate's `fsdp_config` block: FSDP2 full shard, the spec's offload and checkpointing."""
    d = spec.distribution
    return {
        "fsdp_version": 2,
        "fsdp_reshard_after_forward": True,
        "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
        "fsdp_cpu_ram_efficient_loading": d.rank0_init,
        "fsdp_offload_params": d.offload_params or d.offload_optimizer,
        "fsdp_state_dict_type": "SHARDED_STATE_DICT",
        "fsdp_activation_checkpointing": spec.gradient_checkpointing,
    }


def accelerate_config(spec: RunSpec, deepspeed_file: str = "deepspeed.json") -> dict[str, Any]:
    """accelerate's config YAML (as a dict) for the spec's training GPUs and nodes."""
    hw, strategy = spec.hardware, spec.distribution.strategy
    training_gpus = hw.gpus_per_node - (spec.rollout.num_gpus if spec.rollout.engine.value == "vllm_separate" else 0)
    config: dict[str, Any] = {
        "compute_environment": "LOCAL_MACHINE",
        "num_machines": hw.num_nodes,
        "num_processes": training_gpus * hw.num_nodes,
        "machine_rank": 0,
        "mixed_precision": _mixed_precision(spec),
        "use_cpu": False,
        "main_training_function": "main",
    }
    if strategy in ZERO_STAGE:
        config["distributed_type"] = "DEEPSPEED"
        config["deepspeed_config"] = {"deepspeed_config_file": deepspeed_file, "zero3_init_flag": strategy == Strategy.zero3}
        del config["mixed_precision"]  # the DeepSpeed file decides precision ("auto")
    elif strategy == Strategy.fsdp:
        config["distributed_type"] = "FSDP"
        config["fsdp_config"] = fsdp_config(spec)
    else:
        config["distributed_type"] = "MULTI_GPU" if config["num_processes"] > 1 else "NO"
    return config


def launch_files(spec: RunSpec) -> dict[str, dict[str, Any]]:
    """File name → content: `accelerate.yaml` always, `deepspeed.json` for ZeRO strategies."""
    out = {"accelerate.yaml": accelerate_config(spec)}
    ds = deepspeed_config(spec)
    if ds is not None:
        out["deepspeed.json"] = ds
    return out
