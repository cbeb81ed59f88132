"""VLM-R1 (om-ai-lab): a `torchrun ... grpo_*.py --flag value` launch ↔ a run spec.

VLM-R1 is a fork of the TRL 0.14-era GRPO trainer (`src/open-r1-multimodal/src/open_r1/
trainer/grpo_trainer.py`, `VLMGRPOTrainer`), launched by `run_scripts/*.sh` with torchrun and
a DeepSpeed JSON (`local_scripts/zero3.json`, HF "auto" bucket sizes).
Source: VLM-R1 main (pins trl 0.17.0, transformers 4.49.0, deepspeed 0.15.4); its
`grpo_jsonl.py`/`grpo_rec.py` script arguments (`max_pixels` 12845056, `min_pixels` 3136,
`freeze_vision_modules`) and TRL 0.14 `GRPOConfig` defaults (num_generations 8,
max_prompt_length 512, max_completion_length 256, beta 0.04, use_vllm false).
Assumes: per_device_train_batch_size counts prompts and all their num_generations completions
run in one forward and one generate call (the TRL 0.14 trainer), so the planned micro batch is
their product; rollouts by HF generate; a DeepSpeed JSON that is not next to the script is
VLM-R1's own (stage from its name, "auto" sizes).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ... import safe_paths as SP
from ...errors import InputError
from ...safe_json import load_json
from .. import HardwareFlags, ImportResult
from .. import _native as N
from .. import common as C
from ...frontends.flags import option_value
from .. import optim_impl as OI
from .keys import DEFAULTS, NO_MEMORY_EFFECT, VLMR1_DEEPSPEED_OPTIMIZER

SUPPORTED_VERSIONS = "VLM-R1 main 2025-2026 (TRL 0.14-era trainer; TRL 0.14 GRPOConfig defaults)"
LOWEST, HIGHEST = "0.0.0", "0.0.0"



def import_config(path: Path, hardware: HardwareFlags) -> ImportResult:
    text = C.read_text(path)
    command, notes = C.pick_command(C.read_script(text, str(path)), lambda c: _script_index(c) is not None, str(path),
                                    "torchrun [options] src/open_r1/grpo_*.py --flag value ...")
    start = _script_index(command)
    launcher, args = list(command.argv[:start]), list(command.argv[start + 1:])
    out = N.Collected()
    out.notes.extend(notes)
    given = _flags(args, out)
    values = {**DEFAULTS, **given}
    nproc = option_value(launcher, "--nproc_per_node") or command.env.get("NPROC_PER_NODE")
    if nproc is not None and "$" in nproc:
        out.notes.append(f"--nproc_per_node {nproc} is set by the environment at run time: GPUs per node from "
                         "--gpus-per-node, else the default")
        nproc = None
    nnodes = option_value(launcher, "--nnodes")
    if nnodes is not None and "$" in nnodes:
        out.notes.append(f"--nnodes {nnodes} is set by the environment at run time: nodes from --nodes, else 1")
        nnodes = None
    out.set("model", N.model_ref(values.get("model_name_or_path"), "--model_name_or_path", out))
    out.set("hardware", N.hardware(hardware, "vlmr1", C.as_int("--nproc_per_node", nproc, 1) if nproc else None,
                                   C.as_int("--nnodes", nnodes, 1) if nnodes else None, out))
    distribution, ds_optimizer = _deepspeed(values.get("deepspeed"), path, command.cwd, out)
    out.set("distribution", distribution)
    optim = str(given.get("optim", DEFAULTS["optim"]))
    implementation = OI.from_hf_optim(optim, DEFAULTS["optim"], "deepspeed" if ds_optimizer else None, distribution)
    if implementation is not None:
        out.set("optimizer_implementation", implementation)
    _training(values, out)
    for key, value in sorted(given.items()):
        if key in NO_MEMORY_EFFECT:
            out.ignore(f"--{key}", value, "no effect on the planned memory")
        elif key not in DEFAULTS and key not in ("model_name_or_path", "deepspeed", "optim"):
            out.ignore(f"--{key}", value, "not used for memory (not understood, or no effect)")
    return ImportResult(out.spec, tuple(out.ignored), tuple(out.notes), data=_data(given))


def _data(given: dict[str, Any]) -> Any:
    """grpo_jsonl.py's `--data_file_paths a.jsonl:b.jsonl` with `--image_folders` (one per file,
    images joined to it), the question in the first `conversations` turn (src/open_r1/grpo_jsonl.py
    at HEAD: `item['conversations'][0]['value']`), asked as one user message. The VLM module wraps
    the question in a template chosen by `--task_type` (vlm_modules/*.py `get_question_template`),
    which is not counted: the data then gives typical lengths, not a bound."""
    paths = given.get("data_file_paths")
    if not isinstance(paths, str):
        return None
    folders = given.get("image_folders")
    roots = folders.split(":") if isinstance(folders, str) else []
    return N.data_ref("--data_file_paths", paths.split(":"), prompt_field="conversations", image_field="image",
                      chat=True, image_roots=roots if len(roots) == len(paths.split(":")) else (), drops_answer=True,
                      missing=f"the VLM module's question template for --task_type {given.get('task_type', 'default')}")


def _script_index(command: C.ShellCommand) -> int | None:
    """Index of the VLM-R1 GRPO script (`src/open_r1/grpo_jsonl.py`, `grpo_rec.py`, ...) in a
    launch command, or None."""
    for i, word in enumerate(command.argv):
        if re.search(r"(^|/)grpo(_\w+)?\.py$", word):
            return i
    return None


def _flags(args: list[str], out: N.Collected) -> dict[str, Any]:
    """HF-argparse style `--name value`, `--name=value`, bare `--name` (true)."""
    given: dict[str, Any] = {}
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if not word.startswith("--"):
            continue
        name, eq, value = word[2:].partition("=")
        if not eq:
            if i < len(args) and not args[i].startswith("--"):
                value, i = args[i], i + 1
            else:
                value = "true"
        given[name] = value
    return given


def _deepspeed(ref: Any, script: Path, cwd: str, out: N.Collected) -> tuple[dict[str, Any], bool]:
    """The DeepSpeed JSON: next to the script, or where the script `cd`s to (from the folder
    oomless runs in), else VLM-R1's own config of the stage its name says; and whether it has
    an `optimizer` section (DeepSpeed builds its own optimizer: the Trainer's `optim` is unused)."""
    if not ref:
        return {"strategy": "ddp"}, False
    SP.checked_path(str(ref), "--deepspeed")
    places = (script.parent / str(ref), Path.cwd() / cwd / str(ref), script.parent / cwd / str(ref), Path.cwd() / str(ref))
    file = next((p for p in places if SP.is_file(p)), None)
    if file is None:
        match = re.search(r"zero(?:_?stage)?_?([123])", Path(str(ref)).name)
        if match is None:
            raise InputError("--deepspeed", f"{ref} not found and its name does not say the ZeRO stage")
        out.notes.append(f"--deepspeed {ref} is not next to the script: planned as VLM-R1's zero{match.group(1)}.json ('auto' sizes)")
        auto = {"reduce_bucket_size": "auto"}
        if match.group(1) == "3":
            auto.update(stage3_prefetch_bucket_size="auto", stage3_param_persistence_threshold="auto")
        return {"strategy": f"zero{match.group(1)}", **auto}, VLMR1_DEEPSPEED_OPTIMIZER.get(Path(str(ref)).name, True)
    config = load_json(C.read_text(file), str(file))
    zero = config.get("zero_optimization", {}) if isinstance(config, dict) else None
    if not isinstance(zero, dict):
        raise InputError(str(file), "a DeepSpeed config must be a JSON object with an object zero_optimization")
    stage = C.as_int("zero_optimization.stage", zero.get("stage", 0), 0)
    dist: dict[str, Any] = {"strategy": "ddp" if stage == 0 else f"zero{stage}"}
    if "overlap_comm" in zero and stage in (1, 2, 3):
        dist["overlap_comm"] = C.as_bool("zero_optimization.overlap_comm", zero["overlap_comm"])
    for key in ("reduce_bucket_size", "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold"):
        if key in zero and (stage == 3 or key == "reduce_bucket_size"):
            dist[key] = zero[key] if zero[key] == "auto" else C.as_int(key, zero[key], 0)
    dist["offload_optimizer"] = _offload_device(zero.get("offload_optimizer")) == "cpu"
    dist["offload_params"] = _offload_device(zero.get("offload_param")) == "cpu"
    return dist, "optimizer" in config


def _offload_device(section: Any) -> Any:
    """`device` of a DeepSpeed offload section ("none" when absent or not an object)."""
    return section.get("device", "none") if isinstance(section, dict) else "none"


def _training(v: dict[str, Any], out: N.Collected) -> None:
    per_device = C.as_int("--per_device_train_batch_size", v["per_device_train_batch_size"], 1)
    generations = C.as_int("--num_generations", v["num_generations"], 1)
    accumulation = C.as_int("--gradient_accumulation_steps", v["gradient_accumulation_steps"], 1)
    batch: dict[str, Any] = {"micro_batch_size": per_device * generations, "gradient_accumulation_steps": accumulation,
                             "num_generations": generations}
    if accumulation > 1:
        batch["steps_per_generation"] = 1
    out.set("batch", batch)
    out.set("lengths", {"max_prompt_tokens": C.as_int("--max_prompt_length", v["max_prompt_length"], 1),
                        "max_completion_tokens": C.as_int("--max_completion_length", v["max_completion_length"], 1)})
    vision: dict[str, Any] = {"images_per_prompt": 1, "max_pixels": C.as_int("--max_pixels", v["max_pixels"], 1)}
    if v["min_pixels"] is not None:
        vision["min_pixels"] = C.as_int("--min_pixels", v["min_pixels"], 1)
    if C.as_bool("--freeze_vision_modules", v["freeze_vision_modules"]):
        vision["freeze_tower"] = True
    out.set("vision", vision)
    out.set("kl_beta", C.as_float("--beta", v["beta"], 0.0))
    out.set("gradient_checkpointing", C.as_bool("--gradient_checkpointing", v["gradient_checkpointing"]))
    attn = v["attn_implementation"] or "sdpa"
    if attn not in ("sdpa", "flash_attention_2", "eager"):
        raise InputError("--attn_implementation", f"{attn!r} is not allowed; allowed: sdpa, flash_attention_2, eager")
    out.set("attention", attn)
    out.set("precision", "fp16_mixed" if C.as_bool("--fp16", v["fp16"]) else "bf16_mixed")
    if C.as_bool("--use_peft", v["use_peft"]):
        targets = v["lora_target_modules"]
        out.set("finetune", {"method": "lora", "lora_rank": C.as_int("--lora_r", v["lora_r"], 1),
                             "lora_alpha": C.as_float("--lora_alpha", v["lora_alpha"], 0),
                             "lora_dropout": C.as_float("--lora_dropout", v["lora_dropout"], 0.0, 0.99),
                             "lora_targets": targets.split(",") if isinstance(targets, str) and targets != "all-linear" else "all-linear"})
        out.notes.append("VLM-R1 loads a full reference model under ZeRO-3 even with PEFT; the plan reuses the base")
    else:
        out.set("finetune.method", "full")
    if C.as_bool("--use_vllm", v["use_vllm"]):
        raise InputError("--use_vllm", "VLM-R1's old vLLM path (a dedicated vllm_device) is not supported; allowed: false")
    out.set("rollout.engine", "hf")
