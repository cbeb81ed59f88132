"""TRL GRPO (`trl grpo`, or `accelerate launch` of a GRPOTrainer script): config → spec, spec → config.
RLOO launches (`trl rloo`, rloo*.py: TRL >= 0.22) are read the same way with RLOOConfig's keys and
defaults as `algorithm: rloo`; PPO launches (ppo*.py) by `ppo.py` (`trainers.py` tells them apart).

How the files are passed (the way TRL's own CLI takes them):
- PATH is a `trl grpo --config` YAML: GRPOConfig keys, ModelConfig keys (`model_name_or_path`,
  `use_peft`, `lora_r`, `dtype`, ...), GRPOScriptArguments keys, and `accelerate_config` (a path,
  relative to the YAML or the working directory, or a name TRL ships: zero1, zero2, zero3, fsdp1,
  fsdp2, multi_gpu, single_gpu; `trl/cli/accelerate_config.py`). Other keys the parser does not
  consume are `accelerate launch` options (e.g. `num_processes`), as TRL passes them on.
- Or PATH is a launch script / file of CLI args: `trl grpo --config X.yaml --flag value ...`,
  `accelerate launch [--config_file A.yaml --num_processes N ...] train.py --flag value ...`, or
  `torchrun --nproc_per_node N train.py ...`; a `trl vllm-serve` command in it is the vLLM server.
- The DeepSpeed JSON comes from the GRPOConfig key `deepspeed` (a path or an inline dict) or the
  accelerate config's `deepspeed_config.deepspeed_config_file`; inline accelerate DeepSpeed
  settings (`zero_stage`, `offload_*_device`) are read as accelerate expands them.
- A comment `# oomless: trl==1.16 vllm==0.21 max_prompt_tokens=512` states the versions and the
  longest prompt: TRL 0.26+ does not truncate prompts (max_prompt_length None, gone in 0.28).
  Without it the prompt bound is vllm_max_model_length - max_completion_length, else the model's
  max_position_embeddings - max_completion_length (noted).

Versions: TRL 0.14 … 1.x. Each key is read under the stated release (`# oomless: trl==0.19`;
without one, TRL 1.16): its default from the generated key tables (GRPOConfig/ModelConfig, else
TrainingArguments), and the release's batch rule, vLLM placement, colocated-engine sizing and
log-prob path (`versions.py`, each cited to that release's grpo_trainer.py / grpo_config.py).
TRL 1.16.0's defaults (the key tables hold every release's): beta 0.0, per_device_train_batch_size 8,
num_generations 8, max_completion_length 512, vllm_mode colocate at utilization 0.3, sleep level 2.
A stated vLLM release reaches `rollout.vllm_version` (`versions.stated_vllm`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ...catalog.models import ModelArch
from ...catalog.resolve import load_model
from ... import safe_paths as SP
from ...errors import InputError
from ...memory.vllm import GRAPHS_IN_BUDGET_FROM
from . import hardware as TH
from . import launch as TL
from . import prompts
from . import optim as TO
from ..common import parse_version, read_directives, read_text, to_bool, to_float, to_int, version_text
from ..deepspeed_json import distribution_from_deepspeed
from .. import key_tables as KT
from .keys import LEGACY_KEYS, NO_MEMORY_EFFECT, NOT_MODELLED, OPEN_R1_NO_MEMORY_EFFECT, PPO_NO_MEMORY_EFFECT
from . import trainers as TT
from .finetune import finetune_section
from .liger import liger_fields
from . import versions as TV
from .versions import LATEST, SUPPORTED_VERSIONS

VLLM_DEFAULT = (0, 21)


def read_legacy(values: Mapping[str, Any], notes: list[str], version: tuple[int, ...] = LATEST,
                trainer: str = TT.GRPO) -> dict[str, Any]:
    """``values`` with keys of earlier TRL releases renamed to their 1.x names (a 1.x key given
    too wins); every key that TRL ``version``'s ``trainer`` config does not have but another
    release does is named in a note with the releases that have it (from the generated key table)."""
    out = dict(values)
    current = ((TT.key_table(trainer), version), (KT.transformers_table(), None))  # transformers release unknown
    for name in values:
        meaning = LEGACY_KEYS[name][1] if name in LEGACY_KEYS else ""
        note = KT.other_release_note(name, current, f"TRL {version_text(version)}", meaning)
        if note:
            notes.append(note)
    for old, (new, _) in LEGACY_KEYS.items():
        if old not in out:
            continue
        value = out.pop(old)
        if new == old:
            out[f"legacy.{old}"] = value
        else:
            out.setdefault(new, value)
    return out


class Keys:
    """Config keys (YAML values or CLI strings) with typed access that records what was read."""

    def __init__(self, values: Mapping[str, Any], version: tuple[int, ...] = LATEST, trainer: str = TT.GRPO) -> None:
        self.values = dict(values)
        self.version = version
        """The TRL release the keys are read under (defaults from the key tables)."""
        self.trainer = trainer
        """grpo, ppo or rloo (`trainers.trainer_of`): whose config class's key table gives the defaults."""
        self.table = TT.key_table(trainer)
        self.version_stated = True
        self.transformers: str | None = None  # the `# oomless: transformers==X` release, if stated
        self.used: set[str] = set()
        self.ignored: list[str] = []

    def default(self, name: str, fallback: Any = None) -> Any:
        """``name``'s default in this TRL release (versions.default: the generated key tables)."""
        return TV.default(name, self.version, fallback, self.table)

    def get(self, name: str, default: Any = None) -> Any:
        self.used.add(name)
        value = self.values.get(name, default)
        return default if isinstance(value, str) and value.lower() == "none" else value

    def bool(self, name: str, default: bool | None) -> bool | None:
        value = self.get(name)
        return default if value is None else to_bool(name, value)

    def int(self, name: str, default: int | None = None) -> int | None:
        value = self.get(name)
        return default if value is None else to_int(name, value, minimum=1)

    def float(self, name: str, default: float) -> float:
        value = self.get(name)
        return default if value is None else to_float(name, value)

    def ignore(self, name: str, why: str) -> None:
        if name in self.values:
            self.used.add(name)
            self.ignored.append(f"{name}: {why}")

    def leftover(self) -> list[str]:
        lines = list(self.ignored)
        for name in self.values:
            if name in self.used:
                continue
            if name in NOT_MODELLED:
                lines.append(f"{name}: {NOT_MODELLED[name]}")
            elif name in NO_MEMORY_EFFECT or name in OPEN_R1_NO_MEMORY_EFFECT or (
                    self.trainer == TT.PPO and name in PPO_NO_MEMORY_EFFECT):
                lines.append(f"{name}: no effect on memory")
            else:
                lines.append(f"{name}: {KT.unread_key_why((self.table, KT.transformers_table()), name)}")
        return lines


def import_config(path: Path, hardware: Any) -> Any:
    from .. import ImportResult

    idle: dict[str, Any] = {}
    data: dict[str, Any] = {}
    spec, ignored, notes = import_path(path, hardware, idle_engine=idle, data=data)
    return ImportResult(spec, tuple(ignored), tuple(notes), idle, data.get("ref"))


def file_reader(base: Path, overlay: Mapping[str, str] | None = None) -> Callable[[str], str]:
    """How a launch's files are found: ``overlay``'s text first, then beside the config
    (``base``), else from the current folder (where the user runs the launch)."""
    def read(name: str) -> str:
        if overlay is not None and name in overlay:
            return overlay[name]
        SP.checked_path(name, "file")
        candidate = base / name if not Path(name).is_absolute() else Path(name)
        return read_text(candidate if SP.exists(candidate) or not SP.exists(Path(name)) else Path(name))
    return read


def import_path(path: Path, hardware: Any, overlay: Mapping[str, str] | None = None,
                idle_engine: dict[str, Any] | None = None, data: dict[str, Any] | None = None) -> tuple[dict, list, list]:
    """(spec dict, ignored, notes) of a YAML config or a launch script; ``overlay`` maps file
    names to text to read instead of the disk (export checks its files before writing);
    ``idle_engine`` receives `ImportResult.idle_engine` where the run generates with HF: the
    colocated engine TRL builds at TP 1 (batch × steps sequences, its fixed max_num_batched_tokens,
    its vLLM's CUDA graphs)."""
    base = path.resolve().parent if overlay is None else Path(".")
    read = file_reader(base, overlay)
    if hardware.gpu is None:
        raise InputError("--gpu", "required with --from trl: the config does not name the GPU type")
    text = read(path.name) if overlay is not None else read_text(path)
    launch = TL.read_launch(path.name if overlay is not None else str(path), text, read)
    notes: list[str] = list(launch.notes)
    if data is not None:
        data["ref"] = prompts.data_ref(launch.config, launch.script)
    directives = read_directives(launch.directives_text)
    trainer = TT.trainer_of(launch.script, directives.get("trainer"))
    trl_version, vllm, prompt_directive = _versions(directives, notes, trainer, launch.config)
    keys = Keys(read_legacy(launch.config, notes, trl_version, trainer), trl_version, trainer)
    keys.version_stated, keys.transformers = "trl" in directives, directives.get("transformers")
    if TT.on_policy(trainer, trl_version):
        from .ppo import ppo_spec

        spec = ppo_spec(keys, launch, hardware, prompt_directive, read, notes, base)
        return spec, launch.ignored + keys.leftover(), notes
    if trainer == TT.RLOO:
        TT.read_rloo_keys(keys, notes)
    arch = _arch(keys, base)
    spec = _spec(keys, launch, arch, hardware, vllm, prompt_directive, read, notes)
    if "vllm" in directives:
        TV.stated_vllm(spec["rollout"], vllm, trl_version)
    spec.update({"transformers_version": directives["transformers"]} if "transformers" in directives else {})
    if idle_engine is not None and spec["rollout"]["engine"] == "hf":
        idle_engine["cuda_graphs_in_budget"] = vllm >= GRAPHS_IN_BUDGET_FROM
        if trl_version >= TV.COLOCATE_BATCHED_TOKENS_FROM:
            idle_engine["max_num_batched_tokens"] = TL.COLOCATE_MAX_NUM_BATCHED_TOKENS
        batch = spec["batch"]
        steps = batch["gradient_accumulation_steps"] if trl_version < TV.MAX_NUM_SEQS_WITH_STEPS else \
            batch.get("steps_per_generation") or batch["gradient_accumulation_steps"]
        idle_engine["max_num_seqs"] = batch["micro_batch_size"] * steps  # × vLLM TP 1
    ignored = launch.ignored + keys.leftover()
    return spec, ignored, notes


def _versions(directives: Mapping[str, str], notes: list[str], trainer: str = TT.GRPO,
              config: Mapping[str, Any] | None = None) -> tuple[tuple[int, ...], tuple[int, ...], int | None]:
    unknown = sorted(set(directives) - {"trl", "vllm", "max_prompt_tokens", "trainer", "transformers"})
    if unknown:
        raise InputError(f"oomless directive {unknown[0]}", "unknown key; allowed: trl, vllm, max_prompt_tokens, trainer, transformers")
    assumed = TT.default_release(trainer, LATEST, config or {})
    version = parse_version("trl version", directives["trl"]) if "trl" in directives else assumed
    if not TV.MIN_VERSION <= version < TV.MAX_VERSION:
        raise InputError("trl version", f"{directives['trl']} is not supported; supported: {SUPPORTED_VERSIONS}")
    TT.check_release(trainer, version)
    if "trl" not in directives:
        newest = {TT.PPO: " (the newest release with PPOTrainer)", TT.RLOO: " (the newest release with the old RLOOTrainer)"
                  }.get(trainer, "") if assumed != LATEST else ""
        notes.append(f"TRL {version_text(assumed)}{newest} assumed (add `# oomless: trl==X.Y` to the config)")
    vllm = parse_version("vllm version", directives["vllm"]) if "vllm" in directives else VLLM_DEFAULT
    prompt = to_int("max_prompt_tokens", directives["max_prompt_tokens"], minimum=1) if "max_prompt_tokens" in directives else None
    return version, vllm, prompt


def _arch(keys: Keys, base: Path) -> ModelArch:
    model = keys.get("model_name_or_path")
    if model is None:
        raise InputError("model_name_or_path", "required: the model id or path")
    if not isinstance(model, str):  # a flag given two values, a YAML list or number (issue 15 fuzzing)
        raise InputError("model_name_or_path", f"{model!r}: one model id or path")
    local = base / model
    try:
        return load_model(str(local) if not Path(model).is_absolute() and SP.exists(local) else str(model))
    except InputError as err:
        raise InputError("model_name_or_path", err.message) from None


def _spec(keys: Keys, launch: TL.Launch, arch: ModelArch, hardware: Any, vllm: tuple[int, ...],
          prompt_directive: int | None, read: Callable[[str], str], notes: list[str]) -> dict[str, Any]:
    spec: dict[str, Any] = {"model": str(keys.get("model_name_or_path"))}
    if keys.trainer == TT.RLOO:
        spec["algorithm"] = "rloo"
    finetune = finetune_section(keys, arch)
    spec["finetune"] = finetune
    distribution, half, ds_optimizer, keeps_master = _distribution(keys, launch, read)
    spec["distribution"] = distribution
    spec["precision"] = _precision(keys, half, keeps_master, finetune["method"], notes, launch)
    spec.update(TO.optimizer_fields(keys, ds_optimizer, distribution, notes))
    spec["gradient_checkpointing"] = keys.bool("gradient_checkpointing", bool(keys.default("gradient_checkpointing", False)))
    attention = _attention(keys.get("attn_implementation"), notes)
    if attention:
        spec["attention"] = attention
    spec.update(liger_fields(keys, notes))  # per release: the model kernels, and where it is Liger's the fused loss
    if "logits" not in spec:
        spec["logits"] = _logits(keys)
    spec["kl_beta"] = keys.float("beta", float(keys.default("beta", 0.0)))
    if keys.get("reward_model_name_or_path"):
        spec["reward_model"] = {"model": str(keys.get("reward_model_name_or_path"))}
    if not launch.processes_stated and hardware.gpus_per_node is not None:
        launch = TH.processes_from_hardware(keys, launch, hardware.gpus_per_node, notes)
    processes, nodes = launch.processes_per_node, launch.num_machines
    spec["batch"] = _batch(keys, processes * nodes)
    steps = spec["batch"].get("steps_per_generation") or spec["batch"]["gradient_accumulation_steps"]
    if keys.version < TV.MAX_NUM_SEQS_WITH_STEPS:
        steps = spec["batch"]["gradient_accumulation_steps"]
    rollout, gpus = TL.rollout(keys, launch, arch, vllm, hardware, spec["batch"]["micro_batch_size"] * steps, notes,
                               prompts.prompt_truncation(keys), prompts.completion_length(keys))
    spec["rollout"] = rollout
    spec["lengths"] = prompts.lengths(keys, arch, rollout, prompt_directive, spec, notes)
    vision = prompts.example_vision(launch.script, arch, notes)
    if vision:
        spec["vision"] = vision
    spec["hardware"] = TH.hardware_section(hardware, gpus, nodes, launch, notes)
    return spec


def _logits(keys: Keys) -> str:
    if keys.bool("cast_lm_head_to_fp32", False):
        return "full_fp32"
    if keys.version >= TV.CHUNKED_HEAD_FROM:  # the tiled LM head (trl/kernels/chunked_logprob.py)
        return "chunked_head"
    return "full_bf16"  # TRL <= 1.14: full logits, log-softmax row by row in the model dtype (versions.py)


def _distribution(keys: Keys, launch: TL.Launch, read: Callable[[str], str]) -> tuple[dict, str, str | None, bool]:
    ds = keys.get("deepspeed")
    fsdp = keys.get("fsdp")
    if ds:
        config = ds if isinstance(ds, Mapping) else _json(read, str(ds))
        got = distribution_from_deepspeed(config, "deepspeed" if isinstance(ds, Mapping) else str(ds))
        keys.ignored.extend(got.ignored)
        return got.distribution, got.half, got.optimizer, True
    if fsdp:
        offload = "offload" in (fsdp if isinstance(fsdp, str) else " ".join(fsdp))
        return {"strategy": "fsdp", **({"offload_params": True, "offload_optimizer": True} if offload else {})}, "auto", None, True
    return TL.accelerate_distribution(launch, read)


def _json(read: Callable[[str], str], name: str) -> Any:
    from ...safe_json import load_json

    return load_json(read(name), name)


def _precision(keys: Keys, half: str, keeps_master: bool, method: str, notes: list[str], launch: TL.Launch) -> str:
    """fp16 → fp16_mixed. DeepSpeed/FSDP keep fp32 master weights → bf16_mixed. Plain DDP: full
    fine-tuning of bf16 weights is pure bf16, of fp32 weights (ModelConfig's default dtype) under
    bf16 autocast the same 16 B/param as mixed; PEFT adapters are fp32 (autocast_adapter_dtype)."""
    fp16 = keys.bool("fp16", False)
    bf16 = keys.bool("bf16", None)
    if bf16 is None and not fp16 and keys.version < TV.BF16_DEFAULTED_FROM:
        bf16 = _bf16_before_0_19(keys, half, launch)
    dtype = str(keys.get("dtype", "float32"))
    if dtype not in ("float32", "bfloat16", "float16", "auto"):
        raise InputError("dtype", f"{dtype!r} is not allowed; allowed: auto, bfloat16, float16, float32")
    if fp16 or half == "fp16":
        return "fp16_mixed"
    if bf16 is False:
        raise InputError("bf16", "false without fp16 is fp32 training, which is not planned")
    if dtype == "float16":
        raise InputError("dtype", "float16 weights under bf16 autocast are not planned; use bfloat16")
    if dtype == "auto":
        notes.append("dtype auto: the checkpoint's dtype, taken as bfloat16")
    if method != "full" and dtype == "float32":
        keys.ignored.append("dtype: float32 base weights are planned as bf16 (2 B/param fewer than TRL loads); "
                            "set dtype: bfloat16")
    if keeps_master or method != "full" or dtype == "float32":
        return "bf16_mixed"
    return "bf16"


def _bf16_before_0_19(keys: Keys, half: str, launch: TL.Launch) -> bool:
    """TRL < 0.19: an unset bf16 is TrainingArguments' False, so the run is bf16 only where
    accelerate's mixed precision or the DeepSpeed config says bf16."""
    if half == "bf16" or str(launch.accelerate.get("mixed_precision", "")).lower() == "bf16":
        return True
    raise InputError("bf16", f"unset: TRL {version_text(keys.version)} then trains in fp32 (TrainingArguments' "
                     f"default; {TT.CONFIG_CLASS[keys.trainer]} defaults it from 0.19), which is not planned; set bf16: true")


def _attention(value: Any, notes: list[str]) -> str | None:
    if value is None:
        return None
    text = str(value)
    if text in ("sdpa", "eager", "flash_attention_2"):
        return text
    if "flash" in text:
        notes.append(f"attn_implementation {text}: planned as flash_attention_2")
        return "flash_attention_2"
    raise InputError("attn_implementation", f"{text!r} is not planned; allowed: sdpa, eager, flash_attention_2")


def _batch(keys: Keys, world: int) -> dict[str, Any]:
    micro = keys.int("per_device_train_batch_size", keys.default("per_device_train_batch_size", 8))
    accumulation = keys.int("gradient_accumulation_steps", keys.default("gradient_accumulation_steps", 1))
    generations = keys.int("num_generations", keys.default("num_generations", 8))
    if keys.version < TV.COMPLETIONS_PER_DEVICE_BATCH:  # TRL 0.14: the batch counts prompts
        micro *= generations
    out: dict[str, Any] = {"micro_batch_size": micro, "gradient_accumulation_steps": accumulation,
                           "num_generations": generations}
    if "padding_free" in keys.values:  # SFTConfig's key; no GRPOConfig in the key table has it
        keys.ignore("padding_free", "not a GRPOConfig key in any TRL release (SFTConfig's): GRPOTrainer pads every "
                    "batch, and TRL's parser refuses the key: planned padded")
    steps = keys.int("steps_per_generation")
    generation_batch = keys.int("generation_batch_size")
    if generation_batch is not None:
        if steps is not None:
            raise InputError("generation_batch_size", "give it or steps_per_generation, not both (TRL)")
        if generation_batch % (micro * world):
            raise InputError("generation_batch_size", f"{generation_batch} is not a multiple of "
                             f"per_device_train_batch_size × processes = {micro * world} (TRL)")
        steps = generation_batch // (micro * world)
    if steps is not None:
        out["steps_per_generation"] = steps
    if out["num_generations"] < 2:
        raise InputError("num_generations", f"{out['num_generations']}: {keys.trainer.upper()} needs at least 2 "
                         "completions per prompt (TRL)")
    rule = TV.generation_batch_rule(keys.version, micro, world, accumulation, steps)
    if rule is not None and rule[0] % out["num_generations"]:
        total, formed = rule
        raise InputError("num_generations", f"{out['num_generations']} does not divide the generation batch of {total} "
                         f"completions ({formed}; TRL {version_text(keys.version)} rejects this"
                         + (")" if keys.version_stated else "; for an earlier TRL add `# oomless: trl==X.Y`)"))
    return out
