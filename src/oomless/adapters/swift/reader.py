"""ms-swift GRPO (`swift rlhf --rlhf_type grpo`): a launch script → spec, and a spec → a script.

Input: a shell script or one command line (parsed by `common.parse_shell`: continuations,
`VAR=value`, `export`, `$(expr …)`/`$((…))`). The `swift rlhf` command is the run; its environment
gives `NPROC_PER_NODE` (training processes per node, default 1), `NNODES`, `CUDA_VISIBLE_DEVICES`,
`MAX_PIXELS`/`MIN_PIXELS`. A `swift rollout` command in the same script is the vLLM server of
`--vllm_mode server`. The ms-swift and vLLM versions come from a comment line
`# oomless: ms-swift==3.4 vllm==0.8.5` (default: ms-swift 4.6 and the vLLM of its time, see
`keys.Profile`); the GPU type and host RAM from `--gpu`/`--host-ram`.

Layouts (where vLLM runs):
- ms-swift >= 3.5: `--vllm_mode colocate` (one engine per training rank, in its process) or
  `server` (a `swift rollout` on GPUs of its own: its CUDA_VISIBLE_DEVICES, or the GPUs beyond
  NPROC_PER_NODE given by `--gpus-per-node`).
- ms-swift 3.2-3.4: `--num_infer_workers` equal to NPROC_PER_NODE colocates an engine per rank;
  the default 1 puts one engine on `--vllm_device` (auto: the last visible GPU). If training
  uses that GPU too, the engine shares it with the last rank (its own process); otherwise vLLM
  has the GPU to itself.

Lengths and images: `prompts.py` (GRPO's --max_length bounds the prompt; images only where the
script names them).
Assumes (besides `keys`' sources): `--torch_dtype` unset means bf16. Export writes the newest ms-swift
version whose script reads back to the same spec, and checks that it does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ...catalog.models import ModelArch
from ...catalog.resolve import load_model
from ... import safe_paths as SP
from ...errors import InputError
from ...safe_json import load_json
from . import keys as SF
from . import layout as swift_layout
from . import ppo as swift_ppo
from . import prompts
from .layout import Run
from .liger import liger_fields
from ..args import FlagReader
from . import optim as SO
from ..common import ShellCommand, parse_flags, parse_shell, parse_version, read_directives, read_text, to_int, version_text
from ..deepspeed_json import distribution_from_deepspeed
from ...frontends.commented import commented_commands
from . import key_checks as KC

SUPPORTED_VERSIONS = ">=3.2,<5"
"""ms-swift releases whose defaults this adapter applies (3.2-3.4 num_infer_workers layouts,
3.5+ vllm_mode, 4.x tuner_type and swift/config presets); sources in `keys`."""

ReadFile = Callable[[str], str]


def import_config(path: Path, hardware: Any) -> Any:
    from .. import ImportResult

    text = read_text(path)
    idle: dict[str, Any] = {}
    data: dict[str, Any] = {}
    spec, ignored, notes = import_text(text, path.resolve().parent, hardware, str(path), idle_engine=idle, data=data)
    return ImportResult(spec, tuple(ignored), tuple(notes), idle, data.get("ref"))


# --- import ----------------------------------------------------------------------------------

def import_text(text: str, base_dir: Path, hardware: Any, source: str, overlay: Mapping[str, str] | None = None,
                idle_engine: dict[str, Any] | None = None, data: dict[str, Any] | None = None) -> tuple[dict[str, Any], list[str], list[str]]:
    """A script's text → (spec dict, ignored lines, notes). ``overlay`` maps file names next to
    the script to their text (export checks a script before writing its files); ``idle_engine``
    receives `ImportResult.idle_engine` (`layout.release_engine`) where the run generates with HF."""
    if hardware.gpu is None:
        raise InputError("--gpu", "required with --from swift: the script does not name the GPU type")
    directives = read_directives(text)
    commands = parse_shell(text, source)
    rlhf, rollout = _find_commands(commands, source)
    parsed = parse_flags(rlhf.argv[2:], source)
    server = parsed.get("vllm_mode", [""])[-1:] == ["server"] or "vllm_server_host" in parsed
    documented = _documented_rollout(text, source) if rollout is None and server else None
    profile, vllm, notes = _versions(directives, parsed)
    notes.extend(KC.other_release_notes(parsed, profile.version))
    gated = _gate(parsed, profile)
    flags = FlagReader(parsed, f"ms-swift {version_text(profile.version)}")
    flags.ignored.extend(gated)

    def read(name: str) -> str:
        if overlay is not None and name in overlay:
            return overlay[name]
        SP.checked_path(name, "file")
        candidate = Path(name) if Path(name).is_absolute() else base_dir / name
        if not SP.exists(candidate) and SP.exists(Path(name)):
            candidate = Path(name)
        return read_text(candidate)

    run = swift_layout.Run(profile, vllm, flags, rlhf.env, _arch(flags, base_dir), notes, transformers=directives.get("transformers"))
    rlhf_type = flags.str("rlhf_type", "dpo")
    if rlhf_type not in ("grpo", "ppo"):
        raise InputError("--rlhf_type", f"{rlhf_type!r}: oomless plans grpo and ppo runs (ms-swift's default is dpo)")
    spec = _spec(run, rollout or documented, hardware, read)
    if "vllm" in directives and spec["rollout"]["engine"] != "hf":
        # the release the directive names; ms-swift sends vLLM one completion per request (RequestConfig(n=1),
        # swift/rlhf_trainers/rollout_mixin.py; the sampler repeats each prompt num_generations times)
        spec["rollout"].update({"vllm_version": version_text(vllm), "samples_per_request": 1})
    if "transformers" in directives:
        spec["transformers_version"] = directives["transformers"]
    if documented is not None and spec["rollout"]["engine"] == "vllm_separate":
        notes.append(f"--vllm_mode server: planned the vLLM server as the `swift rollout` command the script "
                     f"documents in its comments (line {documented.line}), started in another terminal")
    if idle_engine is not None and spec["rollout"]["engine"] == "hf" and spec.get("algorithm") != "ppo":  # PPO: HF only
        idle_engine.update(swift_layout.release_engine(run))
    if data is not None:
        data["ref"] = prompts.data_ref(flags, read)
    ignored = flags.leftover(SF.NO_MEMORY_EFFECT, SF.NOT_MODELLED, unknown=KC.unread_why)
    return spec, ignored, notes



def file_version(text: str, source: str) -> tuple[int, ...]:
    """The ms-swift release `import_text` reads ``text`` as (its directive, else the newest
    release that has every flag given): the dialect `fit --from --write` patches it in."""
    rlhf, _ = _find_commands(parse_shell(text, source), source)
    profile, _, _ = _versions(read_directives(text), parse_flags(rlhf.argv[2:], source))
    return profile.version


def _versions(directives: Mapping[str, str], flags: Mapping[str, Any]) -> tuple[SF.Profile, tuple[int, ...], list[str]]:
    notes: list[str] = []
    unknown = sorted(set(directives) - {"ms-swift", "vllm", "transformers"})
    if unknown:
        raise InputError(f"oomless directive {unknown[0]}", "unknown key; allowed: ms-swift, vllm, transformers")
    if "ms-swift" in directives:
        version = parse_version("ms-swift version", directives["ms-swift"])
        if not SF.MIN_VERSION <= version < SF.MAX_VERSION:
            raise InputError("ms-swift version", f"{directives['ms-swift']} is not supported; supported: {SUPPORTED_VERSIONS}")
    else:
        version, why = _version_of_flags(flags)
        notes.append(f"ms-swift {version_text(version)} assumed{why} (add `# oomless: ms-swift==X.Y` to the script)")
    profile = SF.Profile(version)
    vllm = parse_version("vllm version", directives["vllm"]) if "vllm" in directives else profile.default_vllm
    if "vllm" not in directives:
        notes.append(f"vLLM {version_text(vllm)} assumed for ms-swift {version_text(version)} (add `vllm==X.Y` to the directive)")
    return profile, vllm, notes


def _version_of_flags(flags: Mapping[str, Any]) -> tuple[tuple[int, ...], str]:
    """The newest ms-swift version that has every flag given: a flag removed in 3.5
    (`--num_infer_workers`) means the script was written for 3.4."""
    removed = [(SF.FLAGS[n][1], n) for n in flags if n in SF.FLAGS and SF.FLAGS[n][1] is not None]
    if not removed:
        return SF.LATEST, ""
    gone, name = min(removed)
    major, minor = gone[0], gone[1] if len(gone) > 1 else 0
    version = (major, minor - 1) if minor > 0 else SF.LATEST
    if version < SF.MIN_VERSION or version == SF.LATEST:
        return SF.LATEST, ""
    return version, f" (--{name} was removed in ms-swift {version_text(gone)})"


def _gate(flags: dict[str, list[str]], profile: SF.Profile) -> list[str]:
    """Drop flags the stated ms-swift version does not have (its parser would reject them)."""
    lines = []
    for name in list(flags):
        first, gone, _ = SF.FLAGS.get(name, (SF.MIN_VERSION, None, ""))
        if name in ("train_type", "tuner_type") or first <= profile.version and (gone is None or profile.version < gone):
            continue
        del flags[name]
        span = f"{version_text(first)}" + (f" to before {version_text(gone)}" if gone else " on")
        lines.append(f"--{name}: not a flag of ms-swift {version_text(profile.version)} (it exists from {span})")
    return lines


def _find_commands(commands: list[ShellCommand], source: str) -> tuple[ShellCommand, ShellCommand | None]:
    def sub(cmd: ShellCommand) -> tuple[str, str]:
        return Path(cmd.argv[0]).name, (cmd.argv[1] if len(cmd.argv) > 1 else "")

    if any(sub(c) == ("megatron", "rlhf") for c in commands):
        raise InputError(source, "`megatron rlhf` (Megatron-SWIFT) is not supported; use `swift rlhf`")
    rlhf = [c for c in commands if sub(c) == ("swift", "rlhf")]
    if not rlhf:
        raise InputError(source, "no `swift rlhf` command found")
    if len(rlhf) > 1:
        raise InputError(source, f"{len(rlhf)} `swift rlhf` commands (lines {', '.join(str(c.line) for c in rlhf)}); give one")
    rollout = [c for c in commands if sub(c) == ("swift", "rollout")]
    return rlhf[0], (rollout[0] if rollout else None)


def _documented_rollout(text: str, source: str) -> ShellCommand | None:
    """The one `swift rollout` command the script's comments hold (ms-swift's multi-process
    examples document the server that way, e.g. plugin/deepeyes/deepeyes.sh), or None when there
    is none or more than one to choose from."""
    found = [c for c in commented_commands(text, source)
             if Path(c.argv[0]).name == "swift" and len(c.argv) > 1 and c.argv[1] == "rollout"]
    return found[0] if len(found) == 1 else None


def _arch(flags: FlagReader, base_dir: Path) -> ModelArch:
    model = flags.str("model")
    if model is None:
        raise InputError("--model", "required: the model id or path")
    local = base_dir / model
    try:
        return load_model(str(local) if not Path(model).is_absolute() and SP.exists(local) else model)
    except InputError as err:
        raise InputError("--model", err.message) from None


def _spec(run: Run, rollout: ShellCommand | None, hardware: Any, read: ReadFile) -> dict[str, Any]:
    f = run.flags
    spec: dict[str, Any] = {"model": f.str("model")}
    finetune, method = _finetune(f, run.profile)
    distribution, half, ds_optimizer, keeps_master = _distribution(f, run.profile, read)
    spec["finetune"] = finetune
    spec["distribution"] = distribution
    sequence_parallel = f.int("sequence_parallel_size", 1, minimum=1)
    if sequence_parallel > 1:
        spec["distribution"] = {**distribution, "sequence_parallel_size": sequence_parallel}
    spec["precision"] = _precision(f, half, keeps_master, method, run.notes)
    spec.update(SO.optimizer_fields(f, run.profile.version, run.transformers, ds_optimizer, distribution, run.notes))
    spec["gradient_checkpointing"] = f.bool("gradient_checkpointing", True)
    attn = f.str("attn_impl")
    if attn is not None and attn.lower() != "none":
        if attn not in SF.ATTENTION:
            raise InputError("--attn_impl", f"{attn!r} is not planned; allowed: {', '.join(SF.ATTENTION)}")
        spec["attention"] = SF.ATTENTION[attn]
    spec.update(liger_fields(f.bool("use_liger_kernel", False), run.profile.version, f.str("rlhf_type") == "ppo"))
    run.nproc = _int_env(run.env, "NPROC_PER_NODE", 1)
    nodes = _int_env(run.env, "NNODES", 1)
    if f.str("rlhf_type") == "ppo":
        spec.update(swift_ppo.ppo_sections(run, method))
        spec["lengths"] = prompts.lengths(run, {})
        spec["hardware"] = _hardware(hardware, run.nproc, nodes, run.env)
        return spec
    beta = f.float("beta", 0.04)
    spec["kl_beta"] = beta
    estimator = f.str("advantage_estimator", "grpo")  # exists from 3.10 (gated)
    if estimator not in ("grpo", "rloo"):
        raise InputError("--advantage_estimator", f"{estimator!r} is not planned; allowed: grpo, rloo")
    if estimator == "rloo":
        spec["algorithm"] = "rloo"
    reward = f.list("reward_model")
    if reward:
        spec["reward_model"] = {"model": reward[0]}
    vision = prompts.vision(run, method)
    if vision:
        spec["vision"] = vision
    layout = swift_layout.layout(run, rollout, hardware, method, beta, bool(reward))
    spec["rollout"] = layout.rollout
    if layout.placement:
        spec["placement"] = layout.placement
    spec["batch"] = _batch(run, nodes)
    spec["lengths"] = prompts.lengths(run, spec.get("vision", {}), spec["rollout"].get("max_model_len"))
    spec["hardware"] = _hardware(hardware, layout.gpus_per_node, nodes, run.env)
    return spec


def _int_env(env: Mapping[str, str], name: str, default: int) -> int:
    return to_int(name, env[name], minimum=1) if env.get(name) else default


def _finetune(f: FlagReader, profile: SF.Profile) -> tuple[dict[str, Any], str]:
    name = profile.tuner_flag
    other = "train_type" if name == "tuner_type" else "tuner_type"
    kind = f.str(name) or f.str(other) or "lora"
    if f.has(other):
        f.ignored.append(f"--{other}: read as --{name} (ms-swift {version_text(profile.version)} spells it --{name})")
    if kind not in ("full", *SF.LORA_TYPES):
        raise InputError(f"--{name}", f"{kind!r} is not planned; allowed: full, lora (qlora: lora with --quant_bits 4)")
    bits = f.int("quant_bits")
    method = f.str("quant_method")
    if bits is not None and bits != 4:
        raise InputError("--quant_bits", f"{bits} is not planned; allowed: 4 (bnb NF4, QLoRA)")
    if kind == "full":
        if bits:
            raise InputError("--quant_bits", "a quantized base needs --train_type lora")
        for flag in ("lora_rank", "lora_alpha", "lora_dropout", "target_modules", "lora_dtype"):
            f.ignore(flag, f"no effect: --{name} full")
        return {"method": "full"}, "full"
    if bits == 4 and method not in (None, "bnb"):
        raise InputError("--quant_method", f"{method!r} is not planned; allowed: bnb")
    targets = f.list("target_modules", ["all-linear"]) or ["all-linear"]
    special = [t for t in targets if t.startswith("all-") and t != "all-linear"]
    if special:
        raise InputError("--target_modules", f"{special[0]!r} is not planned; allowed: all-linear or module names")
    out = {
        "method": "qlora" if bits == 4 else "lora",
        "lora_rank": f.int("lora_rank", 8, minimum=1),
        "lora_alpha": float(f.float("lora_alpha", 32.0)),
        "lora_dropout": f.float("lora_dropout", 0.05),
        "lora_targets": "all-linear" if "all-linear" in targets else targets,
    }
    if bits == 4:  # QuantizeArguments.bnb_4bit_use_double_quant, default True (swift/arguments/base_args/quant_args.py)
        out["double_quant"] = f.bool("bnb_4bit_use_double_quant", True)
        if f.str("lora_dtype") in ("float32", "fp32"):  # ms-swift casts the adapters to it (tuners/lora_layers.py)
            out["adapter_dtype"] = "fp32"
    return out, out["method"]


def _distribution(f: FlagReader, profile: SF.Profile, read: ReadFile) -> tuple[dict[str, Any], str, str | None, bool]:
    """(distribution keys, DeepSpeed half mode, DeepSpeed optimizer, whether DeepSpeed/FSDP runs)."""
    preset = f.str("deepspeed")
    fsdp = f.str("fsdp")
    if fsdp:
        offload = {"offload_params": True, "offload_optimizer": True} if "offload" in fsdp else {}
        return {"strategy": "fsdp", **offload}, "auto", None, True
    if preset is None or preset.lower() == "none":
        return {"strategy": "ddp"}, "auto", None, False
    if preset in profile.presets:
        read_ds = distribution_from_deepspeed(profile.presets[preset], f"--deepspeed {preset}")
        return read_ds.distribution, read_ds.half, None, True
    if not preset.endswith(".json"):
        raise InputError("--deepspeed", f"{preset!r} is not a preset ({', '.join(profile.presets)}) or a .json file")
    config = load_json(read(preset), preset)
    read_ds = distribution_from_deepspeed(config, preset)
    f.ignored.extend(read_ds.ignored)
    return read_ds.distribution, read_ds.half, read_ds.optimizer, True


def _precision(f: FlagReader, half: str, keeps_master: bool, method: str, notes: list[str]) -> str:
    """fp16 → fp16_mixed; DeepSpeed (any stage, zero0 too) or FSDP keeps fp32 master weights →
    bf16_mixed; plain DDP trains bf16 weights in bf16 (pure), and LoRA adapters in --lora_dtype
    (None: the model's dtype, bf16; float32: mixed)."""
    dtype = f.str("torch_dtype")
    if dtype is None or dtype.lower() == "none":
        notes.append("--torch_dtype unset: the model's config dtype, taken as bfloat16")
        dtype = "bfloat16"
    if dtype in ("float32", "fp32", "float"):
        raise InputError("--torch_dtype", "float32 training is not planned; allowed: bfloat16, float16")
    if dtype not in SF.TORCH_DTYPES:
        raise InputError("--torch_dtype", f"{dtype!r} is not a dtype; allowed: bfloat16, float16")
    lora_dtype = f.str("lora_dtype") if method != "full" else None
    if lora_dtype not in (None, "bfloat16", "bf16", "float32", "fp32", "none", "None"):
        raise InputError("--lora_dtype", f"{lora_dtype!r} is not planned; allowed: bfloat16, float32")
    if half == "fp16" or SF.TORCH_DTYPES[dtype] == "fp16":
        return "fp16_mixed"
    if keeps_master or lora_dtype in ("float32", "fp32"):
        return "bf16_mixed"
    return "bf16"


def _batch(run: Run, nodes: int) -> dict[str, Any]:
    f = run.flags
    micro = f.int("per_device_train_batch_size", 1, minimum=1)
    accumulation = f.int("gradient_accumulation_steps", minimum=1)
    if accumulation is None:
        accumulation = 1
        run.notes.append("--gradient_accumulation_steps unset: 1 (ms-swift's GRPO default)")
    generations = f.int("num_generations", 8, minimum=1)
    out: dict[str, Any] = {"micro_batch_size": micro, "gradient_accumulation_steps": accumulation,
                           "num_generations": generations}
    if f.bool("padding_free", False):
        out["padding_free"] = True
    world = run.nproc * nodes
    steps = f.int("steps_per_generation", minimum=1)
    generation_batch = f.int("generation_batch_size", minimum=1)
    if generation_batch is not None:
        if steps is not None:
            raise InputError("--generation_batch_size", "give it or --steps_per_generation, not both")
        if generation_batch % (micro * world):
            raise InputError("--generation_batch_size", f"{generation_batch} is not a multiple of "
                             f"per_device_train_batch_size × processes = {micro * world}")
        steps = generation_batch // (micro * world)
    if steps is not None:
        out["steps_per_generation"] = steps
    teacher = f.has("teacher_model") or f.has("teacher_model_server")
    if generations < 2 and not (teacher and run.profile.teacher_allows_one_generation):
        raise InputError("--num_generations", f"{generations}: GRPO needs at least 2 completions per prompt "
                         f"(ms-swift {version_text(run.profile.version)}'s check"
                         + ("; 1 is allowed with --teacher_model)" if run.profile.teacher_allows_one_generation else ")"))
    if run.profile.generation_batch_divides:
        per_rollout, formed = micro * world * (steps or accumulation), "a generation batch"
    elif run.profile.accumulation_in_generation_batch:
        per_rollout, formed = micro * world * accumulation, "per_device_train_batch_size × processes × gradient_accumulation_steps"
    else:
        per_rollout, formed = micro * world, "per_device_train_batch_size × processes"
    if per_rollout % generations:
        raise InputError("--num_generations", f"{generations} does not divide the {per_rollout} completions of "
                         f"{formed} (ms-swift {version_text(run.profile.version)} rejects this)")
    return out


# --- layouts ---------------------------------------------------------------------------------

def _hardware(hw: Any, gpus_per_node: int | None, nodes: int, env: Mapping[str, str]) -> dict[str, Any]:
    gpus = gpus_per_node
    if hw.gpus_per_node is not None and gpus is not None and hw.gpus_per_node != gpus:
        raise InputError("--gpus-per-node", f"{hw.gpus_per_node}, but the script runs on {gpus} GPUs per node "
                         f"(NPROC_PER_NODE={env.get('NPROC_PER_NODE', '1')})")
    gpus = gpus if gpus is not None else hw.gpus_per_node
    if hw.num_nodes is not None and env.get("NNODES") and hw.num_nodes != nodes:
        raise InputError("--nodes", f"{hw.num_nodes}, but the script sets NNODES={env['NNODES']}")
    out: dict[str, Any] = {"gpu": hw.gpu, "gpus_per_node": gpus, "num_nodes": hw.num_nodes or nodes}
    if hw.host_ram_gib is not None:
        out["host_ram_gib"] = hw.host_ram_gib
    return out
