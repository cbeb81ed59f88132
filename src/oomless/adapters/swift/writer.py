"""A spec → a runnable `swift rlhf` script (plus a DeepSpeed JSON when no preset matches).

The script is written for the newest ms-swift release that can say everything the spec says
(`CANDIDATES`, newest first): each candidate is rendered, read back with the swift importer and
compared with the spec; the first that reads back the same is returned. When none does, the
error names the first field the newest release cannot express.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from ...catalog.models import ModelArch
from ...catalog.resolve import load_model
from ...errors import InputError
from ...spec.run import FinetuneMethod, Precision, RolloutEngine, RunSpec, Strategy
from . import keys as SF
from . import patch_checks as PC
from . import ppo as swift_ppo
from . import optim as SO
from . import liger as SL
from ..common import transformers_directive, version_text
from .. import key_tables as KT
from ..round_trip import first_difference, image_tokens, same_spec_dict, unstated_releases, value_at
from ..deepspeed_json import deepspeed_config_for, distribution_from_deepspeed

SCRIPT_NAME = "run_grpo.sh"
DS_CONFIG_NAME = "ds_config.json"
CANDIDATES: tuple[tuple[int, ...], ...] = (SF.LATEST, (3, 12), (3, 6), (3, 4))
VLLM_BEFORE_GRAPHS_IN_BUDGET = (0, 8, 5)
ATTN_FLAG = {"flash_attention_2": "flash_attn", "sdpa": "sdpa", "eager": "eager"}


class _CannotExpress(Exception):
    def __init__(self, field: str, why: str) -> None:
        super().__init__(f"{field}: {why}")
        self.field, self.why = field, why


def _raise_if(problem: tuple[str, str] | None) -> None:
    if problem is not None:
        raise _CannotExpress(*problem)


def export_files(spec: RunSpec) -> dict[str, str]:
    """File name → text, checked to read back to ``spec``."""
    from .reader import import_text

    arch = load_model(spec.model)
    failures: list[tuple[str, str]] = []
    for version in CANDIDATES:
        try:
            files = render(spec, arch, SF.Profile(version))
        except _CannotExpress as err:
            failures.append((err.field, err.why))
            continue
        overlay = {n: t for n, t in files.items() if n != SCRIPT_NAME}
        imported, _, _ = import_text(files[SCRIPT_NAME], Path("."), _hardware_flags(spec), SCRIPT_NAME, overlay)
        wanted, got = same_spec_dict(spec, arch), same_spec_dict(_with_hardware(imported, spec), arch)
        unstated_releases(wanted, got)
        _resolve_engine_default(wanted, got, spec)
        difference = first_difference(wanted, got)
        if difference is None:
            return files
        failures.append((difference, f"{value_at(wanted, difference)!r}; its script gives {value_at(got, difference)!r}"))
    field, why = failures[0]
    others = "; ".join(f"{version_text(v)}: {f}" for v, (f, _) in zip(CANDIDATES[1:], failures[1:]))
    raise InputError(field, f"ms-swift {version_text(CANDIDATES[0])} cannot express it ({why}); "
                     f"older releases fail on {others}")


def _resolve_engine_default(wanted: dict[str, Any], got: dict[str, Any], spec: RunSpec) -> None:
    """A spec's unset `max_num_seqs` is vLLM's default for its GPU (planner.shape); ms-swift
    states its engine's size (`swift rollout` 256, colocate batch × TP × steps), so compare the
    number the plan would use."""
    ro_w, ro_g = wanted.get("rollout") or {}, got.get("rollout") or {}
    if ro_w.get("max_num_seqs") is None and ro_g.get("max_num_seqs") is not None:
        ro_w["max_num_seqs"] = planned_max_num_seqs(spec)


def planned_max_num_seqs(spec: RunSpec) -> int:
    from ..patch import planned_max_num_seqs as planned

    return planned(spec)


def _hardware_flags(spec: RunSpec) -> Any:
    from .. import HardwareFlags

    return HardwareFlags(gpu=spec.hardware.gpu or "A100-80GB")


def _with_hardware(imported: dict[str, Any], spec: RunSpec) -> dict[str, Any]:
    """The spec's GPU, capacity and host RAM; the script's GPU counts (those are compared)."""
    hardware = spec.hardware.model_dump(exclude_none=True)
    hardware["gpus_per_node"] = imported["hardware"]["gpus_per_node"]
    hardware["num_nodes"] = imported["hardware"]["num_nodes"]
    return {**imported, "hardware": hardware}


NATIVE_STYLE = "flags"
"""`swift rlhf --flag value`."""
NATIVE_DIALECTS = CANDIDATES
MAIN_FILE = SCRIPT_NAME


def file_dialect(text: str, source: str) -> tuple[int, ...]:
    """The release the reader reads the user's script as; patching it in another release's
    flags would compare against other presets and defaults (a 3.x zero3 preset overlaps
    communication, 4.x's does not)."""
    from .reader import file_version

    return file_version(text, source)


def native_settings(spec: RunSpec, dialect: tuple[int, ...] = SF.LATEST) -> dict[str, Any]:
    """`swift rlhf` flag → value for ms-swift ``dialect``: the flags `render` writes, and what
    `fit --from swift --write` patches into the user's script (one mapping for both). A section
    the release cannot express is recorded with `common.cannot_express` and left out."""
    from ..common import cannot_express, fallback_spec, require_merged_lora

    require_merged_lora(spec, "ms-swift")
    arch, profile, out = load_model(spec.model), SF.Profile(dialect), {}
    sections = (lambda s: _finetune(s, profile), lambda s: _precision_and_distribution(s, profile, {}),
                lambda s: _training(s, arch, profile), lambda s: _rollout_settings(s, arch, profile))
    for section in sections:
        try:
            out.update(section(spec))
        except _CannotExpress as err:
            cannot_express(err.field, f"ms-swift {version_text(dialect)} cannot express {err.why}")
            previous = fallback_spec()
            if previous is not None:  # the section as the run had it (inside collect_unexpressed)
                try:
                    out.update(section(previous))
                except _CannotExpress:
                    pass
    return out


def render_files(spec: RunSpec) -> dict[str, str]:
    """The newest release's files that read back to ``spec``, else the newest release's files
    (`adapters.patch.export` then names every field they do not say)."""
    try:
        return export_files(spec)
    except InputError:
        try:
            return render(spec, load_model(spec.model), SF.Profile(CANDIDATES[0]))
        except _CannotExpress as err:
            raise InputError(err.field, f"ms-swift {version_text(CANDIDATES[0])} cannot express {err.why}") from None


def render(spec: RunSpec, arch: ModelArch, profile: SF.Profile) -> dict[str, str]:
    files: dict[str, str] = {}
    flags: list[tuple[str, str | list[str]]] = [
        ("rlhf_type", "grpo"), ("model", spec.model), ("dataset", SF.EXAMPLE_DATASET),
        ("reward_funcs", ["accuracy", "format"]),
    ]
    flags += _finetune(spec, profile)
    flags += _precision_and_distribution(spec, profile, files)
    flags += _training(spec, arch, profile)
    if spec.algorithm.value == "ppo":
        _raise_if(swift_ppo.ppo_problem(spec))
        env, pre, _ = _rollout(spec, arch, profile)
        flags = swift_ppo.ppo_flags(spec, flags)
    else:
        env, pre, rollout_flags = _rollout(spec, arch, profile)
        flags += rollout_flags
    files[SCRIPT_NAME] = _script(spec, profile, env, pre, flags)
    return files


def _finetune(spec: RunSpec, profile: SF.Profile) -> list[tuple[str, Any]]:
    ft = spec.finetune
    if ft.method == FinetuneMethod.full:
        return [(profile.tuner_flag, "full")]
    if ft.lora_alpha != int(ft.lora_alpha):
        raise _CannotExpress("finetune.lora_alpha", f"{ft.lora_alpha} (ms-swift takes an integer)")
    out: list[tuple[str, Any]] = [(profile.tuner_flag, "lora")]
    if ft.method == FinetuneMethod.qlora:
        out += [("quant_bits", "4"), ("quant_method", "bnb")] + ([] if ft.double_quant else [("bnb_4bit_use_double_quant", "false")])
        mixed_ddp = spec.distribution.strategy == Strategy.ddp and spec.precision == Precision.bf16_mixed  # writes it already
        out += [("lora_dtype", "float32")] if ft.adapter_dtype == "fp32" and not mixed_ddp else []
    targets = ["all-linear"] if ft.lora_targets == "all-linear" else list(ft.lora_targets)
    return out + [("lora_rank", str(ft.lora_rank)), ("lora_alpha", str(int(ft.lora_alpha))),
                  ("lora_dropout", repr(ft.lora_dropout)), ("target_modules", targets)]


def _precision_and_distribution(spec: RunSpec, profile: SF.Profile, files: dict[str, str]) -> list[tuple[str, Any]]:
    dist, precision = spec.distribution, spec.precision
    out: list[tuple[str, Any]] = [("torch_dtype", "float16" if precision == Precision.fp16_mixed else "bfloat16")]
    if dist.strategy == Strategy.fsdp:
        raise _CannotExpress("distribution.strategy", "fsdp (oomless writes DeepSpeed configs for ms-swift)")
    if dist.strategy == Strategy.ddp:
        ft = spec.finetune  # zero0 keeps fp32 masters of bf16 weights; --lora_dtype float32 trains fp32 adapters
        if precision == Precision.bf16_mixed and (ft.method == FinetuneMethod.full or (ft.method == FinetuneMethod.qlora and ft.adapter_dtype != "fp32")):
            return out + [("deepspeed", "zero0")]
        if precision == Precision.bf16_mixed:
            return out + [("lora_dtype", "float32")]
        return out
    wanted = distribution_from_deepspeed(deepspeed_config_for(dist), "spec").distribution
    for name, preset in profile.presets.items():
        if distribution_from_deepspeed(preset, name).distribution == wanted:
            return out + [("deepspeed", name)]
    files[DS_CONFIG_NAME] = json.dumps(deepspeed_config_for(dist), indent=2) + "\n"
    return out + [("deepspeed", DS_CONFIG_NAME)]


def _training(spec: RunSpec, arch: ModelArch, profile: SF.Profile) -> list[tuple[str, Any]]:
    batch, lengths = spec.batch, spec.lengths
    out: list[tuple[str, Any]] = SO.optim_flags(spec, profile.version)
    out += [("gradient_checkpointing", _bool(spec.gradient_checkpointing)),
            ("attn_impl", ATTN_FLAG[spec.attention.value]),
            ("per_device_train_batch_size", str(batch.micro_batch_size)),
            ("gradient_accumulation_steps", str(batch.gradient_accumulation_steps)),
            ("num_generations", str(batch.num_generations))]
    if batch.steps_per_generation is not None:
        out.append(("steps_per_generation", str(batch.steps_per_generation)))
    if batch.padding_free:
        out.append(("padding_free", "true"))
    if spec.distribution.sequence_parallel_size > 1:
        out.append(("sequence_parallel_size", str(spec.distribution.sequence_parallel_size)))
    total = lengths.max_prompt_tokens + image_tokens(spec, arch)  # GRPO's max_length bounds the prompt (reader)
    out += [("max_length", str(total)), ("max_completion_length", str(lengths.max_completion_tokens)),
            ("beta", repr(spec.kl_beta))]
    _raise_if(SL.unsayable(spec, profile.version))  # --use_liger_kernel per release (liger.py)
    out += SL.liger_flags(spec)
    if spec.algorithm.value == "rloo":
        out.append(("advantage_estimator", "rloo"))
    if spec.reward_model.model is not None:
        out.append(("reward_model", spec.reward_model.model))
    if arch.vision is not None:
        out.append(("freeze_vit", _bool(spec.vision.freeze_tower)))
        if spec.vision.tower_gradient_checkpointing is not None:
            out.append(("vit_gradient_checkpointing", _bool(spec.vision.tower_gradient_checkpointing)))
    return out


def _engine_flags(spec: RunSpec, arch: ModelArch, profile: SF.Profile, tp_flag: str) -> list[tuple[str, Any]]:
    ro = spec.rollout
    max_len = ro.max_model_len or spec.max_sequence_tokens + image_tokens(spec, arch)
    out: list[tuple[str, Any]] = [("vllm_gpu_memory_utilization", repr(ro.gpu_memory_utilization))]
    if ro.tensor_parallel_size != 1 or tp_flag == "vllm_tensor_parallel_size":
        out.append((tp_flag, str(ro.tensor_parallel_size)))
    out.append(("vllm_max_model_len", str(max_len)))
    if ro.max_num_seqs is not None and KT.load("swift").exists_in("vllm_max_num_seqs", profile.version):
        out.append(("vllm_max_num_seqs", str(ro.max_num_seqs)))  # not a flag of 3.6 (key table)
    if ro.enforce_eager:
        out.append(("vllm_enforce_eager", "true"))
    if ro.limit_images_per_prompt is not None and arch.vision is not None:
        out.append(("vllm_limit_mm_per_prompt", json.dumps({"image": ro.limit_images_per_prompt})))
    return out


def _sync_flags(spec: RunSpec) -> list[tuple[str, Any]]:
    batches = spec.rollout.weight_sync_batches
    return [("move_model_batches", str(batches))] if batches and batches > 1 else []


def _colocate_flags(spec: RunSpec, profile: SF.Profile) -> list[tuple[str, Any]]:
    ro, out = spec.rollout, []
    if ro.sleep_level:
        out.append(("sleep_level", str(ro.sleep_level)))
    for name in ("offload_model", "offload_optimizer"):
        if getattr(ro, name):
            out.append((name, "true"))
    if not profile.always_empties_cache and ro.empty_cache_before_rollout:
        out.append(("gc_collect_after_offload", "true"))
    return out


def _check_colocate_max_num_seqs(spec: RunSpec, profile: SF.Profile) -> None:
    """ms-swift 3.5-3.10 sizes a colocated engine itself, per_device_train_batch_size × vLLM TP ×
    steps_per_generation (keys.Profile.colocate_max_num_seqs_flag; the reader, layout.py): any
    other max_num_seqs cannot be written."""
    ro, batch = spec.rollout, spec.batch
    if profile.colocate_max_num_seqs_flag:
        return
    steps = batch.steps_per_generation or batch.gradient_accumulation_steps
    derived = batch.micro_batch_size * ro.tensor_parallel_size * steps
    if planned_max_num_seqs(spec) != derived:
        raise _CannotExpress("rollout.max_num_seqs", f"{planned_max_num_seqs(spec)} (its colocated engine takes per_device_"
                             f"train_batch_size × vllm_tensor_parallel_size × steps_per_generation = {derived})")


def _rollout_settings(spec: RunSpec, arch: ModelArch, profile: SF.Profile) -> list[tuple[str, Any]]:
    """The vLLM flags, and the training processes per node and the GPUs they see as the `env:`
    keys the script patcher edits where the script sets them (`patch.shell_text.ENV_PREFIX`):
    a patch that adds a process also makes its GPU visible (tree_rollout.sh: NPROC_PER_NODE 1 → 2
    under CUDA_VISIBLE_DEVICES=0 did not read back)."""
    env, _, flags = _rollout(spec, arch, profile)
    visible = env.get("CUDA_VISIBLE_DEVICES") or ",".join(str(i) for i in range(int(env["NPROC_PER_NODE"])))
    return [*flags, ("env:NPROC_PER_NODE", env["NPROC_PER_NODE"]), ("env:CUDA_VISIBLE_DEVICES", visible)]


def _rollout(spec: RunSpec, arch: ModelArch, profile: SF.Profile) -> tuple[dict[str, str], str, list[tuple[str, Any]]]:
    """(environment of `swift rlhf`, commands before it, its vLLM flags)."""
    ro, gpus = spec.rollout, spec.hardware.gpus_per_node
    env = {"NPROC_PER_NODE": str(gpus)}
    _raise_if(PC.server_problem(spec, profile))
    if ro.engine == RolloutEngine.hf:
        return env, "", [("use_vllm", "false")]
    if ro.engine == RolloutEngine.vllm_colocate and spec.placement.groups is None and not ro.engine_in_trainer_process:
        # the reader's layouts: only 3.2-3.4's single engine on one GPU of the trainer's is its
        # own process (layout._legacy); an engine per rank lives in that rank's process
        raise _CannotExpress("rollout.engine_in_trainer_process", "a colocated engine on every GPU outside the "
                             "training processes (its engines run inside them)")
    _raise_if(PC.release_engine_problem(spec, profile))
    if not profile.has_vllm_mode:
        return _legacy_rollout(spec, arch, profile, env)
    if ro.engine == RolloutEngine.vllm_colocate:
        _check_colocate_max_num_seqs(spec, profile)
        flags = [("use_vllm", "true"), ("vllm_mode", "colocate"),
                 *_engine_flags(spec, arch, profile, "vllm_tensor_parallel_size"), *_sync_flags(spec),
                 *_colocate_flags(spec, profile)]
        if ro.max_num_seqs is None and profile.colocate_max_num_seqs_flag:
            # unset, ms-swift would size the engine batch × TP × steps, not as the plan did
            flags.append(("vllm_max_num_seqs", str(planned_max_num_seqs(spec))))
        return env, "", flags
    train = gpus - ro.num_gpus
    server = [("model", spec.model), *_engine_flags(spec, arch, profile, "vllm_tensor_parallel_size")]
    devices = ",".join(str(i) for i in range(train, gpus))
    pre = (f"# The vLLM server on GPU(s) {devices}; training waits for it.\n"
           f"CUDA_VISIBLE_DEVICES={devices} \\\nswift rollout \\\n{_flag_lines(server)} &\nsleep 120\n\n")
    env = {"CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in range(train)), "NPROC_PER_NODE": str(train)}
    return env, pre, [("use_vllm", "true"), ("vllm_mode", "server"), ("vllm_server_host", "127.0.0.1"),
                      ("vllm_server_port", "8000"), *_sync_flags(spec)]


def _legacy_rollout(spec: RunSpec, arch: ModelArch, profile: SF.Profile,
                    env: dict[str, str]) -> tuple[dict[str, str], str, list[tuple[str, Any]]]:
    """ms-swift 3.2-3.4: an engine per rank, or one engine on the last visible GPU."""
    ro, gpus = spec.rollout, spec.hardware.gpus_per_node
    engine = _engine_flags(spec, arch, profile, "tensor_parallel_size")
    if ro.engine == RolloutEngine.vllm_separate:
        if ro.num_gpus != 1:
            raise _CannotExpress("rollout.num_gpus", f"{ro.num_gpus} (ms-swift 3.4's engine has one GPU)")
        env = {"CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in range(gpus)), "NPROC_PER_NODE": str(gpus - 1)}
        return env, "", [("use_vllm", "true"), ("num_infer_workers", "1"), ("vllm_device", "auto"), *engine,
                         *_sync_flags(spec)]
    workers = "1" if spec.placement.groups is not None else str(gpus)
    flags = [("use_vllm", "true"), ("num_infer_workers", workers)]
    if workers == "1":
        flags.append(("vllm_device", "auto"))
    return env, "", flags + engine + _sync_flags(spec) + _colocate_flags(spec, profile)


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _flag_lines(flags: list[tuple[str, Any]]) -> str:
    lines = []
    for name, value in flags:
        values = value if isinstance(value, list) else [value]
        lines.append(f"    --{name} " + " ".join(shlex.quote(v) for v in values))
    return " \\\n".join(lines)


def _vllm_directive(spec: RunSpec, profile: SF.Profile, vllm: tuple[int, ...]) -> str:
    """` vllm==X` for the spec's vLLM release, or for the one its CUDA-graph placement needs when
    the release's default vLLM would place them otherwise; "" when the default says the same."""
    if spec.rollout.vllm_version:
        return f" vllm=={spec.rollout.vllm_version}"
    same = (profile.default_vllm >= SF.VLLM_GRAPHS_IN_BUDGET) == (vllm >= SF.VLLM_GRAPHS_IN_BUDGET)
    return "" if same else f" vllm=={version_text(vllm)}"


def _script(spec: RunSpec, profile: SF.Profile, env: dict[str, str], pre: str, flags: list[tuple[str, Any]]) -> str:
    hw = spec.hardware
    vllm = SF.VLLM_GRAPHS_IN_BUDGET if spec.rollout.cuda_graphs_in_budget else VLLM_BEFORE_GRAPHS_IN_BUDGET
    plan = f"oomless plan --from swift {SCRIPT_NAME} --gpu {hw.gpu or '<GPU>'}"
    if hw.host_ram_gib is not None:
        plan += f" --host-ram {hw.host_ram_gib:g}"
    env = {"CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in range(int(env["NPROC_PER_NODE"]))), **env}
    if hw.num_nodes > 1:
        env.update({"NNODES": str(hw.num_nodes), "NODE_RANK": "${NODE_RANK:-0}",
                    "MASTER_ADDR": "${MASTER_ADDR:-127.0.0.1}", "MASTER_PORT": "${MASTER_PORT:-29500}"})
    if spec.vision.max_pixels is not None:
        env["MAX_PIXELS"] = str(spec.vision.max_pixels)
    if spec.vision.min_pixels is not None:
        env["MIN_PIXELS"] = str(spec.vision.min_pixels)
    algorithm, yours = ("PPO", "--dataset") if spec.algorithm.value == "ppo" else ("GRPO", "--dataset and --reward_funcs")
    head = (f"#!/usr/bin/env bash\n# {algorithm} of {spec.model} with ms-swift, written by `oomless export --to swift`.\n"
            f"# Plan it: {plan}\n# Replace {yours} with yours; the memory settings are "
            f"the spec's.\n# oomless: ms-swift=={version_text(profile.version)}{_vllm_directive(spec, profile, vllm)}"
            f"{transformers_directive(spec)}\n"
            "set -euo pipefail\n\n")
    env_lines = "".join(f"{k}={v} \\\n" for k, v in env.items())
    return head + pre + env_lines + "swift rlhf \\\n" + _flag_lines(flags) + "\n"


def export_spec(spec: RunSpec, out_dir: Path, force: bool) -> list[Path]:
    """Write `export_files(spec)` into ``out_dir`` (all or none; existing files need ``force``)."""
    from ..common import write_new_files

    return write_new_files({out_dir / name: text for name, text in export_files(spec).items()}, force)
