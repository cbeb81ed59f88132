"""Fields the user set that the rest of the spec makes irrelevant: reported as warnings.

Uses pydantic's `model_fields_set`, so only fields written in the YAML are reported, never
defaults.
"""

from __future__ import annotations

from pydantic import BaseModel

from .run import FinetuneMethod, LogitsMode, RolloutEngine, RunSpec, Strategy

_VLLM_FIELDS = (
    "gpu_memory_utilization", "tensor_parallel_size", "max_num_seqs", "max_num_batched_tokens",
    "max_model_len", "enforce_eager", "engine_in_trainer_process",
)
_COLOCATE_FIELDS = ("sleep_level", "offload_model", "offload_optimizer", "engine_in_trainer_process")
_DEEPSPEED_FIELDS = ("reduce_bucket_size", "overlap_comm")
_ZERO3_FIELDS = (
    "stage3_prefetch_bucket_size", "stage3_max_live_parameters", "stage3_param_persistence_threshold",
    "sub_group_size",
)


def _set(model: BaseModel, names: tuple[str, ...]) -> list[str]:
    return [n for n in names if n in model.model_fields_set]


def ignored_fields(spec: RunSpec) -> list[str]:
    """One message per field that has no effect, naming why."""
    out: list[str] = []

    def add(section: str, names: list[str], why: str) -> None:
        out.extend(f"{section}.{n} is ignored: {why}" for n in names)

    if spec.finetune.method == FinetuneMethod.full:
        add("finetune", _set(spec.finetune, ("lora_rank", "lora_alpha", "lora_targets", "adapter_dtype")), "finetune.method is full")
    if spec.finetune.method != FinetuneMethod.qlora:
        add("finetune", _set(spec.finetune, ("double_quant",)), "finetune.method is not qlora (no 4-bit base)")
    ro = spec.rollout
    if ro.engine == RolloutEngine.hf:
        add("rollout", _set(ro, _VLLM_FIELDS), "rollout.engine is hf (no vLLM)")
    if ro.engine != RolloutEngine.vllm_separate:
        add("rollout", _set(ro, ("num_gpus",)), "only vllm_separate gives vLLM GPUs of its own")
    if ro.engine == RolloutEngine.vllm_separate:
        add("rollout", _set(ro, _COLOCATE_FIELDS), "it applies to vllm_colocate only")
    if ro.engine == RolloutEngine.vllm_colocate and ro.sleep_level == 0:
        add("rollout", _set(ro, ("offload_model", "offload_optimizer")), "offload during rollout needs sleep_level 1 or 2 (ms-swift)")
    if spec.placement.groups is not None:
        add("rollout", _set(ro, ("num_gpus",)), "placement.groups decide the GPUs")
    strategy = spec.distribution.strategy
    if strategy in (Strategy.ddp, Strategy.fsdp):
        add("distribution", _set(spec.distribution, _DEEPSPEED_FIELDS), f"strategy {strategy.value} has no DeepSpeed buckets")
    if strategy != Strategy.zero3:
        add("distribution", _set(spec.distribution, _ZERO3_FIELDS), "it applies to zero3 only")
    if spec.logits != LogitsMode.chunked and "logits_chunk_rows" in spec.model_fields_set:
        out.append("logits_chunk_rows is ignored: logits is not chunked")
    if spec.logits not in (LogitsMode.bf16_flash_ce, LogitsMode.bf16_flash_ce_entropy) and "logits_temperature" in spec.model_fields_set:
        out.append("logits_temperature is ignored: only the bf16_flash_ce modes count the temperature's copy this way")
    if not spec.ray.enabled:
        add("ray", _set(spec.ray, ("memory_usage_threshold", "object_store_fraction")), "ray.enabled is false")
    return out
