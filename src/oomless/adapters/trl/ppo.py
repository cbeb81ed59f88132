"""TRL PPO (`examples/scripts/ppo/ppo.py`, `ppo_tldr.py`, or a script of the user's named so):
PPOConfig + ModelConfig + ScriptArguments → spec. TRL 0.14–1.12 (`trainers.py`).

What the run holds, read in trl 1.12.0 `trl/experimental/ppo/ppo_trainer.py` (the same in
0.14.0 `trl/trainer/ppo_trainer.py` unless said) and the example scripts:
- Four models. The policy is `AutoModelForCausalLM.from_pretrained(sft_model_path)`; the value
  model and the reward model are both `AutoModelForSequenceClassification.from_pretrained(
  reward_model_path, num_labels=1)` (the LM body and a hidden → 1 `score` head); the reference
  policy is a second copy of sft_model_path, or None with PEFT (the policy with its adapter
  disabled: `null_ref_context`). `model_name_or_path` is only the tokenizer's
  (examples/scripts/ppo/ppo.py, v0.14.0–v1.12.0). Spec: `model` = sft_model_path,
  `critic.model` = `reward_model.model` = reward_model_path, `algorithm: ppo`.
- Policy and value model are one module, `PolicyAndValueWrapper`, prepared by accelerate and
  trained by one optimizer; the value model is trained in full even when the policy has LoRA
  adapters. Spec: `critic.wrapped_with_actor` (ZeRO-3 generate gathers both). Under DeepSpeed the reference and reward models go through `prepare_deepspeed`
  (ZeRO-3 inference shards under stage 3, whole models on the GPU otherwise), else `.to(device)`.
- Generation with transformers `generate` (no vLLM): the rollout batch of a rank is
  per_device_train_batch_size × gradient_accumulation_steps prompts (`local_batch_size`),
  generated `local_rollout_forward_batch_size` (default 64) at a time (`batch_generation`) for
  `response_length` (default 53) new tokens, inside `unwrap_model_for_generation` (ZeRO-3: the
  wrapper's parameters gathered when `ds3_gather_for_generation`, the default). The old
  log-probs are generate's scores, not a second forward; the reference, value and reward
  forwards then take the same chunks. Spec: engine hf, batch.logprob_micro_batch_size.
- Training: `num_ppo_epochs` × `num_mini_batches` passes over the rollout, micro-batches of
  per_device_train_batch_size rows; `local_batch_size` must divide by num_mini_batches.
- `gradient_checkpointing` is never applied: PPOTrainer does not call Trainer.__init__ nor
  `gradient_checkpointing_enable` (1.12.0: only PolicyAndValueWrapper defines it), so the spec
  plans none whatever the key says.
- Prompts: ppo.py keeps every prompt; ppo_tldr.py drops prompts over 512 tokens
  (`trainers.PPO_PROMPT_FILTER`). Without a `max_prompt_tokens=` directive the bound is the
  model's context less response_length (noted).

The RLOOTrainer of TRL 0.14–0.21 (`examples/scripts/rloo/rloo.py`, `rloo_tldr.py`) is the same
on-policy design without a value model, read here too as `algorithm: rloo` (0.21.0
trl/trainer/rloo_trainer.py): policy and reference from sft_model_path (the example always loads
the reference and builds no PEFT model), the reward model from reward_model_path; the rollout
of a rank is per_device_train_batch_size × gradient_accumulation_steps × num_mini_batches
completions (`local_batch_size`), `rloo_k` per prompt (the dataloader yields local_batch_size /
rloo_k prompts, `queries.repeat(rloo_k, 1)`), generated and scored in
local_rollout_forward_batch_size chunks; an optimizer step per mini-batch of
per_device_train_batch_size × gradient_accumulation_steps.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...catalog.models import ModelArch
from ...catalog.resolve import load_model
from ... import safe_paths as SP
from ...errors import InputError
from ...memory import constants as C
from ...memory import params as P
from . import optim as TO
from ..common import version_text
from . import hardware as TH
from . import launch as TL
from . import trainers as TT
from .finetune import finetune_section

PPO_NOT_READ = {
    "use_liger_kernel": "PPOTrainer never applies Liger kernels (it does not call Trainer.__init__)",
    "liger_kernel_config": "PPOTrainer never applies Liger kernels (it does not call Trainer.__init__)",
    "legacy.use_liger_loss": "no Liger loss in PPOTrainer or the RLOOTrainer of TRL <= 0.21",
    "padding_free": "not a PPOConfig key: PPOTrainer pads every batch",
}


def ppo_spec(keys: Any, launch: TL.Launch, hardware: Any, prompt_directive: int | None,
             read: Callable[[str], str], notes: list[str], base: Path) -> dict[str, Any]:
    """The spec of a PPO launch (or an RLOO one of TRL <= 0.21: ``keys.trainer`` rloo); ``keys``
    is the reader's `Keys` under the trainer's key table, model paths relative to ``base`` (the
    launch file's folder) where they exist there."""
    from . import reader as R

    rloo = keys.trainer == TT.RLOO
    trainer = "RLOOTrainer" if rloo else "PPOTrainer"
    tokenizer = keys.get("model_name_or_path")  # the tokenizer's only
    policy_path, arch = _model(keys, "sft_model_path", tokenizer, base)
    reward_path, reward_arch = _model(keys, "reward_model_path", tokenizer, base)
    _example_model_kwargs(keys, notes)
    if rloo:
        for name in ("use_peft", "load_in_4bit", "lora_r", "lora_alpha", "lora_dropout", "lora_target_modules"):
            keys.ignore(name, f"TRL {version_text(keys.version)}'s examples/scripts/rloo/rloo.py builds no PEFT model")
            keys.values.pop(name, None)
    spec: dict[str, Any] = {"model": policy_path, "algorithm": "rloo" if rloo else "ppo"}
    finetune = finetune_section(keys, arch)
    spec["finetune"] = finetune
    distribution, half, ds_optimizer, keeps_master = R._distribution(keys, launch, read)
    spec["distribution"] = distribution
    spec["precision"] = R._precision(keys, half, keeps_master, finetune["method"], notes, launch)
    spec.update(TO.optimizer_fields(keys, ds_optimizer, distribution, notes))
    keys.ignore("gradient_checkpointing", f"{trainer} never enables it (no gradient_checkpointing_enable call; "
                "trl 1.12.0 experimental/ppo/ppo_trainer.py, 0.21.0 trainer/rloo_trainer.py): planned without")
    spec["gradient_checkpointing"] = False
    attention = R._attention(keys.get("attn_implementation"), notes)
    if attention:
        spec["attention"] = attention
    for name, why in PPO_NOT_READ.items():
        keys.ignore(name, why)
    for name in [k for k in keys.values if k == "use_vllm" or k.startswith("vllm_")]:
        keys.ignore(name, f"not a key of TRL {version_text(keys.version)}'s {trainer}: it generates with transformers generate")
        del keys.values[name]  # nor does it take a GPU for an engine (`hardware.processes_from_hardware`)
    spec["logits"] = "full_bf16"  # forward(): full logits, selective_log_softmax on the response slice
    spec["kl_beta"] = keys.float("kl_coef", float(keys.default("kl_coef", 0.05)))
    if not rloo:  # one module with the policy: ZeRO-3 generate gathers both (`unwrap_model_for_generation`)
        spec["critic"] = {"model": reward_path, "wrapped_with_actor": True}
    spec["reward_model"] = {"model": reward_path}
    if not launch.processes_stated and hardware.gpus_per_node is not None:
        launch = TH.processes_from_hardware(keys, launch, hardware.gpus_per_node, notes)
    processes, nodes = launch.processes_per_node, launch.num_machines
    spec["batch"] = _rloo_batch(keys) if rloo else _batch(keys)
    spec["rollout"] = {"engine": "hf", "keeps_generation_scores": True}  # `logitss`, kept until the next rollout
    if finetune["method"] == "full":  # LoRA: the reference forward is the policy's, adapters off
        spec["rollout"]["recompute_old_logprobs"] = False
    spec["lengths"] = _lengths(keys, arch, launch.script, prompt_directive, notes)
    spec["hardware"] = TH.hardware_section(hardware, processes, nodes, launch, notes)
    if spec["kl_beta"] == 0 and finetune["method"] == "full":
        notes.append(f"kl_coef 0: {trainer} still loads the reference policy, which the plan leaves out (kl_beta 0)")
    notes.extend(unplanned_notes(keys, spec, arch, reward_arch))
    return spec


def unplanned_notes(keys: Any, spec: dict[str, Any], arch: ModelArch, reward_arch: ModelArch) -> list[str]:
    """What PPOTrainer holds that the spec cannot say, sized, so the reader knows how far the
    plan may be low (trl 1.12.0 experimental/ppo/ppo_trainer.py): ppo.py loads every model in
    ModelConfig's dtype (float32 by default). (generate's kept fp32 scores are planned:
    `rollout.keeps_generation_scores`.)"""
    out = []
    rloo = spec["algorithm"] == "rloo"
    dtype = str(keys.values.get("dtype", "float32")) if keys.version >= TT.PPO_EXAMPLES_PASS_MODEL_KWARGS else "float32"
    if dtype == "float32":
        reward = P.num_parameters(reward_arch) - P.num_lm_head_parameters(reward_arch)  # body + 1-wide score head
        frozen = reward + (P.num_parameters(arch) if spec["finetune"]["method"] == "full" else 0)
        extra = frozen * (C.FP32_BYTES - C.BF16_BYTES)
        out.append(f"the reference and reward models are loaded in float32 (dtype), planned as bf16: {extra / 2**30:.2f} GiB "
                   "more per GPU (whole models; ZeRO-3 shards them)")
    if rloo:
        return out
    if spec["distribution"]["strategy"] == "fsdp":
        out.append("FSDP: PPOTrainer moves the reference and reward models whole onto every GPU (`.to(device)`; "
                   "prepare_deepspeed only under DeepSpeed), planned sharded")
    if spec["finetune"]["method"] == "qlora":
        out.append("load_in_4bit: ppo.py loads the value and reward models 4-bit as well (one model_kwargs for all "
                   "four), planned in bf16")
    return out


def _path(keys: Any, name: str) -> str:
    value = keys.get(name, keys.default(name))
    if value is None:
        raise InputError(name, "required: the model id or path")
    if not isinstance(value, str):
        raise InputError(name, f"{value!r}: one model id or path")
    if name not in keys.values:
        keys.ignored.append(f"{name}: unset, PPOConfig's default {value!r} (TRL {version_text(keys.version)})")
    return value


def _model(keys: Any, name: str, tokenizer: Any, base: Path) -> tuple[str, ModelArch]:
    """(the model the spec names, its architecture) for the path key ``name``. A checkpoint that
    cannot be found here (offline, not cached, not in the catalog) but whose name holds
    model_name_or_path's (TRL's docs: `cleanrl/EleutherAI_pythia-1b-deduped__sft__tldr` beside
    `--model_name_or_path EleutherAI/pythia-1b-deduped`) is planned as that model, warned; any
    other is refused, naming the key."""
    path = _path(keys, name)
    try:
        return path, _load(path, name, base)
    except InputError as err:
        base_name = str(tokenizer).rstrip("/").rpartition("/")[2] if isinstance(tokenizer, str) else ""
        if not base_name or base_name.lower() not in path.lower() or path == tokenizer:
            raise
        arch = _load(str(tokenizer), "model_name_or_path", base)
        keys.ignored.append(f"{name}: {path!r} cannot be read here ({err.message.split(';')[0]}); planned with the "
                            f"architecture of model_name_or_path {tokenizer!r}, whose name it holds: pass a local "
                            "folder or config.json to plan the checkpoint itself")
        return str(tokenizer), arch


def _load(model: str, name: str, base: Path) -> ModelArch:
    """The model's architecture, as the reader's `_arch` finds model_name_or_path."""
    local = base / model
    try:
        return load_model(str(local) if not Path(model).is_absolute() and SP.exists(local) else model)
    except InputError as err:
        raise InputError(name, err.message) from None


def _example_model_kwargs(keys: Any, notes: list[str]) -> None:
    """Before 0.26 the example scripts loaded every model with from_pretrained(path) alone
    (`trainers.PPO_EXAMPLES_PASS_MODEL_KWARGS`): fp32 weights, transformers' default attention,
    no 4-bit base."""
    if keys.version >= TT.PPO_EXAMPLES_PASS_MODEL_KWARGS:
        return
    release = version_text(keys.version)
    for name in ("dtype", "attn_implementation", "load_in_4bit", "load_in_8bit"):
        keys.ignore(name, f"TRL {release}'s PPO example scripts do not pass it to from_pretrained (from 0.26 they do)")
        keys.values.pop(name, None)


def _batch(keys: Any) -> dict[str, Any]:
    """micro_batch_size = per_device_train_batch_size (a training micro-batch), the rollout
    batch per rank = × gradient_accumulation_steps (PPOTrainer `local_batch_size`, which
    `num_mini_batches` must divide: `exact_div`), one completion per prompt, and the
    no-grad forwards in chunks of local_rollout_forward_batch_size."""
    micro = keys.int("per_device_train_batch_size", keys.default("per_device_train_batch_size", 8))
    accumulation = keys.int("gradient_accumulation_steps", keys.default("gradient_accumulation_steps", 1))
    local = micro * accumulation
    mini = keys.int("num_mini_batches", keys.default("num_mini_batches", 1))
    if local % mini:
        raise InputError("num_mini_batches", f"{mini} does not divide the rollout batch per process, "
                         f"per_device_train_batch_size × gradient_accumulation_steps = {local} (TRL exact_div)")
    chunk = keys.int("local_rollout_forward_batch_size", keys.default("local_rollout_forward_batch_size", 64))
    out: dict[str, Any] = {"micro_batch_size": micro, "gradient_accumulation_steps": accumulation, "num_generations": 1}
    if min(chunk, local) != micro:
        out["logprob_micro_batch_size"] = min(chunk, local)
    return out


def _rloo_batch(keys: Any) -> dict[str, Any]:
    """The RLOOTrainer of TRL <= 0.21: local_batch_size = per_device_train_batch_size ×
    gradient_accumulation_steps × num_mini_batches completions per rank, rloo_k per prompt (it
    must divide them: `exact_div`), reused for num_mini_batches optimizer steps."""
    micro = keys.int("per_device_train_batch_size", keys.default("per_device_train_batch_size", 8))
    accumulation = keys.int("gradient_accumulation_steps", keys.default("gradient_accumulation_steps", 1))
    mini = keys.int("num_mini_batches", keys.default("num_mini_batches", 1))
    group = keys.int("rloo_k", keys.default("rloo_k", 2))
    local = micro * accumulation * mini
    if group < 2:
        raise InputError("rloo_k", f"{group}: the leave-one-out baseline needs at least 2 completions per prompt")
    if local % group:
        raise InputError("rloo_k", f"{group} does not divide the rollout batch per process, per_device_train_batch_size × "
                         f"gradient_accumulation_steps × num_mini_batches = {local} (TRL exact_div)")
    chunk = keys.int("local_rollout_forward_batch_size", keys.default("local_rollout_forward_batch_size", 64))
    out: dict[str, Any] = {"micro_batch_size": micro, "gradient_accumulation_steps": accumulation, "num_generations": group}
    if mini > 1:
        out["steps_per_generation"] = accumulation * mini
    if min(chunk, local) != micro:
        out["logprob_micro_batch_size"] = min(chunk, local)
    return out


def _lengths(keys: Any, arch: ModelArch, script: str, prompt_directive: int | None, notes: list[str]) -> dict[str, int]:
    completion = keys.int("response_length", keys.default("response_length", 53))
    if prompt_directive is not None:
        return {"max_prompt_tokens": prompt_directive, "max_completion_tokens": completion}
    kept = TT.PPO_PROMPT_FILTER.get(TT.example_script(script))
    if kept is not None:
        notes.append(f"{TT.example_script(script)} keeps prompts of at most {kept} tokens")
        return {"max_prompt_tokens": kept, "max_completion_tokens": completion}
    prompt = arch.max_position_embeddings - completion
    if prompt < 1:
        raise InputError("response_length", f"{completion} leaves no prompt within {arch.max_position_embeddings} tokens")
    notes.append(f"no `max_prompt_tokens=` directive: prompts up to {arch.max_position_embeddings} - {completion} tokens "
                 "(TRL's PPO example does not truncate prompts)")
    return {"max_prompt_tokens": prompt, "max_completion_tokens": completion}
