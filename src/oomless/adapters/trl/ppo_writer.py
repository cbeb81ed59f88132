"""A PPO spec → TRL's PPO example launch: PPOConfig + ModelConfig flags of
`examples/scripts/ppo/ppo.py` (TRL 1.12, the newest release with PPOTrainer: `trainers.py`),
with the same accelerate and DeepSpeed files as the GRPO writer; and the keys a patch writes
into a PPO file, or an RLOO file of TRL <= 0.21 (the old RLOOConfig: rloo_k, num_mini_batches). Only keys PPOConfig,
ModelConfig and TrainingArguments have (`data/ppo_key_table.json`) are written; what PPOTrainer
cannot run (vLLM, gradient checkpointing, a value model other than the reward model, several
completions per prompt) is refused field by field (`common.cannot_express`)."""

from __future__ import annotations

from typing import Any

from ...spec.run import Precision, RolloutEngine, RunSpec
from .. import key_tables as KT
from ..common import cannot_express, transformers_directive, version_text
from . import trainers as TT

SCRIPT = "examples/scripts/ppo/ppo.py"
EXAMPLE_DATASET = ("trl-internal-testing/descriptiveness-sentiment-trl-style", "descriptiveness")
"""The dataset and split of TRL's PPO documentation command (docs/source/ppo_trainer.md)."""


def native_settings(spec: RunSpec, model_keys: dict[str, Any], optim: str | None,
                    release: tuple[int, ...] = TT.PPO_LAST) -> dict[str, Any]:
    """PPOConfig / ModelConfig key → value (``model_keys``: the GRPO writer's ModelConfig keys,
    which ppo.py reads the same way from 0.26; ``optim``: the `optim` value, None for AdamW), or
    the old RLOOConfig's for an RLOO spec of a TRL <= 0.21 file (``release``: the file's)."""
    rloo = spec.algorithm.value == "rloo"
    _refuse_unrunnable(spec, rloo)
    batch = spec.batch
    out = _model_keys(spec, model_keys, release, rloo)
    out.update({"sft_model_path": spec.model, "reward_model_path": spec.reward_model.model,
                "per_device_train_batch_size": batch.micro_batch_size,
                "gradient_accumulation_steps": batch.gradient_accumulation_steps,
                "local_rollout_forward_batch_size": spec.logprob_micro_batch_size,
                "response_length": spec.lengths.max_completion_tokens, "kl_coef": spec.kl_beta})
    if rloo:
        steps = spec.steps_per_generation
        if steps % batch.gradient_accumulation_steps:
            cannot_express("batch.steps_per_generation", f"{steps} cannot be written for TRL <= 0.21 RLOO: it reuses a "
                           "rollout for num_mini_batches × gradient_accumulation_steps micro-steps")
        out.update({"num_mini_batches": max(1, steps // batch.gradient_accumulation_steps),
                    "rloo_k": batch.num_generations})
    if spec.precision == Precision.fp16_mixed:
        out.update({"bf16": False, "fp16": True})
    else:
        out["bf16"] = True
    if optim is not None:
        out["optim"] = optim
    table, base = TT.key_table(TT.RLOO if rloo else TT.PPO), KT.transformers_table()
    assert all(table.exists_in(k, release) or k in base for k in out), out  # only keys the script parses
    return out


def _model_keys(spec: RunSpec, model_keys: dict[str, Any], release: tuple[int, ...], rloo: bool) -> dict[str, Any]:
    """ModelConfig's keys the example script passes on in ``release`` (`ppo.py`: none before 0.26,
    and rloo.py of TRL <= 0.21 builds no PEFT model)."""
    out = {k: v for k, v in model_keys.items() if k != "model_name_or_path"}
    if release < TT.PPO_EXAMPLES_PASS_MODEL_KWARGS:
        if spec.attention.value != "sdpa":
            cannot_express("attention", f"{spec.attention.value!r} cannot be written for TRL {version_text(release)}: its "
                           "example scripts load models with transformers' default attention; allowed: sdpa")
        for key in ("dtype", "attn_implementation", "load_in_4bit", "use_bnb_nested_quant"):
            out.pop(key, None)
    if rloo:
        if spec.finetune.method.value != "full":
            cannot_express("finetune.method", f"{spec.finetune.method.value!r} cannot be written for TRL <= 0.21 RLOO: "
                           "its rloo.py builds no PEFT model; allowed: full")
        out = {k: v for k, v in out.items() if k not in ("use_peft", "lora_r", "lora_alpha", "lora_dropout",
                                                          "lora_target_modules", "load_in_4bit", "use_bnb_nested_quant")}
    return out


def _refuse_unrunnable(spec: RunSpec, rloo: bool = False) -> None:
    release = "TRL <= 0.21 RLOOTrainer" if rloo else f"TRL {version_text(TT.PPO_LAST)} PPOTrainer"
    if spec.rollout.engine != RolloutEngine.hf:
        cannot_express("rollout.engine", f"{spec.rollout.engine.value!r} cannot be written for {release}: it generates "
                       "with transformers generate; allowed: hf")
    if spec.gradient_checkpointing:
        cannot_express("gradient_checkpointing", f"True cannot be written for {release}: it never enables it; allowed: False")
    if spec.logits.value != "full_bf16":
        cannot_express("logits", f"{spec.logits.value!r} cannot be written for {release}: its forward computes full "
                       "logits; allowed: full_bf16")
    if spec.batch.padding_free:
        cannot_express("batch.padding_free", f"True cannot be written for {release}: it pads every batch; allowed: False")
    if spec.liger_kernels:
        cannot_express("liger_kernels", f"True cannot be written for {release}: it never applies Liger's kernels (it "
                       "does not call Trainer.__init__); allowed: False")
    if rloo:
        if spec.reward_model.model is None:
            cannot_express("reward_model.model", f"None cannot be written for {release}: it scores with reward_model_path")
        return
    if not spec.critic.wrapped_with_actor:
        cannot_express("critic.wrapped_with_actor", f"False cannot be written for {release}: PolicyAndValueWrapper "
                       "holds policy and value model in one module; allowed: True")
    if spec.critic.lora:
        cannot_express("critic.lora", f"True cannot be written for {release}: the value model trains all its weights; "
                       "allowed: False")
    if spec.reward_model.model is None or (spec.critic.model or spec.model) != spec.reward_model.model:
        cannot_express("critic.model", f"{spec.critic.model!r} cannot be written for {release}'s ppo.py: the value model "
                       f"is loaded from reward_model_path ({spec.reward_model.model!r})")
    if spec.batch.num_generations != 1:
        cannot_express("batch.num_generations", f"{spec.batch.num_generations} cannot be written for {release}: one "
                       "completion per prompt; allowed: 1")
    if spec.batch.steps_per_generation not in (None, spec.batch.gradient_accumulation_steps):
        cannot_express("batch.steps_per_generation", f"{spec.batch.steps_per_generation} cannot be written for "
                       f"{release}: it generates per_device_train_batch_size × gradient_accumulation_steps per rank")


def launch_text(settings: dict[str, Any], spec: RunSpec, accelerate_name: str, head: str) -> str:
    """launch.sh: `accelerate launch --config_file ACCELERATE ppo.py --key value ...`."""
    values = {"model_name_or_path": spec.model, "dataset_name": EXAMPLE_DATASET[0],
              "dataset_train_split": EXAMPLE_DATASET[1], "output_dir": "output", "report_to": "none", **settings}
    words = []
    for key, value in values.items():
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, list):
            value = " ".join(str(v) for v in value)
        words.append(f"    --{key} {value}")
    lines = ["#!/usr/bin/env bash", *head.rstrip("\n").splitlines(), "set -euo pipefail", 'cd "$(dirname "$0")"', "",
             f"accelerate launch --config_file {accelerate_name} {SCRIPT} \\", " \\\n".join(words)]
    return "\n".join(lines) + "\n"


def directive(spec: RunSpec) -> str:
    return (f"# oomless: trl=={version_text(TT.PPO_LAST)} max_prompt_tokens={spec.lengths.max_prompt_tokens}"
            f"{transformers_directive(spec)}\n")
