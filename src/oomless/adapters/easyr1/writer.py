"""EasyR1: a run spec → its YAML (examples/config.yaml layout) and a launch script."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from .. import _native as N
from ...mappings import flatten
from .. import common as C
from .. import schedule as SCH
from ...planner.batches import rows_budget_per_gpu
from ..round_trip import prompt_bound_with_images
from .keys import DEFAULTS, ROL
from .. import optim_impl as OI
from .reader import STEP_IMPLEMENTATION


NATIVE_STYLE = "hydra"
"""A launch script's `key=value` overrides after `config=...` (a YAML: the nested keys)."""
NATIVE_DIALECTS = ("examples/config.yaml",)
MAIN_FILE = "easyr1_config.yaml"


def native_settings(spec: Any, dialect: str = NATIVE_DIALECTS[0]) -> dict[str, Any]:
    """Dotted EasyR1 config key → value: what `export_spec` writes, and what `fit --from easyr1
    --write` patches into the user's YAML or overrides (one mapping for both)."""
    return flatten(_spec_to_config(spec))


def export_spec(spec: Any, out_dir: Path, force: bool) -> list[Path]:
    """An EasyR1 config (examples/config.yaml layout) with the memory knobs set."""
    return [C.write_new_file(out_dir / name, text, force) for name, text in render_files(spec).items()]


def render_files(spec: Any) -> dict[str, str]:
    head = N.header([
        f"EasyR1 config written by `oomless export --to easyr1` for {spec.model}.",
        "Launch: python3 -m verl.trainer.main config=easyr1_config.yaml",
        "Batch sizes: the spec's round (steps_per_generation) and optimizer step (gradient accumulation) in prompts.",
        "Fill in data.train_files / data.val_files and worker.reward before training.",
        "worker.actor.dynamic_batching is a key of EasyR1 >= 0.3.2; remove it for 0.3.0 and 0.3.1 (false there);",
        "EasyR1 0.3.0 names ulysses_size ulysses_sequence_parallel_size.",
        *([f"oomless: vllm=={spec.rollout.vllm_version}"] if spec.rollout.vllm_version else []),
    ])
    return {MAIN_FILE: head + N.dump_yaml(_spec_to_config(spec))}


def _spec_to_config(spec: Any) -> dict[str, Any]:
    fw = "easyr1"
    strategy = C.require(spec, "distribution.strategy", ("fsdp", "zero2"), fw)
    C.require(spec, "rollout.engine", ("vllm_colocate",), fw)
    C.require(spec, "rollout.sleep_level", (1,), fw)
    C.require(spec, "rollout.engine_in_trainer_process", (True,), fw)
    C.require(spec, "attention", ("flash_attention_2",), fw)
    precision = C.require(spec, "precision", ("bf16_mixed", "bf16"), fw)
    C.require(spec, "optimizer", ("adamw",), fw)
    C.require(spec, "finetune.method", ("full", "lora"), fw)
    if spec.finetune.method.value == "lora":  # EasyR1 sends its adapters unmerged, layer by layer (the reader)
        C.require(spec, "rollout.lora_sync", ("adapter_layers",), fw)
    C.require(spec, "logits", ("full_bf16", "bf16_flash_ce"), fw)  # padding_free false / true (the reader)
    if spec.logits.value == "bf16_flash_ce":  # dp_actor.py `logits_rmpad.div_(temperature)`
        C.require(spec, "logits_temperature", ("in_place",), fw)
    if spec.finetune.method.value == "lora":
        C.require(spec, "finetune.lora_dropout", (0.0,), fw)
    C.require(spec, "rollout.samples_per_request", (None, spec.batch.num_generations), fw)  # the reader: rollout.n (None: n)
    sp = spec.distribution.sequence_parallel_size
    if sp > 1:  # the reader: Ulysses splits padding-free rows only
        C.require(spec, "batch.padding_free", (True,), fw)
    C.require(spec, "batch.padding_free", (spec.logits.value == "bf16_flash_ce",), fw)  # one key: padding_free (the reader)
    algorithm = C.require(spec, "algorithm", ("grpo", "ppo", "rloo"), fw)
    C.require(spec, "ray.enabled", (True,), fw)
    C.require(spec, "rollout.max_num_seqs", (None,), fw)
    C.require(spec, "placement.groups", (None,), fw)
    dist, ro, ft = spec.distribution, spec.rollout, spec.finetune
    if dist.offload_params != dist.offload_optimizer:
        C.cannot_express("distribution.offload_params", "EasyR1 offloads parameters and optimizer together (fsdp.enable_cpu_offload)")
    world, micro = spec.hardware.gpus_per_node * spec.hardware.num_nodes, spec.batch.micro_batch_size
    model: dict[str, Any] = {"model_path": spec.model, "enable_gradient_checkpointing": spec.gradient_checkpointing,
                             "freeze_vision_tower": spec.vision.freeze_tower}
    if ft.method.value == "lora":
        model["lora"] = {"rank": ft.lora_rank, "alpha": ft.lora_alpha,
                         "target_modules": ft.lora_targets if isinstance(ft.lora_targets, str) else ",".join(ft.lora_targets)}
    fsdp = {"enable_full_shard": strategy == "fsdp", "enable_cpu_offload": dist.offload_params,
            "enable_rank0_init": dist.rank0_init}
    if precision == "bf16":
        fsdp["torch_dtype"] = "bf16"
    rollout: dict[str, Any] = {"n": spec.batch.num_generations, "gpu_memory_utilization": ro.gpu_memory_utilization,
                               "tensor_parallel_size": ro.tensor_parallel_size, "enforce_eager": ro.enforce_eager,
                               "max_num_batched_tokens": ro.max_num_batched_tokens or DEFAULTS[f"{ROL}.max_num_batched_tokens"],
                               "limit_images": ro.limit_images_per_prompt or 0}
    if ro.max_model_len is not None:
        rollout["max_model_len"] = ro.max_model_len
    round_prompts, update_prompts, trainer = _round(spec, world // sp, micro)  # a Ulysses group shares its data
    config: dict[str, Any] = {
        "data": {"max_prompt_length": prompt_bound_with_images(spec), "max_response_length": spec.lengths.max_completion_tokens,
                 "rollout_batch_size": round_prompts, "max_pixels": spec.vision.max_pixels or DEFAULTS["data.max_pixels"],
                 "min_pixels": spec.vision.min_pixels or DEFAULTS["data.min_pixels"]},
        "algorithm": {"adv_estimator": {"ppo": "gae"}.get(algorithm, algorithm), "disable_kl": spec.kl_beta == 0,
                      "kl_coef": spec.kl_beta if spec.kl_beta > 0 else DEFAULTS["algorithm.kl_coef"]},
        "worker": {
            "actor": {"global_batch_size": update_prompts, "micro_batch_size_per_device_for_update": micro,
                      **({"ulysses_size": sp} if sp > 1 else {}),  # unset at 1: a padded file's own degree is kept
                      "padding_free": spec.logits.value == "bf16_flash_ce", "dynamic_batching": _dynamic_batching(spec),
                      "micro_batch_size_per_device_for_experience": spec.logprob_micro_batch_size,
                      "model": model, "optim": {"strategy": _optim_strategy(spec, precision)},
                      "fsdp": fsdp, "offload": {"offload_params": ro.offload_model, "offload_optimizer": ro.offload_optimizer}},
            "rollout": rollout,
            "ref": {"offload": {"offload_params": ro.offload_model}},
        },
        "trainer": {"n_gpus_per_node": spec.hardware.gpus_per_node, "nnodes": spec.hardware.num_nodes, **trainer},
    }
    if algorithm == "ppo":
        config["worker"]["critic"] = {"model": {"model_path": spec.critic.model or spec.model}}
    return config


def _dynamic_batching(spec: Any) -> bool:
    """`dynamic_batching` from the spec's token budgets: EasyR1 derives them (the reader's
    `_dynamic_batching`) as the update and experience micro-batch sizes × the padded row length,
    balanced on tokens, both passes at once; any other budget cannot be written."""
    b = spec.batch
    if b.max_tokens_per_gpu is None:
        if b.logprob_max_tokens_per_gpu is not None:
            C.cannot_express("batch.logprob_max_tokens_per_gpu", "EasyR1's dynamic_batching budgets the update and the "
                             "log-prob passes together; set batch.max_tokens_per_gpu too")
        return False
    C.require(spec, "batch.token_budget_balance", ("tokens",), "easyr1")
    padded, sp = prompt_bound_with_images(spec) + spec.lengths.max_completion_tokens, spec.distribution.sequence_parallel_size
    for field, budget, micro, key in (
            ("batch.max_tokens_per_gpu", b.max_tokens_per_gpu, b.micro_batch_size, "micro_batch_size_per_device_for_update"),
            ("batch.logprob_max_tokens_per_gpu", b.logprob_token_budget, spec.logprob_micro_batch_size,
             "micro_batch_size_per_device_for_experience")):
        wanted = rows_budget_per_gpu(micro, padded, sp)  # the group's budget, per GPU of a Ulysses group (the reader)
        if budget != wanted:
            per = f" / ulysses_size {sp}" if sp > 1 else ""
            C.cannot_express(field, f"EasyR1's budget is {key} × (max_prompt_length + max_response_length){per} = {micro} × "
                             f"{padded}{per} = {wanted:,} tokens; {budget:,} cannot be written")
    return True


def _round(spec: Any, data_parallel: int, micro: int) -> tuple[int, int, dict[str, Any]]:
    """data.rollout_batch_size / worker.actor.global_batch_size (prompts) and trainer.max_steps /
    save_freq (rounds) from the spec's round over the data-parallel ranks (adapters/schedule.py)."""
    rnd = SCH.native_round(spec, data_parallel)
    if rnd.problem:
        C.cannot_express("batch.steps_per_generation", rnd.problem)
    for field, why in rnd.schedule_problems:
        C.cannot_express(field, why)
    trainer: dict[str, Any] = {}
    if rnd.max_rounds is not None:
        trainer["max_steps"] = rnd.max_rounds
    if rnd.save_every_rounds is not None:
        trainer["save_freq"] = rnd.save_every_rounds
        trainer["save_model_only"] = spec.schedule.save_only_model
    return rnd.round_prompts, rnd.update_prompts, trainer


def _optim_strategy(spec: Any, precision: str) -> str:
    """`optim.strategy` for the spec's AdamW implementation (the reader's `STEP_IMPLEMENTATION`):
    the one that reads back to it, adamw_bf16 for bf16 weights where both do (offloaded steps).
    EasyR1 has no foreach AdamW: a spec planning one cannot be written."""
    dist = spec.distribution.model_dump(mode="json")
    wanted = OI.planned(getattr(spec.optimizer_implementation, "value", None), dist)
    fits = [name for name, how in STEP_IMPLEMENTATION.items() if OI.planned(how, dist) == wanted]
    preferred = "adamw_bf16" if precision == "bf16" else "adamw"
    if not fits:
        C.cannot_express("optimizer_implementation", f"{wanted or 'foreach'!r} cannot be written for EasyR1: its AdamW is "
                         "fused (optim.strategy adamw) or a loop over parameters (adamw_bf16); allowed: fused, for_loop")
        return preferred
    return preferred if preferred in fits else fits[0]
