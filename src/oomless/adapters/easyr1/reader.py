"""EasyR1 (hiyouga/EasyR1): its YAML (`examples/config.yaml` layout) ↔ a run spec.

Input: the YAML, or a launch script `python3 -m verl.trainer.main config=FILE key=value ...`
(OmegaConf `from_cli` overrides over the file, as `verl/trainer/main.py` merges them).

Source: EasyR1 main (0.3.3.dev0), dataclass defaults of
`verl/trainer/config.py` (DataConfig, AlgorithmConfig, TrainerConfig),
`verl/workers/actor/config.py` (ActorConfig, ModelConfig, LoraConfig, OptimConfig, FSDPConfig,
OffloadConfig, RefConfig) and `verl/workers/rollout/config.py` (RolloutConfig); behaviour from
its README and `workers/fsdp_workers.py`: vLLM runs inside the FSDP worker (SPMD) and always
sleeps at level 1 after a rollout; a reference model exists unless `algorithm.disable_kl`.
The vLLM version is not in EasyR1's files: a `# oomless: vllm==0.7.3` comment line in the file
read gives it (`rollout.vllm_version`: the growth terms of `memory.growth` depend on it); without
one none is assumed.
Assumes: flash-attention (EasyR1 loads models with flash_attention_2, padding-free);
`fsdp.enable_full_shard: false` is FSDP SHARD_GRAD_OP, planned as ZeRO-2; the reference's own
offload settings are not modelled apart from the actor's.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ... import safe_paths as SP
from ...errors import InputError
from ...planner.batches import rows_budget_per_gpu
from ...spec.dataset import DataRef
from ...spec.releases import in_releases
from .. import HardwareFlags, ImportResult
from .. import _native as N
from .. import common as C
from .. import optim_impl as OI
from .. import schedule as SCH
from ...frontends import hydra as H
from .keys import DEFAULTS, NO_MEMORY_EFFECT, ACT, ROL, REF

SUPPORTED_VERSIONS = ("EasyR1 0.3.0 to 0.3.3 (dataclass defaults of main, 0.3.3.dev0; early-2025 configs read with them; "
                      "a `# easyr1==0.3.1` comment turns off what 0.3.2 added: dynamic_batching)")
LOWEST, HIGHEST = "0.3.0", "0.3.3"

ADVANTAGE_TO_ALGORITHM = {"gae": "ppo", "rloo": "rloo"}
STEP_IMPLEMENTATION = {"adamw": "fused", "adamw_bf16": "for_loop"}
"""`optim.strategy` → how the step runs: EasyR1 workers/fsdp_workers.py `_build_model_optimizer`
(main, L327-341) builds `torch.optim.AdamW(..., fused=True)` for adamw and its own
`AnyPrecisionAdamW` (verl/utils/torch_functional.py: a loop over each group's parameters) for
adamw_bf16. Stated where it changes the plan (`optim_impl.planned`)."""


DYNAMIC_BATCHING_SINCE = ">=0.3.2"
"""EasyR1 PR #417 (2025-07-14, first released in v0.3.2): `worker.actor.dynamic_batching`, default
true; earlier releases cut fixed micro-batches and have no such key. A declared pre-release
(`0.3.2.dev0`) counts as 0.3.2, though dev builds before the PR lack the key: declare 0.3.1 for them."""


def import_config(path: Path, hardware: HardwareFlags) -> ImportResult:
    text = C.read_text(path)
    release = C.check_version(text, "easyr1", LOWEST, HIGHEST, str(path))
    out = N.Collected()
    composed, config = _compose(path, text, out)
    if release is None and config is not None:  # the script's own comment wins over its config file's
        release = C.check_version(config[0], "easyr1", LOWEST, HIGHEST, config[1])
    vllm, train_prompts, transformers = _directives(([config] if config else []) + [(text, str(path))])
    out.notes.extend(composed.notes)
    _dynamic_batching_release(composed, release)
    _to_spec(composed.values, hardware, out, train_prompts)
    if vllm is not None:
        out.set("rollout.vllm_version", vllm)
    if transformers is not None:
        out.set("transformers_version", transformers)
    _report_unused(composed.user, out)
    return ImportResult(out.spec, tuple(out.ignored), tuple(out.notes), data=_data(composed.values, path.parent))


def _dynamic_batching_release(composed: H.Composed, release: tuple[int, ...] | None) -> None:
    """A file declaring a release before 0.3.2 (`# easyr1==0.3.1`) runs fixed micro-batches: the
    key did not exist, and EasyR1's structured config refuses keys it does not know."""
    if release is None or in_releases(C.version_text(release), DYNAMIC_BATCHING_SINCE):
        return
    key = f"{ACT}.dynamic_batching"
    if key in composed.user:
        raise InputError(key, f"not a key of EasyR1 {C.version_text(release)} (added in 0.3.2); remove it or declare "
                         "the release that has it")
    composed.values[key] = False


def _data(v: dict[str, Any], folder: Path) -> DataRef | None:
    """EasyR1's `data.train_files` (`path` or `hub_id@split`), its prompt and image columns, and
    the `format_prompt` template it renders each prompt into before the chat template (verl/utils/
    dataset.py RLHFDataset `__init__` and `_build_messages`, main)."""
    files = v.get("data.train_files")
    if not isinstance(files, str):
        return None
    source, _, split = files.partition("@")
    added, missing = "", ""
    template = v.get("data.format_prompt")
    if isinstance(template, str) and template:
        # relative to where EasyR1 runs (the repository root): here, else the config's folder or one above it
        named = Path(template).expanduser()
        candidates = [named] if named.is_absolute() else [named, *(f / named for f in (folder, *list(folder.parents)[:3]))]
        file = next((f for f in candidates if SP.exists(f) and f.is_file()), None)
        if file is None:
            missing = f"data.format_prompt={template}"
        else:  # its text less the placeholders ({{ content | trim }})
            added = re.sub(r"\{\{.*?\}\}|\{%.*?%\}", "", C.read_text(file)).strip()
    return N.data_ref("data.train_files", source, split=split or "train", prompt_field=v.get("data.prompt_key"),
                      image_field=v.get("data.image_key"), chat=True, added_text=added, missing=missing)


MAIN = ("verl.trainer.main",)
DIRECTIVES = ("vllm", "train_prompts", "transformers")
DEFAULT_TOTAL_EPOCHS = 15
"""EasyR1's `TrainerConfig.total_epochs` default (verl/trainer/config.py, main; early-2025
releases called it `total_episodes`, default 10, and the examples set 15)."""


def _directives(files: list[tuple[str, str]]) -> tuple[str | None, int | None, str | None]:
    """What EasyR1's files cannot say, from `# oomless: vllm==0.7.3 train_prompts=2101` lines
    of each (text, source), a later file's winning (a script's over its config file's): the
    vLLM release (checked as a version), the training set's size in prompts and the transformers
    release (`transformers==5.2`; the spec checks it)."""
    directives: dict[str, str] = {}
    for text, source in files:
        directives.update(C.read_directives(text, source))
    unknown = sorted(set(directives) - set(DIRECTIVES))
    if unknown:
        raise InputError(f"oomless directive {unknown[0]}", f"unknown key; allowed: {', '.join(DIRECTIVES)}")
    vllm = C.version_text(C.parse_version("vllm version", directives["vllm"])) if "vllm" in directives else None
    prompts = C.to_int("train_prompts", directives["train_prompts"], minimum=1) if "train_prompts" in directives else None
    return vllm, prompts, directives.get("transformers")


def _compose(path: Path, text: str, out: N.Collected) -> tuple[H.Composed, tuple[str, str] | None]:
    """The YAML, or the script's `verl.trainer.main config=FILE key=value ...` (OmegaConf
    `from_cli` over the file over the dataclass defaults), interpolations resolved; with the
    script's config file as (text, path) (None for a YAML read alone)."""
    if path.suffix in (".yaml", ".yml") or not re.search(r"verl\.trainer\.main\b", text):
        return H.compose(DEFAULTS, text, str(path), folder=path.parent), None
    command, notes = C.pick_command(C.read_script(text, str(path)), lambda c: C.command_with([c], MAIN) is not None, str(path),
                                    "python3 -m verl.trainer.main config=FILE key=value ...")
    out.notes.extend(notes)
    where = f"{path}:{command.line}"
    tokens = [a for a in C.command_with([command], MAIN)[1] if not a.startswith("$")]
    config_file, overrides = None, []
    for token in tokens:
        if token.startswith("config="):
            name = token.split("=", 1)[1]
            SP.checked_path(name, f"{where}: config")
            config_file = next((p for p in (path.parent / name, Path.cwd() / name) if SP.is_file(p)), None)
            if config_file is None:
                raise InputError(where, f"config={name} not found next to {path.name} or in {Path.cwd()}")
        else:
            overrides.append(H.Override(token, where))
    file_text = C.read_text(config_file) if config_file else None
    composed = H.compose(DEFAULTS, file_text, str(config_file or where), overrides,
                         folder=config_file.parent if config_file else None)
    return composed, (file_text, str(config_file)) if config_file and file_text is not None else None


def _to_spec(v: dict[str, Any], flags: HardwareFlags, out: N.Collected, train_prompts: int | None = None) -> None:
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
    sp = _ulysses(v)
    world = C.as_int("trainer.n_gpus_per_node", v["trainer.n_gpus_per_node"], 1) * C.as_int("trainer.nnodes", v["trainer.nnodes"], 1)
    if world % sp:  # fsdp_workers.py: init_device_mesh(mesh_shape=(world_size // ulysses_size, ulysses_size))
        raise InputError(f"{ACT}.ulysses_size", f"{sp} does not divide the {world} GPUs; allowed: a divisor of {world}")
    if sp > 1 and C.as_bool(f"{ACT}.padding_free", v[f"{ACT}.padding_free"]):
        # dp_actor.py `_forward_micro_batch`: ulysses_pad_and_slice_inputs splits each packed row
        # over the group (padding-free rows only; the padded path runs whole rows on every rank)
        dist["sequence_parallel_size"] = sp
        out.notes.append(f"{ACT}.ulysses_size={sp}: each packed row split over {sp} GPUs; EasyR1's README: vision-language "
                         "models are not compatible with Ulysses yet, and its all-to-all needs the KV heads divisible by it")
    out.set("distribution", dist)
    out.set("precision", "bf16" if str(v[f"{ACT}.fsdp.torch_dtype"]) in ("bf16", "bfloat16") else "bf16_mixed")
    if v[f"{ACT}.optim.strategy"] not in ("adamw", "adamw_bf16"):
        raise InputError(f"{ACT}.optim.strategy", f"{v[f'{ACT}.optim.strategy']!r} is not allowed; allowed: adamw, adamw_bf16")
    implementation = OI.planned(STEP_IMPLEMENTATION[v[f"{ACT}.optim.strategy"]], dist)
    if implementation is not None:
        out.set("optimizer_implementation", implementation)
    out.set("attention", "flash_attention_2")
    # padding_free (dp_actor.py): every real token's bf16 logits, divided in place, log-probs by
    # flash-attn's cross-entropy with inplace_backward (verl/utils/torch_functional.py), no entropy;
    # the padded path slices and copies the completion's logits: planned with the default moment
    if C.as_bool(f"{ACT}.padding_free", v[f"{ACT}.padding_free"]):
        out.set("logits", "bf16_flash_ce")
    out.set("gradient_checkpointing", C.as_bool(f"{ACT}.model.enable_gradient_checkpointing", v[f"{ACT}.model.enable_gradient_checkpointing"]))
    _finetune(v, out)
    _batch_and_lengths(v, out)
    _round_and_schedule(v, out, train_prompts)
    _rollout(v, out)
    _algorithm(v, out)
    out.set("ray.enabled", True)


def _ulysses(v: dict[str, Any]) -> int:
    """The Ulysses degree (`ulysses_size`, early 2025 `ulysses_sequence_parallel_size`)."""
    return max(C.as_int(f"{ACT}.{k}", v[f"{ACT}.{k}"], 1) for k in ("ulysses_size", "ulysses_sequence_parallel_size"))


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
        # padding_free (dp_actor.py `unpad_input`): each micro-batch's rows packed into one
        "padding_free": C.as_bool(f"{ACT}.padding_free", v[f"{ACT}.padding_free"]),
    })
    # max_prompt_length bounds the processor's input_ids, image tokens included: longer prompts are
    # refused (early 2025: postprocess_data truncation "error") or filtered (filter_overlong_prompts).
    prompt = C.as_int("data.max_prompt_length", v["data.max_prompt_length"], 1)
    response = C.as_int("data.max_response_length", v["data.max_response_length"], 1)
    out.set("lengths", {"max_prompt_tokens": prompt, "max_completion_tokens": response, "max_prompt_counts_images": True})
    if C.as_bool(f"{ACT}.dynamic_batching", v[f"{ACT}.dynamic_batching"]):
        packed = C.as_bool(f"{ACT}.padding_free", v[f"{ACT}.padding_free"])
        _dynamic_batching(v, prompt + response, _ulysses(v) if packed else 1, out)
    out.set("vision", {"max_pixels": C.as_int("data.max_pixels", v["data.max_pixels"], 1),
                       "min_pixels": C.as_int("data.min_pixels", v["data.min_pixels"], 1),
                       "freeze_tower": C.as_bool(f"{ACT}.model.freeze_vision_tower", v[f"{ACT}.model.freeze_vision_tower"])})


def _dynamic_batching(v: dict[str, Any], padded: int, sp: int, out: N.Collected) -> None:
    """`dynamic_batching` (default true from 0.3.2): each mini-batch (update) and each round's share
    (experience) is cut into ceil(real tokens / budget) parts balanced on tokens by Karmarkar-Karp,
    the budget being the micro-batch size × the padded row length, max_prompt_length +
    max_response_length (prompts are padded to the one, responses to the other). Source: EasyR1
    verl/workers/actor/dp_actor.py `compute_log_prob` and `update_policy`, verl/utils/
    seqlen_balancing.py `rearrange_micro_batches` (`get_seqlen_balanced_partitions`, equal_size
    False: a part is not capped at the budget, planned as budget + one sequence, planner/batches.py).
    Unlike verl, EasyR1 does not multiply the budget by the Ulysses degree ``sp``: the budget is the
    sequence-parallel group's, and the spec's (per GPU, × sp for the group: planner/batches.py) is
    it divided by sp, rounded up."""
    update = C.as_int(f"{ACT}.micro_batch_size_per_device_for_update", v[f"{ACT}.micro_batch_size_per_device_for_update"], 1)
    experience = C.as_int(f"{ACT}.micro_batch_size_per_device_for_experience",
                          v[f"{ACT}.micro_batch_size_per_device_for_experience"], 1)
    out.set("batch.max_tokens_per_gpu", rows_budget_per_gpu(update, padded, sp))
    out.set("batch.logprob_max_tokens_per_gpu", rows_budget_per_gpu(experience, padded, sp))
    out.notes.append(f"worker.actor.dynamic_batching: micro-batches of up to {update} × {padded} = {update * padded:,} tokens "
                     f"(update) and {experience} × {padded} = {experience * padded:,} (log-probs), balanced on real tokens; "
                     "one part can exceed its budget by less than one sequence")


def _round_and_schedule(v: dict[str, Any], out: N.Collected, train_prompts: int | None) -> None:
    """`data.rollout_batch_size` prompts per round, `global_batch_size` per optimizer step,
    `trainer.max_steps` rounds (else epochs × the rounds of one pass over ``train_prompts``),
    `save_freq` rounds (adapters/schedule.py)."""
    world = C.as_int("trainer.n_gpus_per_node", v["trainer.n_gpus_per_node"], 1) * C.as_int("trainer.nnodes", v["trainer.nnodes"], 1)
    ulysses = _ulysses(v)
    rnd = SCH.verl_round(C.as_int("data.rollout_batch_size", v["data.rollout_batch_size"], 1),
                         C.as_int(f"{ACT}.global_batch_size", v[f"{ACT}.global_batch_size"], 1),
                         C.as_int(f"{ROL}.n", v[f"{ROL}.n"], 1), world, ulysses,
                         C.as_int(f"{ACT}.micro_batch_size_per_device_for_update", v[f"{ACT}.micro_batch_size_per_device_for_update"], 1))
    if rnd is None:
        out.notes.append("data.rollout_batch_size / worker.actor.global_batch_size do not divide over the GPUs as EasyR1 "
                         "requires; one rollout round per optimizer step planned")
        return
    out.set("batch.gradient_accumulation_steps", rnd.gradient_accumulation_steps)
    out.set("batch.steps_per_generation", rnd.steps_per_generation)
    rounds = v["trainer.max_steps"]
    if rounds is None and train_prompts is not None:
        rounds = _rounds_of_epochs(v, train_prompts)
    schedule = SCH.schedule(C.as_int("trainer.max_steps", rounds, 1) if rounds is not None else None,
                            C.as_int("trainer.save_freq", v["trainer.save_freq"], -1),
                            C.as_bool("trainer.save_model_only", v["trainer.save_model_only"]), rnd)
    if schedule:
        out.set("schedule", schedule)
    if rounds is None:
        out.notes.append("trainer.max_steps not set: the run's length (total_epochs × rounds per epoch) needs the data "
                         "set's size (`# oomless: train_prompts=N`); growth over steps is judged only with a length")


def _rounds_of_epochs(v: dict[str, Any], train_prompts: int) -> int:
    """EasyR1's run length without max_steps: whole rounds of one pass (its train loader drops
    the last partial batch) × epochs. Source: EasyR1 verl/trainer/ray_trainer.py, main
    (`num_examples // rollout_batch_size * total_epochs`; early 2025: `len(train_dataloader) *
    total_episodes` with `drop_last=True`)."""
    batch = C.as_int("data.rollout_batch_size", v["data.rollout_batch_size"], 1)
    key = next((k for k in ("trainer.total_epochs", "trainer.total_episodes") if v.get(k) is not None), None)
    epochs = C.as_int(key, v[key], 1) if key else DEFAULT_TOTAL_EPOCHS
    if train_prompts < batch:
        raise InputError("oomless directive train_prompts",
                         f"{train_prompts} is fewer than data.rollout_batch_size {batch}: EasyR1 would train no round")
    return train_prompts // batch * epochs


def _rollout(v: dict[str, Any], out: N.Collected) -> None:
    ro: dict[str, Any] = {
        "engine": "vllm_colocate", "sleep_level": 1,
        "gpu_memory_utilization": C.as_float(f"{ROL}.gpu_memory_utilization", v[f"{ROL}.gpu_memory_utilization"], 0.0, 1.0),
        "tensor_parallel_size": C.as_int(f"{ROL}.tensor_parallel_size", v[f"{ROL}.tensor_parallel_size"], 1),
        "samples_per_request": C.as_int(f"{ROL}.n", v[f"{ROL}.n"], 1),
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
    if C.as_int(f"{ACT}.model.lora.rank", v[f"{ACT}.model.lora.rank"], 0) > 0:
        # sharding_manager/fsdp_vllm.py `_collect_lora_weights`: layer by layer, the LoRA tensors
        # alone made whole and sent unmerged (TensorLoRARequest); planned as one unit summoned
        ro["lora_sync"] = "adapter_layers"
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
    elif key in (f"{ACT}.ulysses_size", f"{ACT}.ulysses_sequence_parallel_size") and value != 1 \
            and not C.as_bool(f"{ACT}.padding_free", user.get(f"{ACT}.padding_free", DEFAULTS[f"{ACT}.padding_free"])):
        out.ignore(key, value, "without padding_free EasyR1 runs every row whole on each GPU of the sequence-parallel "
                   "group (dp_actor.py slices packed rows only): planned unsplit, the group sharing one share of data")
