"""EasyR1 (hiyouga/EasyR1): its YAML (`examples/config.yaml` layout) ↔ a run spec.

Input: the YAML, or a launch script `python3 -m verl.trainer.main config=FILE key=value ...`
(OmegaConf `from_cli` overrides over the file, as `verl/trainer/main.py` merges them).

Source: EasyR1 main (0.3.3.dev0), dataclass defaults of
`verl/trainer/config.py` (DataConfig, AlgorithmConfig, TrainerConfig),
`verl/workers/actor/config.py` (ActorConfig, ModelConfig, LoraConfig, OptimConfig, FSDPConfig,
OffloadConfig, RefConfig) and `verl/workers/rollout/config.py` (RolloutConfig); behaviour from
its README and `workers/fsdp_workers.py`: vLLM runs inside the FSDP worker (SPMD) and always
sleeps at level 1 after a rollout; a reference model exists unless `algorithm.disable_kl`.
Assumes: flash-attention (EasyR1 loads models with flash_attention_2, padding-free);
`fsdp.enable_full_shard: false` is FSDP SHARD_GRAD_OP, planned as ZeRO-2; the reference's own
offload settings are not modelled apart from the actor's.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..errors import InputError
from . import HardwareFlags, ImportResult
from . import _native as N
from . import common as C
from ..frontends import hydra as H

SUPPORTED_VERSIONS = "EasyR1 0.3.0 to 0.3.3 (dataclass defaults of main, 0.3.3.dev0; early-2025 configs read with them)"
LOWEST, HIGHEST = "0.3.0", "0.3.3"

ACT, ROL, REF = "worker.actor", "worker.rollout", "worker.ref"
DEFAULTS: dict[str, Any] = {
    "data.max_prompt_length": 512, "data.max_response_length": 512, "data.rollout_batch_size": 512,
    "data.max_pixels": 4194304, "data.min_pixels": 262144,
    "algorithm.adv_estimator": "grpo", "algorithm.disable_kl": False, "algorithm.use_kl_loss": False,
    "algorithm.kl_coef": 1e-3,
    "trainer.nnodes": 1, "trainer.n_gpus_per_node": 8,
    f"{ACT}.global_batch_size": 256, f"{ACT}.micro_batch_size_per_device_for_update": 4,
    f"{ACT}.micro_batch_size_per_device_for_experience": 16, f"{ACT}.padding_free": True,
    f"{ACT}.dynamic_batching": True, f"{ACT}.ulysses_size": 1, f"{ACT}.ulysses_sequence_parallel_size": 1,
    f"{ACT}.ppo_epochs": 1, f"{ACT}.model.model_path": None, f"{ACT}.model.enable_gradient_checkpointing": True,
    f"{ACT}.model.freeze_vision_tower": False, f"{ACT}.model.lora.rank": 0, f"{ACT}.model.lora.alpha": 16,
    f"{ACT}.model.lora.target_modules": "all-linear", f"{ACT}.optim.strategy": "adamw",
    f"{ACT}.fsdp.enable_full_shard": True, f"{ACT}.fsdp.enable_cpu_offload": False,
    f"{ACT}.fsdp.enable_rank0_init": True, f"{ACT}.fsdp.torch_dtype": None,
    f"{ACT}.offload.offload_params": False, f"{ACT}.offload.offload_optimizer": False,
    f"{ROL}.n": 1, f"{ROL}.gpu_memory_utilization": 0.6, f"{ROL}.tensor_parallel_size": 2,
    f"{ROL}.max_num_batched_tokens": 8192, f"{ROL}.max_model_len": None, f"{ROL}.enforce_eager": False,
    f"{ROL}.limit_images": 0, f"{ROL}.enable_chunked_prefill": False,
    f"{REF}.fsdp.enable_cpu_offload": False, f"{REF}.offload.offload_params": False,
    "worker.critic.model.model_path": None,
}
NO_MEMORY_EFFECT = (
    "data.train_files", "data.val_files", "data.prompt_key", "data.answer_key", "data.image_key", "data.val_batch_size",
    "data.shuffle", "data.seed", "data.format_prompt", "data.filter_overlong_prompts", "data.rollout_batch_size",
    "data.format_prompt_path",
    "algorithm.use_kl_loss", "algorithm.kl_penalty", "algorithm.kl_type", "algorithm.gamma", "algorithm.lam",
    f"{ACT}.global_batch_size", f"{ACT}.max_grad_norm", f"{ACT}.padding_free", f"{ACT}.dynamic_batching",
    f"{ACT}.ppo_epochs", f"{ACT}.model.trust_remote_code", f"{ACT}.optim.lr", f"{ACT}.optim.weight_decay",
    f"{ACT}.optim.lr_warmup_ratio", f"{ROL}.temperature", f"{ROL}.top_p", f"{ROL}.enable_chunked_prefill",
    "worker.reward.", "trainer.total_episodes", "trainer.max_steps", "trainer.project_name",
    "trainer.experiment_name", "trainer.logger", "trainer.val_", "trainer.save_", "trainer.load_",
    "trainer.critic_warmup", f"{ROL}.val_override_config", f"{ROL}.top_k", f"{ROL}.seed", f"{ROL}.ignore_eos",
    f"{ROL}.disable_", f"{ROL}.dtype", f"{ROL}.name",
)
ADVANTAGE_TO_ALGORITHM = {"gae": "ppo", "rloo": "rloo"}


def import_config(path: Path, hardware: HardwareFlags) -> ImportResult:
    text = C.read_text(path)
    C.check_version(text, "easyr1", LOWEST, HIGHEST, str(path))
    out = N.Collected()
    composed = _compose(path, text, out)
    out.notes.extend(composed.notes)
    _to_spec(composed.values, hardware, out)
    _report_unused(composed.user, out)
    return ImportResult(out.spec, tuple(out.ignored), tuple(out.notes))


MAIN = ("verl.trainer.main",)


def _compose(path: Path, text: str, out: N.Collected) -> H.Composed:
    """The YAML, or the script's `verl.trainer.main config=FILE key=value ...` (OmegaConf
    `from_cli` over the file over the dataclass defaults), interpolations resolved."""
    if path.suffix in (".yaml", ".yml") or not re.search(r"verl\.trainer\.main\b", text):
        return H.compose(DEFAULTS, text, str(path), folder=path.parent)
    command, notes = C.pick_command(C.read_script(text, str(path)), lambda c: C.command_with([c], MAIN) is not None, str(path),
                                    "python3 -m verl.trainer.main config=FILE key=value ...")
    out.notes.extend(notes)
    where = f"{path}:{command.line}"
    tokens = [a for a in C.command_with([command], MAIN)[1] if not a.startswith("$")]
    config_file, overrides = None, []
    for token in tokens:
        if token.startswith("config="):
            name = token.split("=", 1)[1]
            config_file = next((p for p in (path.parent / name, Path.cwd() / name) if p.is_file()), None)
            if config_file is None:
                raise InputError(where, f"config={name} not found next to {path.name} or in {Path.cwd()}")
        else:
            overrides.append(H.Override(token, where))
    file_text = C.read_text(config_file) if config_file else None
    composed = H.compose(DEFAULTS, file_text, str(config_file or where), overrides,
                         folder=config_file.parent if config_file else None)
    return composed


def _to_spec(v: dict[str, Any], flags: HardwareFlags, out: N.Collected) -> None:
    out.set("model", N.model_ref(v[f"{ACT}.model.model_path"], f"{ACT}.model.model_path", out))
    out.set("hardware", N.hardware(flags, "easyr1", C.as_int("trainer.n_gpus_per_node", v["trainer.n_gpus_per_node"], 1),
                                   C.as_int("trainer.nnodes", v["trainer.nnodes"], 1), out))
    full_shard = C.as_bool(f"{ACT}.fsdp.enable_full_shard", v[f"{ACT}.fsdp.enable_full_shard"])
    cpu_offload = C.as_bool(f"{ACT}.fsdp.enable_cpu_offload", v[f"{ACT}.fsdp.enable_cpu_offload"])
    if cpu_offload and not full_shard:
        raise InputError(f"{ACT}.fsdp.enable_cpu_offload", "true needs fsdp.enable_full_shard true to be planned")
    dist: dict[str, Any] = {"strategy": "fsdp" if full_shard else "zero2",
                            "rank0_init": C.as_bool(f"{ACT}.fsdp.enable_rank0_init", v[f"{ACT}.fsdp.enable_rank0_init"])}
    if not full_shard:
        out.notes.append("fsdp.enable_full_shard false (FSDP SHARD_GRAD_OP) is planned as ZeRO-2")
    if cpu_offload:
        dist.update(offload_params=True, offload_optimizer=True)
    out.set("distribution", dist)
    out.set("precision", "bf16" if str(v[f"{ACT}.fsdp.torch_dtype"]) in ("bf16", "bfloat16") else "bf16_mixed")
    if v[f"{ACT}.optim.strategy"] not in ("adamw", "adamw_bf16"):
        raise InputError(f"{ACT}.optim.strategy", f"{v[f'{ACT}.optim.strategy']!r} is not allowed; allowed: adamw, adamw_bf16")
    out.set("attention", "flash_attention_2")
    out.set("gradient_checkpointing", C.as_bool(f"{ACT}.model.enable_gradient_checkpointing", v[f"{ACT}.model.enable_gradient_checkpointing"]))
    _finetune(v, out)
    _batch_and_lengths(v, out)
    _rollout(v, out)
    _algorithm(v, out)
    out.set("ray.enabled", True)


def _finetune(v: dict[str, Any], out: N.Collected) -> None:
    rank = C.as_int(f"{ACT}.model.lora.rank", v[f"{ACT}.model.lora.rank"], 0)
    if rank == 0:
        out.set("finetune.method", "full")
        return
    targets = v[f"{ACT}.model.lora.target_modules"]
    if isinstance(targets, str) and targets != "all-linear":
        targets = [t.strip() for t in targets.split(",") if t.strip()]
    out.set("finetune", {"method": "lora", "lora_rank": rank, "lora_targets": targets,
                         "lora_alpha": C.as_float(f"{ACT}.model.lora.alpha", v[f"{ACT}.model.lora.alpha"], 0)})


def _batch_and_lengths(v: dict[str, Any], out: N.Collected) -> None:
    out.set("batch", {
        "micro_batch_size": C.as_int(f"{ACT}.micro_batch_size_per_device_for_update", v[f"{ACT}.micro_batch_size_per_device_for_update"], 1),
        "logprob_micro_batch_size": C.as_int(f"{ACT}.micro_batch_size_per_device_for_experience", v[f"{ACT}.micro_batch_size_per_device_for_experience"], 1),
        "num_generations": C.as_int(f"{ROL}.n", v[f"{ROL}.n"], 1),
    })
    out.set("lengths", {"max_prompt_tokens": C.as_int("data.max_prompt_length", v["data.max_prompt_length"], 1),
                        "max_completion_tokens": C.as_int("data.max_response_length", v["data.max_response_length"], 1)})
    out.set("vision", {"max_pixels": C.as_int("data.max_pixels", v["data.max_pixels"], 1),
                       "min_pixels": C.as_int("data.min_pixels", v["data.min_pixels"], 1),
                       "freeze_tower": C.as_bool(f"{ACT}.model.freeze_vision_tower", v[f"{ACT}.model.freeze_vision_tower"])})


def _rollout(v: dict[str, Any], out: N.Collected) -> None:
    ro: dict[str, Any] = {
        "engine": "vllm_colocate", "sleep_level": 1,
        "gpu_memory_utilization": C.as_float(f"{ROL}.gpu_memory_utilization", v[f"{ROL}.gpu_memory_utilization"], 0.0, 1.0),
        "tensor_parallel_size": C.as_int(f"{ROL}.tensor_parallel_size", v[f"{ROL}.tensor_parallel_size"], 1),
        "max_num_batched_tokens": C.as_int(f"{ROL}.max_num_batched_tokens", v[f"{ROL}.max_num_batched_tokens"], 1),
        "offload_model": C.as_bool(f"{ACT}.offload.offload_params", v[f"{ACT}.offload.offload_params"]),
        "offload_optimizer": C.as_bool(f"{ACT}.offload.offload_optimizer", v[f"{ACT}.offload.offload_optimizer"]),
    }
    if C.as_bool(f"{ROL}.enforce_eager", v[f"{ROL}.enforce_eager"]):
        ro["enforce_eager"] = True
    if v[f"{ROL}.max_model_len"] is not None:
        ro["max_model_len"] = C.as_int(f"{ROL}.max_model_len", v[f"{ROL}.max_model_len"], 1)
    images = C.as_int(f"{ROL}.limit_images", v[f"{ROL}.limit_images"], 0)
    if images > 0:
        ro["limit_images_per_prompt"] = images
    out.set("rollout", ro)


def _algorithm(v: dict[str, Any], out: N.Collected) -> None:
    algorithm = ADVANTAGE_TO_ALGORITHM.get(str(v["algorithm.adv_estimator"]), "grpo")
    out.set("algorithm", algorithm)
    disabled = C.as_bool("algorithm.disable_kl", v["algorithm.disable_kl"])
    out.set("kl_beta", 0.0 if disabled else C.as_float("algorithm.kl_coef", v["algorithm.kl_coef"], 0.0))
    critic = v["worker.critic.model.model_path"]
    if algorithm == "ppo" and critic not in (None, v[f"{ACT}.model.model_path"]):
        out.set("critic.model", N.model_ref(critic, "worker.critic.model.model_path", out))


def _report_unused(user: dict[str, Any], out: N.Collected) -> None:
    actor_offload = user.get(f"{ACT}.offload.offload_params", DEFAULTS[f"{ACT}.offload.offload_params"])
    for key, value in sorted(user.items()):
        if key.startswith(REF):
            if not (key == f"{REF}.offload.offload_params" and value == actor_offload):
                out.ignore(key, value, "the reference model is planned with the actor's offload settings")
        elif key in DEFAULTS and not key.startswith(NO_MEMORY_EFFECT):
            _report_special(key, value, user, out)
        elif key.startswith(NO_MEMORY_EFFECT):
            out.ignore(key, value, "no effect on the planned memory")
        else:
            out.ignore(key, value, "not understood (not an EasyR1 memory key)")


def _report_special(key: str, value: Any, user: dict[str, Any], out: N.Collected) -> None:
    """Mapped keys whose value the spec cannot carry."""
    if key == f"{ACT}.optim.strategy" and value == "adamw_bf16" and user.get(f"{ACT}.fsdp.torch_dtype") not in ("bf16", "bfloat16"):
        out.ignore(key, value, "bf16 optimizer states over fp32 parameters are planned as adamw")
    elif key in (f"{ACT}.ulysses_size", f"{ACT}.ulysses_sequence_parallel_size") and value != 1:
        out.ignore(key, value, "sequence parallelism is not modelled (activations planned unsplit)")


def export_spec(spec: Any, out_dir: Path, force: bool) -> list[Path]:
    """An EasyR1 config (examples/config.yaml layout) with the memory knobs set."""
    head = N.header([
        f"EasyR1 config written by `oomless export --to easyr1` for {spec.model}.",
        "Launch: python3 -m verl.trainer.main config=easyr1_config.yaml",
        "Batch sizes give one optimizer step per rollout; gradient accumulation has no effect on planned memory.",
        "Fill in data.train_files / data.val_files and worker.reward before training.",
    ])
    return [C.write_new_file(out_dir / "easyr1_config.yaml", head + N.dump_yaml(_spec_to_config(spec)), force)]


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
    algorithm = C.require(spec, "algorithm", ("grpo", "ppo", "rloo"), fw)
    C.require(spec, "ray.enabled", (True,), fw)
    C.require(spec, "rollout.max_num_seqs", (None,), fw)
    C.require(spec, "placement.groups", (None,), fw)
    dist, ro, ft = spec.distribution, spec.rollout, spec.finetune
    if dist.offload_params != dist.offload_optimizer:
        raise InputError("distribution.offload_params", "EasyR1 offloads parameters and optimizer together (fsdp.enable_cpu_offload)")
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
    config: dict[str, Any] = {
        "data": {"max_prompt_length": spec.lengths.max_prompt_tokens, "max_response_length": spec.lengths.max_completion_tokens,
                 "rollout_batch_size": world * micro, "max_pixels": spec.vision.max_pixels or DEFAULTS["data.max_pixels"],
                 "min_pixels": spec.vision.min_pixels or DEFAULTS["data.min_pixels"]},
        "algorithm": {"adv_estimator": {"ppo": "gae"}.get(algorithm, algorithm), "disable_kl": spec.kl_beta == 0,
                      "kl_coef": spec.kl_beta if spec.kl_beta > 0 else DEFAULTS["algorithm.kl_coef"]},
        "worker": {
            "actor": {"global_batch_size": world * micro, "micro_batch_size_per_device_for_update": micro,
                      "micro_batch_size_per_device_for_experience": spec.logprob_micro_batch_size,
                      "model": model, "optim": {"strategy": "adamw_bf16" if precision == "bf16" else "adamw"},
                      "fsdp": fsdp, "offload": {"offload_params": ro.offload_model, "offload_optimizer": ro.offload_optimizer}},
            "rollout": rollout,
            "ref": {"offload": {"offload_params": ro.offload_model}},
        },
        "trainer": {"n_gpus_per_node": spec.hardware.gpus_per_node, "nnodes": spec.hardware.num_nodes},
    }
    if algorithm == "ppo":
        config["worker"]["critic"] = {"model": {"model_path": spec.critic.model or spec.model}}
    return config
