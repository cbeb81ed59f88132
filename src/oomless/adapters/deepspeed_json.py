"""DeepSpeed JSON configs ↔ the spec's `distribution` section (used by the swift and trl adapters).

`distribution_from_deepspeed` reads a DeepSpeed config as HF Trainer hands it to DeepSpeed;
`deepspeed_config_for` writes one that reads back to the same section.

Source: DeepSpeed `deepspeed/runtime/zero/config.py` (`DeepSpeedZeroConfig`) for the values a
config leaves out; HF `transformers/integrations/deepspeed.py` (`HfTrainerDeepSpeedConfig`)
for the "auto" values it fills (reduce_bucket_size = h², stage3_prefetch_bucket_size = 0.9·h²,
stage3_param_persistence_threshold = 10·h), which the spec keeps as "auto".
Assumes: ZeRO stage 0 is data parallelism (no partitioning); its bf16 optimizer keeps fp32
master weights like stages 1-3, so only the strategy changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InputError
from ..spec.run import Distribution, Strategy
from .common import to_bool, to_int

STAGE_STRATEGY = {0: Strategy.ddp, 1: Strategy.zero1, 2: Strategy.zero2, 3: Strategy.zero3}

DEEPSPEED_DEFAULTS: dict[str, int] = {
    "reduce_bucket_size": 500_000_000,
    "stage3_prefetch_bucket_size": 50_000_000,
    "stage3_param_persistence_threshold": 100_000,
    "stage3_max_live_parameters": 1_000_000_000,
    "sub_group_size": 1_000_000_000,
}
"""DeepSpeedZeroConfig defaults (DeepSpeed 0.15-0.17); overlap_comm defaults to `stage == 3`."""

BUCKET_KEYS = ("reduce_bucket_size", "overlap_comm")
ZERO3_KEYS = (
    "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold", "stage3_max_live_parameters",
    "sub_group_size",
)
AUTO_ALLOWED = ("reduce_bucket_size", "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold")
NO_MEMORY_EFFECT_ZERO = frozenset({
    "stage", "contiguous_gradients", "allgather_partitions", "reduce_scatter", "round_robin_gradients",
    "stage3_gather_16bit_weights_on_model_save", "gather_16bit_weights_on_model_save", "offload_optimizer",
    "offload_param", "load_from_fp32_weights", "elastic_checkpoint", "ignore_unused_parameters",
    "zero_quantized_weights", "zero_quantized_gradients", "zero_hpz_partition_size", "mics_shard_size",
})
NOT_MODELLED_ZERO = frozenset({"allgather_bucket_size", "stage3_max_reuse_distance"})
NO_MEMORY_EFFECT_TOP = frozenset({
    "fp16", "bf16", "optimizer", "scheduler", "gradient_accumulation_steps", "gradient_clipping",
    "train_batch_size", "train_micro_batch_size_per_gpu", "steps_per_print", "wall_clock_breakdown",
    "zero_optimization", "zero_allow_untested_optimizer", "communication_data_type", "prescale_gradients",
    "gradient_predivide_factor", "flops_profiler", "tensorboard", "wandb", "csv_monitor", "comms_logger",
})


@dataclass(frozen=True)
class DeepSpeedRead:
    distribution: dict[str, Any]
    """Keys of the spec's `distribution` section (only those that apply to the stage)."""
    half: str
    """'fp16', 'bf16' or 'auto' (HF decides from the trainer's fp16/bf16 flags)."""
    optimizer: str | None
    """The config's own optimizer type, lower-cased, or None (the trainer's `optim` decides)."""
    ignored: tuple[str, ...] = ()


def _number(source: str, key: str, value: Any) -> int | str:
    if value == "auto" and key in AUTO_ALLOWED:
        return "auto"
    return to_int(f"{source}: zero_optimization.{key}", value, minimum=0)


def _device(name: str, section: Any) -> bool:
    if section is None:
        return False
    device = section.get("device", "none") if isinstance(section, Mapping) else section
    if device in (None, "none"):
        return False
    if device not in ("cpu", "nvme"):
        raise InputError(name, f"{device!r} is not an offload device; allowed: none, cpu, nvme")
    return True


def _half(config: Mapping[str, Any], source: str) -> str:
    enabled = {}
    for key in ("fp16", "bf16"):
        value = (config.get(key) or {}).get("enabled", False) if isinstance(config.get(key), Mapping) else False
        enabled[key] = value if value == "auto" else to_bool(f"{source}: {key}.enabled", value)
    if enabled["fp16"] is True:
        return "fp16"
    if enabled["bf16"] is True:
        return "bf16"
    return "auto"


def distribution_from_deepspeed(config: Mapping[str, Any], source: str) -> DeepSpeedRead:
    """A DeepSpeed config → the spec's distribution keys, its half-precision mode, ignored keys."""
    if not isinstance(config, Mapping):
        raise InputError(source, "a DeepSpeed config must be a JSON object")
    zero = config.get("zero_optimization") or {}
    if not isinstance(zero, Mapping):
        raise InputError(f"{source}: zero_optimization", f"must be a JSON object, got {type(zero).__name__}")
    stage = to_int(f"{source}: zero_optimization.stage", zero.get("stage", 0))
    if stage not in STAGE_STRATEGY:
        raise InputError(f"{source}: zero_optimization.stage", f"{stage} is not a ZeRO stage; allowed: 0, 1, 2, 3")
    out: dict[str, Any] = {"strategy": STAGE_STRATEGY[stage].value}
    ignored: list[str] = []
    offload_optimizer = _device(f"{source}: zero_optimization.offload_optimizer", zero.get("offload_optimizer"))
    offload_params = _device(f"{source}: zero_optimization.offload_param", zero.get("offload_param"))
    if offload_optimizer and stage == 0:
        ignored.append(f"{source}: offload_optimizer has no effect at ZeRO stage 0")
    elif offload_optimizer:
        out["offload_optimizer"] = True
    if offload_params and stage < 3:
        ignored.append(f"{source}: offload_param has no effect below ZeRO stage 3")
    elif offload_params:
        out["offload_params"] = True
    for where in ("offload_optimizer", "offload_param"):
        if isinstance(zero.get(where), Mapping) and zero[where].get("device") == "nvme":
            ignored.append(f"{source}: {where}.device nvme is planned as cpu (pinned host buffers not modelled)")
    if stage >= 1:
        out["reduce_bucket_size"] = _number(source, "reduce_bucket_size",
                                            zero.get("reduce_bucket_size", DEEPSPEED_DEFAULTS["reduce_bucket_size"]))
        out["overlap_comm"] = to_bool(f"{source}: overlap_comm", zero.get("overlap_comm", stage == 3))
    if stage == 3:
        for key in ZERO3_KEYS:
            out[key] = _number(source, key, zero.get(key, DEEPSPEED_DEFAULTS[key]))
    for key in zero:
        if key in NOT_MODELLED_ZERO:
            ignored.append(f"{source}: zero_optimization.{key} affects memory but is not modelled")
        elif key not in NO_MEMORY_EFFECT_ZERO and key not in BUCKET_KEYS and key not in ZERO3_KEYS:
            ignored.append(f"{source}: zero_optimization.{key} not understood")
    for key in config:
        if key not in NO_MEMORY_EFFECT_TOP:
            ignored.append(f"{source}: {key} not understood")
    optimizer = config.get("optimizer", {}).get("type") if isinstance(config.get("optimizer"), Mapping) else None
    return DeepSpeedRead(out, _half(config, source), optimizer.lower() if optimizer else None, tuple(ignored))


def deepspeed_config_for(distribution: Distribution) -> dict[str, Any]:
    """A DeepSpeed config (HF "auto" batch sizes and precision) that reads back to ``distribution``."""
    stage = {v: k for k, v in STAGE_STRATEGY.items()}.get(distribution.strategy)
    if stage is None:
        raise InputError("distribution.strategy", f"{distribution.strategy.value} is not a DeepSpeed strategy")
    zero: dict[str, Any] = {"stage": stage}
    if stage >= 1:
        zero["offload_optimizer"] = {"device": "cpu" if distribution.offload_optimizer else "none", "pin_memory": True}
    if stage == 3:
        zero["offload_param"] = {"device": "cpu" if distribution.offload_params else "none", "pin_memory": True}
    if stage >= 1:
        zero["overlap_comm"] = distribution.overlap_comm
        zero["contiguous_gradients"] = True
        zero["reduce_bucket_size"] = distribution.reduce_bucket_size
    if stage == 3:
        for key in ZERO3_KEYS:
            zero[key] = getattr(distribution, key)
        zero["stage3_gather_16bit_weights_on_model_save"] = True
    return {
        "fp16": {"enabled": "auto"},
        "bf16": {"enabled": "auto"},
        "zero_optimization": zero,
        "gradient_accumulation_steps": "auto",
        "gradient_clipping": "auto",
        "train_batch_size": "auto",
        "train_micro_batch_size_per_gpu": "auto",
    }


def distribution_keys(distribution: Distribution) -> dict[str, Any]:
    """The spec keys `distribution_from_deepspeed` would give for ``distribution`` (for comparing)."""
    config = deepspeed_config_for(distribution)
    return distribution_from_deepspeed(config, "deepspeed").distribution
