"""A spec → TRL files: `grpo_config.yaml` (GRPOConfig + ModelConfig keys, `trl grpo --config`),
`accelerate_config.yaml`, `ds_config.json` (DeepSpeed runs) and `launch.sh` (the vLLM server, if
any, then `trl grpo`). The files are read back with the trl importer and must give the spec.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from ...catalog.resolve import load_model
from ...errors import InputError
from ...spec.run import Algorithm, FinetuneMethod, Precision, RolloutEngine, RunSpec, Strategy
from .. import key_tables as KT
from ..common import cannot_express, fallback_spec, require_merged_lora, transformers_directive, version_text
from ..round_trip import first_difference, image_tokens, same_spec_dict, unstated_releases, value_at
from ..deepspeed_json import deepspeed_config_for
from .reader import LATEST
from .launch import COLOCATE_MAX_NUM_BATCHED_TOKENS
from . import ppo_writer as PW
from . import optim as TO
from . import trainers as TT
from .liger import liger_settings
from .versions import CHUNKED_HEAD_FROM

CONFIG_NAME = "grpo_config.yaml"
ACCELERATE_NAME = "accelerate_config.yaml"
DS_CONFIG_NAME = "ds_config.json"
LAUNCH_NAME = "launch.sh"
VLLM_BEFORE_GRAPHS_IN_BUDGET = (0, 8, 5)
OPTIM = {"adamw": None, "adamw_8bit": "adamw_bnb_8bit", "adafactor": "adafactor", "sgd": "sgd"}
EXAMPLE_DATASET = "trl-lib/DeepMath-103K"
"""The dataset of TRL's GRPO documentation examples."""


def export_files(spec: RunSpec) -> dict[str, str]:
    from .. import HardwareFlags
    from .reader import import_path

    arch = load_model(spec.model)
    files = render(spec)
    imported, _, _ = import_path(Path(LAUNCH_NAME), HardwareFlags(gpu=spec.hardware.gpu or "A100-80GB"), files)
    hardware = spec.hardware.model_dump(exclude_none=True)
    hardware.update({k: imported["hardware"][k] for k in ("gpus_per_node", "num_nodes")})
    wanted, got = same_spec_dict(spec, arch), same_spec_dict({**imported, "hardware": hardware}, arch)
    unstated_releases(wanted, got)
    difference = first_difference(wanted, got)
    if difference is not None:
        raise InputError(difference, f"{value_at(wanted, difference)!r} cannot be exported to TRL "
                         f"{version_text(LATEST)}: its files give {value_at(got, difference)!r}")
    return files


def _directive(spec: RunSpec) -> str:
    if spec.algorithm == Algorithm.ppo:
        return PW.directive(spec)
    # the spec's vLLM release where it names one (the reader reads it back as rollout.vllm_version);
    # else only a release before graphs-in-budget needs naming (the reader's default captures them inside)
    stated = spec.rollout.vllm_version or (None if spec.rollout.cuda_graphs_in_budget else
                                           version_text(VLLM_BEFORE_GRAPHS_IN_BUDGET))
    return (f"# oomless: trl=={version_text(LATEST)} " + (f"vllm=={stated} " if stated else "") +
            transformers_directive(spec).lstrip() + (" " if spec.transformers_version else "") +
            f"max_prompt_tokens={spec.lengths.max_prompt_tokens}\n")


def special_file(path: Path, text: str) -> Any:
    """open-r1's sbatch job as the patch edits it (`slurm_patch.JobFile`: fit's changes go into its
    OPTIONAL_ARGS), or None for any other file."""
    from . import slurm_patch

    if not slurm_patch.is_job(text, str(path)):
        return None
    return slurm_patch.JobFile(path, text)


NATIVE_STYLE = "flags"
"""How a launch script spells a key: `--key value` (a `trl grpo --config` YAML: `key: value`)."""
NATIVE_DIALECTS = (LATEST,)


def file_dialect(text: str, path: str) -> tuple[int, ...]:
    """The TRL release a user's file is read under (`adapters.patch`): its `trl==` directive,
    else the newest release of the trainer its command runs (`trainers.default_release`); the
    keys a patch writes are that release's (TRL <= 0.21 RLOO and PPO before 0.26 differ)."""
    from ..common import load_yaml_mapping, parse_flags, parse_shell, parse_version
    from ...frontends.versions import read_directives
    from . import launch as TL

    if not path.endswith((".yaml", ".yml")):
        from . import slurm_patch

        if slurm_patch.is_job(text, path):  # open-r1's `sbatch slurm/train.slurm` job: read under its setup.py pin
            return slurm_patch.dialect(text, Path(path)) or LATEST
    directives = read_directives(text)
    script, config = "", {}
    try:
        if path.endswith((".yaml", ".yml")):
            config = load_yaml_mapping(text, path, allow_empty=False)
        else:
            main = next((c for c in parse_shell(text, path) if TL._is_main(c)), None)
            if main is not None:
                _, args = TL._split(main)
                script, config = TL._script(main, args), parse_flags(args, path)
        if "trl" in directives:
            return parse_version("trl version", directives["trl"])
        trainer = TT.trainer_of(script, directives.get("trainer"))
    except InputError:
        return LATEST
    return TT.default_release(trainer, LATEST, config)
MAIN_FILE = LAUNCH_NAME
"""The file `oomless plan --from trl` reads of the exported set."""



def native_settings(spec: RunSpec, dialect: tuple[int, ...] = LATEST) -> dict[str, Any]:
    """GRPOConfig / ModelConfig key → value: what `render` writes into grpo_config.yaml, and what
    `fit --from trl --write` patches into the user's YAML or launch flags (one mapping for both).
    A key left out takes TRL's default. A PPO spec gets PPOConfig's keys (`ppo_writer`), an
    RLOO spec RLOOConfig's (`_rloo_settings`)."""
    _same_launch(spec)
    require_merged_lora(spec, "TRL")
    if spec.algorithm == Algorithm.ppo or (spec.algorithm == Algorithm.rloo and dialect < TT.RLOO_REWRITTEN):
        release = min(dialect, TT.PPO_LAST) if spec.algorithm == Algorithm.ppo else dialect
        return PW.native_settings(spec, _model(spec), TO.optim_value(spec, OPTIM[spec.optimizer.value], release), release)
    if spec.algorithm not in (Algorithm.grpo, Algorithm.rloo):
        cannot_express("algorithm", f"{spec.algorithm.value!r} cannot be written for TRL; allowed: grpo, ppo, rloo")
    out = {**_model(spec), **_training(spec, dialect), **_rollout(spec)}
    return _rloo_settings(spec, out) if spec.algorithm == Algorithm.rloo else out


RLOO_SPEC_KEYS = {"padding_free": "batch.padding_free", "cast_lm_head_to_fp32": "logits",
                  "reward_model_name_or_path": "reward_model.model"}
"""GRPO keys of a spec value that RLOOConfig (1.16) lacks, and the spec field each says."""


def _rloo_settings(spec: RunSpec, grpo: dict[str, Any]) -> dict[str, Any]:
    """The GRPO settings RLOOConfig/ModelConfig/TrainingArguments of TRL 1.16 have (rloo key
    table); a spec value only a GRPOConfig key says cannot be written."""
    table, base = TT.key_table(TT.RLOO), KT.transformers_table()
    out = {}
    for key, value in grpo.items():
        if table.exists_in(key, LATEST) or key in base:
            out[key] = value
        elif key in RLOO_SPEC_KEYS:
            cannot_express(RLOO_SPEC_KEYS[key], f"{value!r} cannot be written for TRL {version_text(LATEST)} RLOO: "
                           f"RLOOConfig has no {key}")
    return out


def _train_gpus_per_node(spec: RunSpec) -> int:
    separate = spec.rollout.engine == RolloutEngine.vllm_separate
    return spec.hardware.gpus_per_node - (spec.rollout.num_gpus if separate else 0)


def _same_launch(spec: RunSpec) -> None:
    """A patch keeps the file's launcher: the training processes (`accelerate launch
    --num_processes`, CUDA_VISIBLE_DEVICES, an accelerate config; a bare config: one per GPU),
    the vLLM server's GPUs (`trl vllm-serve`) and the ZeRO/FSDP setup (the accelerate config
    and its DeepSpeed file) are none of them GRPOConfig keys. Only where a writer patches a
    file (`common.fallback_spec`: the run before the change)."""
    old = fallback_spec()
    if old is None:
        return
    if _train_gpus_per_node(spec) != _train_gpus_per_node(old):
        separate = RolloutEngine.vllm_separate in (spec.rollout.engine, old.rollout.engine)
        cannot_express("rollout.num_gpus" if separate else "hardware.gpus_per_node",
                       f"{_train_gpus_per_node(spec)} training processes per node cannot be patched into a TRL config: "
                       f"the launcher sets them (the file runs {_train_gpus_per_node(old)})")
    for name, value in spec.distribution:
        if value != getattr(old.distribution, name):
            cannot_express(f"distribution.{name}", f"{value!r} cannot be patched into a TRL config: the accelerate "
                           f"config of the launch sets it (the file gives {getattr(old.distribution, name)!r})")


def render_files(spec: RunSpec) -> dict[str, str]:
    """The files without the read-back check (`adapters.patch.export` does it, naming every field)."""
    return render(spec)


def render(spec: RunSpec) -> dict[str, str]:
    files: dict[str, str] = {}
    train_gpus = spec.hardware.gpus_per_node - (spec.rollout.num_gpus if spec.rollout.engine == RolloutEngine.vllm_separate else 0)
    accelerate = _accelerate(spec, train_gpus, files)
    plan = f"oomless plan --from trl {LAUNCH_NAME} --gpu {spec.hardware.gpu or '<GPU>'}"
    if spec.hardware.host_ram_gib is not None:
        plan += f" --host-ram {spec.hardware.host_ram_gib:g}"
    if spec.algorithm == Algorithm.ppo:
        head = (f"# PPO of {spec.model} with TRL's {PW.SCRIPT}, written by `oomless export --to trl`.\n"
                f"# Copy these files into the root of a TRL 1.12 checkout and run there: bash {LAUNCH_NAME}\n# Plan it: {plan}\n"
                + _directive(spec))
        files[ACCELERATE_NAME] = yaml.safe_dump(accelerate, sort_keys=False)
        files[LAUNCH_NAME] = PW.launch_text(native_settings(spec), spec, ACCELERATE_NAME, head)
        return files
    config = {**native_settings(spec), "accelerate_config": ACCELERATE_NAME, "output_dir": "output", "report_to": "none"}
    head = (f"# {spec.algorithm.value.upper()} of {spec.model} with TRL, written by `oomless export --to trl`.\n"
            f"# Run from this directory: bash {LAUNCH_NAME}  (or: {_command(spec)} --config {_config_name(spec)})\n"
            f"# Plan it: {plan}\n" + _directive(spec))
    files[_config_name(spec)] = head + yaml.safe_dump(config, sort_keys=False)
    files[ACCELERATE_NAME] = yaml.safe_dump(accelerate, sort_keys=False)
    files[LAUNCH_NAME] = _launch(spec, train_gpus, head)
    return files


def _command(spec: RunSpec) -> str:
    """`trl grpo`, or `trl rloo` (trl/cli/commands: both TrainingCommands in 1.16)."""
    return "trl rloo" if spec.algorithm == Algorithm.rloo else "trl grpo"


def _config_name(spec: RunSpec) -> str:
    return "rloo_config.yaml" if spec.algorithm == Algorithm.rloo else CONFIG_NAME


def _model(spec: RunSpec) -> dict[str, Any]:
    ft, precision, strategy = spec.finetune, spec.precision, spec.distribution.strategy
    plain_full = strategy == Strategy.ddp and ft.method == FinetuneMethod.full
    if precision == Precision.fp16_mixed:
        dtype = "float32" if plain_full else "float16"
    elif precision == Precision.bf16_mixed and plain_full:
        dtype = "float32"
    else:
        dtype = "bfloat16"
    out: dict[str, Any] = {"model_name_or_path": spec.model, "dtype": dtype}
    if spec.attention.value != "sdpa":
        out["attn_implementation"] = spec.attention.value
    if ft.method != FinetuneMethod.full:
        out.update({"use_peft": True, "lora_r": ft.lora_rank, "lora_alpha": _number(ft.lora_alpha),
                    "lora_dropout": ft.lora_dropout,
                    "lora_target_modules": ["all-linear"] if ft.lora_targets == "all-linear" else list(ft.lora_targets)})
        if ft.method == FinetuneMethod.qlora:
            out["load_in_4bit"] = True
            if ft.double_quant:  # TRL's default is single quantisation (use_bnb_nested_quant: false)
                out["use_bnb_nested_quant"] = True
    return out


def _number(value: float) -> int | float:
    return int(value) if value == int(value) else value


def _training(spec: RunSpec, dialect: tuple[int, ...] = LATEST) -> dict[str, Any]:
    batch = spec.batch
    out: dict[str, Any] = {"dataset_name": EXAMPLE_DATASET, "reward_funcs": ["accuracy_reward"]}
    if spec.reward_model.model is not None:
        out["reward_model_name_or_path"] = spec.reward_model.model
    out.update({"per_device_train_batch_size": batch.micro_batch_size,
                "gradient_accumulation_steps": batch.gradient_accumulation_steps,
                "num_generations": batch.num_generations})
    if batch.steps_per_generation is not None:
        out["steps_per_generation"] = batch.steps_per_generation
    if batch.padding_free:  # no GRPOConfig/RLOOConfig release has the key (key tables 0.14-1.16): TRL pads
        cannot_express("batch.padding_free", "True cannot be written for TRL: GRPOTrainer pads every batch "
                       "(padding_free is SFTConfig's key); allowed: False")
    out.update({"max_completion_length": spec.lengths.max_completion_tokens, "beta": spec.kl_beta,
                "gradient_checkpointing": spec.gradient_checkpointing})
    if spec.precision == Precision.fp16_mixed:
        out.update({"bf16": False, "fp16": True})
    else:
        out["bf16"] = True
    optim = TO.optim_value(spec, OPTIM[spec.optimizer.value], dialect)
    if optim is not None:
        out["optim"] = optim
    out.update(liger_settings(spec, dialect))  # use_liger_kernel / use_liger_loss, per release (liger.py)
    if spec.logits.value == "full_fp32":
        out["cast_lm_head_to_fp32"] = True
    elif spec.logits.value != "fused":
        _release_logits(spec, dialect)
    return out


KEYED_LOGITS = ("fused", "full_fp32")
"""Logits modes a TRL key selects (use_liger_kernel/use_liger_loss: liger.py; cast_lm_head_to_fp32); any other is the
release's own: the tiled LM head from 1.15, full bf16 logits before (reader, versions.py)."""


def _release_logits(spec: RunSpec, dialect: tuple[int, ...]) -> None:
    """A patch (`fallback_spec`: the run before it) can leave the logits only to the file's
    release, which is the run's own mode unless that was keyed (then the release's own: the
    tiled head from 1.15, full bf16 logits before): another unkeyed mode reads back as the
    release's (open-r1's DeepSeek recipe on A100-40GB: full_bf16 wanted, chunked_head read back,
    0.8 GiB apart)."""
    old = fallback_spec()
    if old is None:
        return
    own = "chunked_head" if dialect >= CHUNKED_HEAD_FROM else "full_bf16"
    release = old.logits.value if old.logits.value not in KEYED_LOGITS else own
    if spec.logits.value != release:
        cannot_express("logits", f"{spec.logits.value!r} cannot be written for TRL: the file's release computes "
                       f"{release!r} unless a Liger loss key or cast_lm_head_to_fp32 is set")


def _rollout(spec: RunSpec) -> dict[str, Any]:
    ro = spec.rollout
    if ro.engine == RolloutEngine.hf:
        return {"use_vllm": False}
    if ro.engine == RolloutEngine.vllm_separate:
        return {"use_vllm": True, "vllm_mode": "server"}
    if ro.enforce_eager:  # GRPOConfig has no such key: TRL's colocated LLM(...) always captures CUDA graphs
        cannot_express("rollout.enforce_eager", "True cannot be written for TRL: its colocated engine has no "
                       "enforce_eager key (trl 1.16 grpo_trainer.py LLM(...)); allowed: False")
    if fallback_spec() is not None:  # a patch only: the export states what it can and is read back whole
        _colocated_sizes(spec)
    out: dict[str, Any] = {"use_vllm": True, "vllm_mode": "colocate",
                           "vllm_gpu_memory_utilization": ro.gpu_memory_utilization,
                           "vllm_tensor_parallel_size": ro.tensor_parallel_size,
                           "vllm_max_model_length": _model_len(spec)}
    if ro.sleep_level:
        out["vllm_enable_sleep_mode"] = True
    return out


def _colocated_sizes(spec: RunSpec) -> None:
    """TRL sizes its colocated engine itself, with no key a file could hold (`versions.py`):
    max_num_seqs = per-device batch × vLLM TP × steps_per_generation and max_num_batched_tokens
    4096 (an HF run carries both at TP 1 as its idle engine, so fit plans them: reader). A patch
    to other sizes reads back as another run (grpo_vlm.py's example: fit planned vLLM's 4096
    tokens, 0.77 GiB low; grpo_trainer.md's: vLLM's 256 sequences for TRL's 8, 0.71 GiB low)."""
    from ..patch import planned_max_num_seqs

    ro, batch = spec.rollout, spec.batch
    if ro.max_num_batched_tokens != COLOCATE_MAX_NUM_BATCHED_TOKENS:
        cannot_express("rollout.max_num_batched_tokens", f"{ro.max_num_batched_tokens!r} cannot be written for TRL: its "
                       f"colocated engine takes {COLOCATE_MAX_NUM_BATCHED_TOKENS} (trl grpo_trainer.py LLM(...))")
    sized = batch.micro_batch_size * ro.tensor_parallel_size * (batch.steps_per_generation or batch.gradient_accumulation_steps)
    if planned_max_num_seqs(spec) != sized:
        cannot_express("rollout.max_num_seqs", f"{planned_max_num_seqs(spec)} cannot be written for TRL: its colocated engine "
                       f"takes per_device_train_batch_size × vllm_tensor_parallel_size × steps_per_generation = {sized}")


def _model_len(spec: RunSpec) -> int:
    """The engine's max_model_len: the spec's, else the longest sequence with its worst-case
    image tokens, as the planner sizes an unset one (the reader takes the prompt bound as this
    less the completion and the images: a length without them read back 1,377 prompt tokens short
    on TRL's grpo_vlm.py example)."""
    return spec.rollout.max_model_len or spec.max_sequence_tokens + image_tokens(spec, load_model(spec.model))


def _accelerate(spec: RunSpec, train_gpus: int, files: dict[str, str]) -> dict[str, Any]:
    dist, nodes = spec.distribution, spec.hardware.num_nodes
    out: dict[str, Any] = {"compute_environment": "LOCAL_MACHINE", "debug": False}
    if dist.strategy == Strategy.fsdp:
        out["distributed_type"] = "FSDP"
        out["fsdp_config"] = {"fsdp_version": 2, "fsdp_offload_params": dist.offload_params,
                              "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP", "fsdp_reshard_after_forward": True,
                              "fsdp_state_dict_type": "FULL_STATE_DICT", "fsdp_cpu_ram_efficient_loading": True}
    elif dist.strategy == Strategy.ddp:
        out["distributed_type"] = "MULTI_GPU" if train_gpus * nodes > 1 else "NO"
    else:
        out["distributed_type"] = "DEEPSPEED"
        out["deepspeed_config"] = {"deepspeed_config_file": DS_CONFIG_NAME,
                                   "zero3_init_flag": dist.strategy == Strategy.zero3}
        files[DS_CONFIG_NAME] = json.dumps(deepspeed_config_for(dist), indent=2) + "\n"
    out.update({"machine_rank": 0, "main_training_function": "main", "num_machines": nodes,
                "num_processes": train_gpus * nodes, "rdzv_backend": "static", "same_network": True,
                "use_cpu": False})
    if out["distributed_type"] != "DEEPSPEED":
        out["mixed_precision"] = "fp16" if spec.precision == Precision.fp16_mixed else "bf16"
    return out


def _launch(spec: RunSpec, train_gpus: int, head: str) -> str:
    ro, gpus = spec.rollout, spec.hardware.gpus_per_node
    lines = ["#!/usr/bin/env bash", *head.rstrip("\n").splitlines(), "set -euo pipefail", 'cd "$(dirname "$0")"', ""]
    if ro.engine == RolloutEngine.vllm_separate:
        devices = ",".join(str(i) for i in range(train_gpus, gpus))
        serve = (f"CUDA_VISIBLE_DEVICES={devices} trl vllm-serve --model {spec.model} "
                 f"--tensor_parallel_size {ro.tensor_parallel_size} "
                 f"--data_parallel_size {ro.num_gpus // ro.tensor_parallel_size} "
                 f"--gpu_memory_utilization {ro.gpu_memory_utilization} "
                 f"--max_model_len {_model_len(spec)}")
        if ro.enforce_eager:
            serve += " --enforce_eager true"
        lines += ["# The vLLM server on its own GPU(s); training waits for it.", serve + " &", "sleep 120", ""]
    devices = ",".join(str(i) for i in range(train_gpus))
    lines.append(f"CUDA_VISIBLE_DEVICES={devices} {_command(spec)} --config {_config_name(spec)}")
    return "\n".join(lines) + "\n"


def export_spec(spec: RunSpec, out_dir: Path, force: bool) -> list[Path]:
    """Write `export_files(spec)` into ``out_dir`` (all or none; existing files need ``force``)."""
    from ..common import write_new_files

    return write_new_files({out_dir / name: text for name, text in export_files(spec).items()}, force)
