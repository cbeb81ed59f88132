"""VLM-R1: a run spec → a torchrun launch script and its DeepSpeed JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from .. import _native as N
from .. import common as C
from .keys import DEFAULTS


NATIVE_STYLE = "flags"
"""`grpo_jsonl.py --flag value` (HfArgumentParser)."""
NATIVE_DIALECTS = ("main",)
MAIN_FILE = "run_vlmr1.sh"
ROLLOUT_EVERY_MICRO_STEP = True
"""VLM-R1's TRL 0.14-era trainer generates in `_prepare_inputs`, once per micro-step: `fit --from
vlmr1` splits batches keeping that (`fit.layouts.batch_splits`)."""


def export_spec(spec: Any, out_dir: Path, force: bool) -> list[Path]:
    """A torchrun launch of VLM-R1's grpo_jsonl.py, plus the DeepSpeed JSON it names."""
    return [C.write_new_file(out_dir / name, text, force) for name, text in render_files(spec).items()]


def native_settings(spec: Any, dialect: str = NATIVE_DIALECTS[0]) -> dict[str, Any]:
    """`--flag` → value: what `export_spec` writes, and what `fit --from vlmr1 --write` patches
    into the user's script (one mapping for both)."""
    fw = "vlmr1"
    strategy = C.require(spec, "distribution.strategy", ("ddp", "zero1", "zero2", "zero3"), fw)
    C.require(spec, "rollout.engine", ("hf",), fw)
    C.require(spec, "ray.enabled", (False,), fw)
    C.require(spec, "precision", ("bf16_mixed", "fp16_mixed"), fw)
    C.require(spec, "finetune.method", ("full", "lora"), fw)
    C.require_merged_lora(spec, fw)
    C.require(spec, "logits", ("full_bf16",), fw)
    if spec.steps_per_generation != 1:  # its trainer generates every micro-step (the reader gives 1)
        C.cannot_express("batch.steps_per_generation", f"{spec.batch.steps_per_generation!r} with gradient_accumulation_steps "
                         f"{spec.batch.gradient_accumulation_steps} cannot be written for vlmr1: it generates a rollout every "
                         "micro-step; allowed: 1")
    C.require(spec, "batch.max_tokens_per_gpu", (None,), fw)  # the reader plans fixed micro-batches
    C.require(spec, "batch.padding_free", (False,), fw)
    b, dist = spec.batch, spec.distribution
    if b.micro_batch_size % b.num_generations:
        C.cannot_express("batch.micro_batch_size", f"{b.micro_batch_size} is not a multiple of num_generations {b.num_generations} "
                         "(VLM-R1 counts per_device_train_batch_size in prompts)")
    flags: dict[str, Any] = {
        "model_name_or_path": spec.model, "per_device_train_batch_size": max(1, b.micro_batch_size // b.num_generations),
        "gradient_accumulation_steps": b.gradient_accumulation_steps, "num_generations": b.num_generations,
        "max_prompt_length": spec.lengths.max_prompt_tokens, "max_completion_length": spec.lengths.max_completion_tokens,
        "max_pixels": spec.vision.max_pixels or DEFAULTS["max_pixels"], "beta": spec.kl_beta,
        "gradient_checkpointing": str(spec.gradient_checkpointing).lower(), "attn_implementation": spec.attention.value,
        "freeze_vision_modules": str(spec.vision.freeze_tower).lower(),
    }
    if spec.vision.min_pixels is not None:
        flags["min_pixels"] = spec.vision.min_pixels
    flags["fp16" if spec.precision.value == "fp16_mixed" else "bf16"] = "true"
    if spec.finetune.method.value == "lora":
        ft = spec.finetune
        flags.update(use_peft="true", lora_r=ft.lora_rank, lora_alpha=ft.lora_alpha, lora_dropout=ft.lora_dropout)
        if isinstance(ft.lora_targets, list):
            flags["lora_target_modules"] = ",".join(ft.lora_targets)
    if strategy != "ddp":
        flags["deepspeed"] = _deepspeed_name(strategy, dist)
    optim = _optim(spec, strategy)
    if optim is not None:
        flags["optim"] = optim
    return {f"--{k}": v for k, v in flags.items()}


def _optim(spec: Any, strategy: str) -> str | None:
    """`--optim` where transformers 4.49's default (adamw_torch: foreach) would not be what the spec
    plans. The JSON written has no `optimizer` section, so the Trainer's optimizer steps under ZeRO
    too: an unset field there (no step temporaries) is written as the fused kernel."""
    if spec.distribution.offload_optimizer:
        return None
    implementation = getattr(spec.optimizer_implementation, "value", None)
    if implementation == "for_loop":
        return "adamw_hf"  # transformers' own per-parameter AdamW (removed in 4.54; VLM-R1 pins 4.49)
    if implementation == "fused" or (implementation is None and strategy != "ddp"):
        return "adamw_torch_fused"
    return None


def render_files(spec: Any) -> dict[str, str]:
    flags = native_settings(spec)
    files = {}
    strategy = spec.distribution.strategy.value
    if "--deepspeed" in flags:
        files[flags["--deepspeed"]] = json.dumps(_deepspeed_json(strategy, spec.distribution), indent=2) + "\n"
    lines = [f"{k} {v}" for k, v in flags.items()]
    hw = spec.hardware
    script = ("#!/bin/bash\n" + N.header([f"VLM-R1 launch written by `oomless export --to vlmr1` for {spec.model}.",
                                           "Run from src/open-r1-multimodal; add --dataset_name/--image_root and --output_dir."])
              + 'cd "$(dirname "$0")"\n'
              + " \\\n    ".join([f"torchrun --nproc_per_node={hw.gpus_per_node} --nnodes={hw.num_nodes} src/open_r1/grpo_jsonl.py", *lines]) + "\n")
    return {MAIN_FILE: script, **files}


def _deepspeed_name(strategy: str, dist: Any) -> str:
    """`zero3.json`, with what it offloads in the name (`zero3_offload_optimizer.json`): a patch
    that changes an offload then names another file, and writes it beside the script (with one
    name for both, the user's `--deepspeed` was left as it was and the offload unsaid)."""
    offloads = ["optimizer"] * bool(dist.offload_optimizer) + ["param"] * bool(strategy == "zero3" and dist.offload_params)
    return "_".join([strategy, *(f"offload_{o}" for o in offloads)]) + ".json"


def _deepspeed_json(strategy: str, dist: Any) -> dict[str, Any]:
    zero: dict[str, Any] = {"stage": int(strategy[-1]), "overlap_comm": dist.overlap_comm, "reduce_bucket_size": dist.reduce_bucket_size}
    if dist.offload_optimizer:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if strategy == "zero3":
        zero.update(stage3_prefetch_bucket_size=dist.stage3_prefetch_bucket_size,
                    stage3_param_persistence_threshold=dist.stage3_param_persistence_threshold)
        if dist.offload_params:
            zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    return {"bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"}, "zero_optimization": zero,
            "gradient_accumulation_steps": "auto", "train_micro_batch_size_per_gpu": "auto", "train_batch_size": "auto"}
