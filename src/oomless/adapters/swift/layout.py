"""Where ms-swift puts vLLM: the spec's `rollout` (and `placement`) from a `swift rlhf` command.

See the `swift.reader` docstring for the layouts of each version; sources in `keys`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...catalog.models import ModelArch
from ...errors import InputError
from . import keys as SF
from ..args import FlagReader
from ..common import ShellCommand, parse_flags, to_int, to_json, version_text

VLLM_ONLY = (
    "vllm_mode", "vllm_gpu_memory_utilization", "vllm_tensor_parallel_size", "vllm_max_model_len",
    "vllm_max_num_seqs", "vllm_enforce_eager", "vllm_limit_mm_per_prompt", "sleep_level", "offload_model",
    "offload_optimizer", "num_infer_workers", "vllm_device", "gc_collect_after_offload", "vllm_server_host",
    "move_model_batches", "async_generate", *SF.COMPAT_ALIASES,
)
ENGINE_FLAGS = ("vllm_gpu_memory_utilization", "vllm_tensor_parallel_size", "vllm_max_model_len",
                "vllm_max_num_seqs", "vllm_enforce_eager", "vllm_limit_mm_per_prompt")
ROLLOUT_NO_EFFECT = frozenset({"model", "port", "host", "vllm_enable_prefix_caching", "vllm_use_async_engine",
                               "use_hf", "model_type", "external_plugins", "multi_turn_scheduler", "max_turns",
                               "vllm_disable_custom_all_reduce", "torch_dtype", "served_model_name"})


@dataclass
class Run:
    """What the import has gathered so far (mutable while reading; the result is a plain dict)."""

    profile: SF.Profile
    vllm: tuple[int, ...]
    flags: FlagReader
    env: Mapping[str, str]
    arch: ModelArch
    notes: list[str]
    nproc: int = 1
    transformers: str | None = None
    """The `# oomless: transformers==X` release, if stated (it decides `--optim`'s default)."""


@dataclass(frozen=True)
class Layout:
    rollout: dict[str, Any]
    gpus_per_node: int | None
    placement: dict[str, Any] | None = None


def layout(run: Run, rollout_cmd: ShellCommand | None, hardware: Any, method: str, beta: float,
           reward: bool) -> Layout:

    f = run.flags
    if not f.bool("use_vllm", False):
        for name in VLLM_ONLY:
            f.ignore(name, "no effect: --use_vllm false (transformers generate)")
        _check_visible(run)
        return Layout({"engine": "hf"}, run.nproc)
    roles = ["actor"] + (["reference"] if beta > 0 and method == "full" else []) + (["reward"] if reward else [])
    if run.profile.has_vllm_mode:
        return _modern(run, rollout_cmd, hardware)
    if f.has("vllm_server_host") and run.profile.version >= (3, 4):
        # ms-swift 3.4 (before vllm_mode): a server host makes the engine external.
        # Source: v3.4.0 swift/trainers/rlhf_trainer/grpo_trainer.py L232
        # (`is_external_vllm = use_vllm and args.vllm_server_host is not None`).
        run.notes.append("--vllm_server_host with ms-swift 3.4: the external vLLM server (`swift rollout`) is planned")
        return _server(run, rollout_cmd, hardware)
    return _legacy(run, roles)


def _visible(env: Mapping[str, str]) -> int | None:
    devices = env.get("CUDA_VISIBLE_DEVICES")
    return len([d for d in devices.split(",") if d.strip()]) if devices else None


def _check_visible(run: Run) -> None:
    visible = _visible(run.env)
    if visible is not None and visible < run.nproc:
        raise InputError("NPROC_PER_NODE", f"{run.nproc} processes but CUDA_VISIBLE_DEVICES lists {visible} GPUs")


def _name(f: FlagReader, run: Run, name: str) -> str:
    """The flag's name, or its pre-3.8 alias when only that is given."""
    alias = next((a for a, n in SF.COMPAT_ALIASES.items() if n == name), None)
    if not f.has(name) and alias and f.has(alias) and run.profile.has_compat_aliases:
        f.ignored.append(f"--{alias}: read as --{name} (alias before ms-swift 3.8)")
        return alias
    return name


def engine(run: Run, f: FlagReader) -> dict[str, Any]:
    """vLLM engine keys of the spec's rollout section from the vllm_* flags of one command."""
    out: dict[str, Any] = {
        "gpu_memory_utilization": f.float(_name(f, run, "vllm_gpu_memory_utilization"), 0.9),
        "tensor_parallel_size": f.int(_name(f, run, "vllm_tensor_parallel_size"), 1, minimum=1),
        "max_model_len": f.int(_name(f, run, "vllm_max_model_len"), minimum=1) or run.arch.max_position_embeddings,
    }
    if not 0 < out["gpu_memory_utilization"] <= 1:
        raise InputError("--vllm_gpu_memory_utilization", f"{out['gpu_memory_utilization']} is not in (0, 1]")
    seqs = f.int("vllm_max_num_seqs", run.profile.default_max_num_seqs, minimum=1)
    if seqs is not None:
        out["max_num_seqs"] = seqs
    if f.bool("vllm_enforce_eager", False):
        out["enforce_eager"] = True
    out["cuda_graphs_in_budget"] = run.vllm >= SF.VLLM_GRAPHS_IN_BUDGET
    limit = limit_images(f, _name(f, run, "vllm_limit_mm_per_prompt"))
    if limit is not None and run.arch.vision is not None:
        out["limit_images_per_prompt"] = limit
    return out


def release_engine(run: Run) -> dict[str, Any]:
    """The engine fields ms-swift gives a vLLM engine of this run were `--use_vllm` turned on:
    its vLLM's CUDA graphs (inside the budget from 0.21), the whole model gathered per sync (no
    `--move_model_batches`), and 3.2-3.4's 256 sequences where `--vllm_max_num_seqs` is unset
    (`Profile.default_max_num_seqs`). The writer holds a patch to them (`writer._release_engine`)."""
    out: dict[str, Any] = {"cuda_graphs_in_budget": run.vllm >= SF.VLLM_GRAPHS_IN_BUDGET, "weight_sync_batches": 1}
    if not run.profile.has_vllm_mode:
        out["max_num_seqs"] = run.profile.default_max_num_seqs
    return out


def weight_sync(run: Run) -> dict[str, int]:
    """ms-swift gathers the weights for the engine in `move_model_batches` batches (None: the
    whole model at once)."""
    return {"weight_sync_batches": run.flags.int("move_model_batches", minimum=1) or 1}


def _colocate_extras(run: Run, f: FlagReader) -> dict[str, Any]:
    sleep = f.int("sleep_level", 0)
    if sleep not in (0, 1, 2):
        raise InputError("--sleep_level", f"{sleep} is not allowed; allowed: 0, 1, 2")
    out: dict[str, Any] = {}
    if sleep:
        out["sleep_level"] = sleep
    for name in ("offload_model", "offload_optimizer"):
        if f.bool(name, False):
            out[name] = True
    if run.profile.version >= (3, 10):
        f.ignore("gc_collect_after_offload", "removed in ms-swift 3.10 (the cache is always emptied)")
        emptied = True
    elif run.profile.always_empties_cache:
        f.ignore("gc_collect_after_offload", "a no-op since ms-swift 3.7 (the cache is always emptied)")
        emptied = True
    else:
        emptied = f.bool("gc_collect_after_offload", False)
    if not emptied:
        out["empty_cache_before_rollout"] = False
    return out


def _modern(run: Run, rollout_cmd: ShellCommand | None, hardware: Any) -> Layout:

    f = run.flags
    mode = f.str("vllm_mode")
    if mode is not None and mode not in ("colocate", "server"):
        raise InputError("--vllm_mode", f"{mode!r} is not allowed; allowed: colocate, server")
    if run.profile.mode_follows_server_host:
        host = f.has("vllm_server_host") or (run.profile.base_url_is_a_host and f.has("vllm_server_base_url"))
        resolved = "server" if host else "colocate"
        if mode is not None and mode != resolved:
            run.notes.append(f"--vllm_mode {mode} with{'' if host else 'out'} a vLLM server host: ms-swift "
                             f"{version_text(run.profile.version)} runs it as {resolved} (it sets the mode from "
                             "--vllm_server_host until 3.11.0)")
        mode = resolved
    elif mode is None:
        mode = "colocate"
        run.notes.append("--vllm_mode unset with --use_vllm true: colocate assumed (ms-swift >= 3.11.1 requires it)")
    if f.bool("async_generate", False) and mode != "server":
        raise InputError("--async_generate", "needs --vllm_mode server (ms-swift asserts it)")
    if mode == "server":
        return _server(run, rollout_cmd, hardware)
    _check_visible(run)
    rollout = {"engine": "vllm_colocate", **engine(run, f), **weight_sync(run), **_colocate_extras(run, f)}
    rollout["max_num_seqs"] = _colocate_max_num_seqs(run, f, rollout["tensor_parallel_size"])
    if run.nproc % rollout["tensor_parallel_size"]:
        raise InputError("--vllm_tensor_parallel_size",
                         f"{rollout['tensor_parallel_size']} does not divide NPROC_PER_NODE={run.nproc}")
    return Layout(rollout, run.nproc)


def _colocate_max_num_seqs(run: Run, f: FlagReader, tp: int) -> int:
    """ms-swift 3.5+'s colocated engine: per device batch × TP × steps_per_generation, or the
    flag where the release reads it (keys.Profile.colocate_max_num_seqs_flag)."""
    if run.profile.colocate_max_num_seqs_flag and f.has("vllm_max_num_seqs"):
        return f.int("vllm_max_num_seqs", minimum=1)
    f.ignore("vllm_max_num_seqs", f"no effect: ms-swift {version_text(run.profile.version)} sizes the colocated "
             "engine from per_device_train_batch_size × TP × steps_per_generation")
    micro = f.int("per_device_train_batch_size", 1, minimum=1)
    steps = f.int("steps_per_generation", minimum=1)
    generation_batch = f.int("generation_batch_size", minimum=1)
    world = run.nproc * int(run.env.get("NNODES") or 1)
    if steps is None and generation_batch is not None:
        steps = max(generation_batch // (micro * world), 1)
    return micro * tp * (steps or f.int("gradient_accumulation_steps", minimum=1) or 1)


def _server(run: Run, rollout_cmd: ShellCommand | None, hardware: Any) -> Layout:

    f = run.flags
    for name in ("sleep_level", "offload_model", "offload_optimizer", "gc_collect_after_offload"):
        f.ignore(name, "no effect: ms-swift forces it off in server mode")
    for name in ENGINE_FLAGS:
        f.ignore(name, "no effect in server mode: set it on `swift rollout`")
    f.raw("vllm_server_host")
    if rollout_cmd is not None:
        server = FlagReader(parse_flags(rollout_cmd.argv[2:], "swift rollout"), "swift rollout")
        keys = engine(run, server)
        gpus = _visible(rollout_cmd.env) or keys["tensor_parallel_size"] * (server.int("vllm_data_parallel_size", 1) or 1)
        run.flags.ignored.extend(f"swift rollout {line}" for line in server.leftover(ROLLOUT_NO_EFFECT))
    else:
        keys = engine(run, FlagReader({}, "swift rollout"))
        given = hardware.gpus_per_node is not None and hardware.gpus_per_node > run.nproc
        gpus = hardware.gpus_per_node - run.nproc if given else keys["tensor_parallel_size"]
        source = "--gpus-per-node" if given else "`swift rollout` defaults (tensor and data parallel 1)"
        run.notes.append(f"--vllm_mode server without a `swift rollout` command: planned the trainer on "
                         f"NPROC_PER_NODE={run.nproc} GPU(s) plus a separate vLLM server on {gpus} GPU(s) per node "
                         f"from {source}, ms-swift {version_text(run.profile.version)}; give --gpus-per-node "
                         f"(trainer + server) or add the `swift rollout` line to plan another server size")
    _check_visible(run)
    return Layout({"engine": "vllm_separate", "num_gpus": gpus, **keys, **weight_sync(run)}, run.nproc + gpus)


def _legacy(run: Run, roles: list[str]) -> Layout:
    """ms-swift 3.2-3.4: num_infer_workers engines; one engine lives on --vllm_device."""

    f, nproc = run.flags, run.nproc
    workers = f.int("num_infer_workers", 1, minimum=1)
    device = f.str("vllm_device", "auto")
    keys = {**engine(run, f), **weight_sync(run)}
    extras = _colocate_extras(run, f)
    visible = _visible(run.env)
    _check_visible(run)
    if workers == nproc:
        return Layout({"engine": "vllm_colocate", **keys, **extras}, nproc)
    if visible is not None and visible > nproc and workers == visible - nproc and device == "auto":
        for name in ("sleep_level", "offload_model", "offload_optimizer"):
            if name in extras:
                run.flags.ignored.append(f"--{name}: no effect: the engines have GPUs of their own")
        run.notes.append(f"{workers} vLLM engine(s) on the {workers} visible GPU(s) after NPROC_PER_NODE={nproc}")
        return Layout({"engine": "vllm_separate", "num_gpus": workers, **keys}, visible)
    if workers != 1:
        raise InputError("--num_infer_workers", f"{workers} is not planned; allowed: 1 (one engine) or "
                         f"NPROC_PER_NODE={nproc} (one per rank)")
    index = (visible or nproc) - 1 if device == "auto" else _device_index(device)
    if index >= nproc:
        for name in ("sleep_level", "offload_model", "offload_optimizer"):
            if name in extras:
                run.flags.ignored.append(f"--{name}: no effect: the engine has a GPU of its own")
        return Layout({"engine": "vllm_separate", "num_gpus": 1, **keys}, nproc + 1)
    groups = ([{"roles": roles, "gpus_per_node": nproc - 1}] if nproc > 1 else []) + [
        {"roles": [*roles, "vllm"], "gpus_per_node": 1}]
    rollout = {"engine": "vllm_colocate", **keys, **extras, "engine_in_trainer_process": False}
    return Layout(rollout, nproc, {"groups": groups})


def _device_index(device: str) -> int:
    text = device.removeprefix("cuda:")
    if not text.isdigit():
        raise InputError("--vllm_device", f"{device!r} is not a device; allowed: auto, cuda:N")
    return to_int("--vllm_device", text, minimum=0)


def limit_images(flags: FlagReader, name: str = "vllm_limit_mm_per_prompt") -> int | None:
    """`{"image": N, "video": M}` → N (videos are not planned)."""
    raw = flags.str(name)
    if raw is None or raw.lower() == "none":
        return None
    value = to_json(f"--{name}", raw)
    if not isinstance(value, Mapping):
        raise InputError(f"--{name}", f"{raw!r} is not a JSON object like {{\"image\": 2}}")
    if set(value) - {"image"}:
        flags.ignored.append(f"--{name}: {', '.join(sorted(set(value) - {'image'}))} not planned (images only)")
    return to_int(f"--{name}", value["image"], minimum=0) if "image" in value else None
