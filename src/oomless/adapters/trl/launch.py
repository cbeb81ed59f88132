"""How a TRL run is launched: the GRPO config keys, accelerate's settings, the vLLM server.

`read_launch` turns a `trl grpo --config` YAML or a launch script into a `Launch`; `rollout`
and `accelerate_distribution` map the launch to the spec's rollout and distribution sections.
Sources: trl 1.16.0 `trl/cli/accelerate_config.py` (`accelerate_config` names and paths),
`trl/scripts/utils.py` (TrlParser: YAML first, CLI overrides, unconsumed keys go to
`accelerate launch`), `trl/accelerate_configs/*.yaml`, `trl/scripts/vllm_serve.py`
(tensor_parallel_size 1, data_parallel_size 1, gpu_memory_utilization 0.9); accelerate
`accelerate/utils/dataclasses.py` (DeepSpeedPlugin: inline zero_stage and offload devices)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...catalog.models import ModelArch
from ...errors import InputError
from ...memory.vllm import GRAPHS_IN_BUDGET_FROM
from ..common import ShellCommand, load_yaml_mapping, parse_flags, parse_shell, to_bool, to_float, to_int
from ..deepspeed_json import distribution_from_deepspeed
from . import versions as TV

if TYPE_CHECKING:
    from .reader import Keys

COLOCATE_MAX_NUM_BATCHED_TOKENS = 4096
TRL_ACCELERATE_CONFIGS: dict[str, dict[str, Any]] = {
    **{f"zero{stage}": {"distributed_type": "DEEPSPEED", "num_processes": 8, "num_machines": 1,
                        "mixed_precision": "bf16",
                        "deepspeed_config": {"zero_stage": stage, "offload_optimizer_device": "none",
                                             "offload_param_device": "none"}} for stage in (1, 2, 3)},
    "fsdp1": {"distributed_type": "FSDP", "num_processes": 8, "num_machines": 1, "mixed_precision": "bf16",
              "fsdp_config": {"fsdp_offload_params": False, "fsdp_version": 1}},
    "fsdp2": {"distributed_type": "FSDP", "num_processes": 8, "num_machines": 1, "mixed_precision": "bf16",
              "fsdp_config": {"fsdp_offload_params": False, "fsdp_version": 2}},
    "multi_gpu": {"distributed_type": "MULTI_GPU", "num_processes": 8, "num_machines": 1, "mixed_precision": "bf16"},
    "single_gpu": {"distributed_type": "NO", "num_processes": 1, "num_machines": 1, "mixed_precision": "bf16"},
}
"""The memory-relevant values of trl/accelerate_configs/*.yaml (TRL 1.16.0)."""

LAUNCH_KEYS = frozenset({
    "config_file", "num_processes", "num_machines", "machine_rank", "main_process_ip", "main_process_port",
    "mixed_precision", "multi_gpu", "use_deepspeed", "zero_stage", "offload_optimizer_device",
    "offload_param_device", "deepspeed_config_file", "use_fsdp", "fsdp_offload_params", "gpu_ids",
    "dynamo_backend", "same_network", "rdzv_backend", "num_cpu_threads_per_process", "main_training_function",
})
"""`accelerate launch` options (they may also appear as unconsumed keys of a `trl grpo` YAML)."""
LAUNCH_SWITCHES = frozenset({"multi_gpu", "use_deepspeed", "use_fsdp", "same_network", "cpu", "debug"})


@dataclass
class Launch:
    config: dict[str, Any]
    """GRPOConfig / ModelConfig / script keys: YAML values, then CLI strings over them."""
    accelerate: dict[str, Any]
    """accelerate config values (file, then launch options over them)."""
    processes_per_node: int
    num_machines: int
    server: ShellCommand | None = None
    directives_text: str = ""
    ignored: list[str] = field(default_factory=list)
    processes_stated: bool = True
    """False when nothing (launcher, accelerate config, num_processes) says how many processes
    run: a bare GRPOConfig YAML, launched by whatever the user runs it with."""
    script: str = ""
    """What the main command runs: `trl grpo`, `trl rloo`, the training script's path (`ppo.py`),
    `-m module`; "" for a bare YAML (`trainers.trainer_of` names the trainer from it)."""
    single_process: bool = False  # `python script.py`: no launcher, one process whatever the node has
    notes: list[str] = field(default_factory=list)
    node_gpus: int | None = None  # open-r1's sbatch job: the nodes' GPUs, its vLLM server on a node of its own (slurm.py)


def _cli_values(flags: Mapping[str, list[str]]) -> dict[str, Any]:
    return {k: ("true" if not v else v[0] if len(v) == 1 else list(v)) for k, v in flags.items()}


def read_launch(name: str, text: str, read: Callable[[str], str]) -> Launch:

    if name.endswith((".yaml", ".yml")):
        return _from_config(load_yaml_mapping(text, name, allow_empty=False), {}, text, read, {}, None)
    commands = parse_shell(text, name)
    from . import slurm as SL  # open-r1's `sbatch slurm/train.slurm ...` (slurm.py)
    if (job := SL.sbatch_command(commands)) is not None:
        return SL.read_job(name, text, job, read)
    server = next((c for c in commands if c.argv[:2] == ("trl", "vllm-serve")), None)
    main = next((c for c in commands if _is_main(c)), None)
    if main is None:
        raise InputError(name, "no `trl grpo`, `trl rloo`, `accelerate launch`, `torchrun` or `python` training command found")
    main = _as_launcher(main)
    launch_opts, script_args = _split(main)
    script = _script(main, script_args)
    flags = _cli_values(parse_flags(script_args, name))
    texts = text
    config: dict[str, Any] = {}
    if "config" in flags:
        config_name = str(flags.pop("config"))
        config_text = read(config_name)
        texts += "\n" + config_text
        config = load_yaml_mapping(config_text, config_name, allow_empty=False)
    config.update(flags)
    launch = _from_config(config, launch_opts, texts, read, main.env, server, script)
    return dataclasses.replace(launch, single_process=Path(main.argv[0]).name.startswith("python"))


def _script(cmd: ShellCommand, script_args: list[str]) -> str:
    """The main command's training script: `trl grpo`/`trl rloo`, else the word before its
    arguments (a script path, or the module after `-m`)."""
    if cmd.argv[:2] in (("trl", "grpo"), ("trl", "rloo")):
        return " ".join(cmd.argv[:2])
    at = len(cmd.argv) - len(script_args) - 1
    return cmd.argv[at] if 0 < at < len(cmd.argv) else ""


def _is_main(cmd: ShellCommand) -> bool:
    head = Path(cmd.argv[0]).name
    return (cmd.argv[:2] in (("trl", "grpo"), ("trl", "rloo")) or (head == "accelerate" and cmd.argv[1:2] == ("launch",))
            or head == "torchrun" or (head.startswith("python") and len(cmd.argv) > 1))


LAUNCHER_MODULES = {"torch.distributed.run": ("torchrun",), "torch.distributed.launch": ("torchrun",),
                    "accelerate.commands.launch": ("accelerate", "launch")}
"""`python -m MODULE` launchers: torchrun is torch.distributed.run's console script (torch setup.py),
`accelerate launch` accelerate.commands.launch's."""


def _as_launcher(cmd: ShellCommand) -> ShellCommand:
    """`python -m torch.distributed.run ...` read as `torchrun ...` (and accelerate's likewise)."""
    if Path(cmd.argv[0]).name.startswith("python") and cmd.argv[1:2] == ("-m",) and len(cmd.argv) > 2:
        launcher = LAUNCHER_MODULES.get(cmd.argv[2])
        if launcher is not None:
            return dataclasses.replace(cmd, argv=(*launcher, *cmd.argv[3:]))
    return cmd


def _split(cmd: ShellCommand) -> tuple[dict[str, Any], list[str]]:
    """(launcher options, training-script arguments) of the main command."""
    argv = list(cmd.argv)
    if argv[:2] in (["trl", "grpo"], ["trl", "rloo"]):
        flags = _cli_values(parse_flags(argv[2:], " ".join(argv[:2])))
        launch = {k: flags.pop(k) for k in list(flags) if k in LAUNCH_KEYS or k == "accelerate_config"}
        rest = [w for k, v in flags.items() for w in ([f"--{k}"] + (v if isinstance(v, list) else [v]))]
        return launch, rest
    head = Path(argv[0]).name
    start = 2 if head == "accelerate" else 1
    launch: dict[str, Any] = {}
    i = start
    while i < len(argv) and argv[i].startswith("-"):
        name, sep, value = argv[i].lstrip("-").partition("=")
        name = name.replace("-", "_")
        if name == "m":
            i += 2
            break
        if sep:
            launch[name] = value
            i += 1
        elif name in LAUNCH_SWITCHES:
            launch[name] = "true"
            i += 1
        else:
            launch[name] = argv[i + 1] if i + 1 < len(argv) else ""
            i += 2
    else:
        i += 1
    if head == "torchrun":
        launch = {"num_processes_per_node": launch.get("nproc_per_node", "1"), "num_machines": launch.get("nnodes", "1")}
    elif head.startswith("python"):  # the script alone: one process, whatever GPUs the node has
        launch = {"num_processes": "1"}
    return launch, argv[i:]


def _accelerate_file(value: str, read: Callable[[str], str]) -> dict[str, Any]:

    if value in TRL_ACCELERATE_CONFIGS and not value.endswith((".yaml", ".yml")):
        return dict(TRL_ACCELERATE_CONFIGS[value])
    return load_yaml_mapping(read(value), value, allow_empty=False)


def _from_config(config: dict[str, Any], launch_opts: Mapping[str, Any], texts: str, read: Callable[[str], str],
                 env: Mapping[str, str], server: ShellCommand | None, script: str = "") -> Launch:
    config = dict(config)
    opts = dict(launch_opts)
    for key in list(config):
        if key in LAUNCH_KEYS or key == "accelerate_config":
            opts.setdefault(key, config.pop(key))
    accelerate: dict[str, Any] = {}
    source = opts.pop("accelerate_config", None) or opts.pop("config_file", None)
    if source is not None:
        accelerate = _accelerate_file(str(source), read)
    for key in ("num_processes", "num_machines", "mixed_precision", "gpu_ids"):
        if key in opts:
            accelerate[key] = opts.pop(key)
    if to_bool("use_deepspeed", opts.pop("use_deepspeed", False)) or "zero_stage" in opts:
        accelerate["distributed_type"] = "DEEPSPEED"
        ds = dict(accelerate.get("deepspeed_config") or {})
        for key in ("zero_stage", "offload_optimizer_device", "offload_param_device", "deepspeed_config_file"):
            if key in opts:
                ds[key] = opts.pop(key)
        accelerate["deepspeed_config"] = ds
    if to_bool("use_fsdp", opts.pop("use_fsdp", False)):
        accelerate["distributed_type"] = "FSDP"
        accelerate["fsdp_config"] = {"fsdp_offload_params": opts.pop("fsdp_offload_params", False)}
    machines = to_int("num_machines", accelerate.get("num_machines", 1), minimum=1)
    if "num_processes_per_node" in opts:
        per_node = to_int("--nproc_per_node", opts.pop("num_processes_per_node"), minimum=1)
        machines = to_int("--nnodes", opts.pop("num_machines", machines), minimum=1)
    else:
        total = to_int("num_processes", accelerate.get("num_processes", 1), minimum=1)
        if total % machines:
            raise InputError("num_processes", f"{total} processes do not split over {machines} machines")
        per_node = total // machines
    ignored = [f"accelerate {key}: no effect on memory" for key in opts]
    stated = "num_processes" in accelerate or "num_processes_per_node" in launch_opts or bool(launch_opts)
    return Launch(config, accelerate, per_node, machines, server, texts, ignored, stated, script)


def _section(acc: dict, key: str) -> dict:
    """An accelerate config's sub-mapping (`deepspeed_config`, `fsdp_config`), {} when absent."""
    section = acc.get(key) or {}
    if not isinstance(section, dict):
        raise InputError(key, f"must be a mapping of keys, got {type(section).__name__}")
    return section


def accelerate_distribution(launch: Launch, read: Callable[[str], str]) -> tuple[dict, str, str | None, bool]:
    """The distribution accelerate sets up when GRPOConfig names no DeepSpeed config or FSDP."""
    acc = launch.accelerate
    kind = str(acc.get("distributed_type", "NO")).upper()
    if kind == "DEEPSPEED":
        ds = _section(acc, "deepspeed_config")
        if ds.get("deepspeed_config_file"):
            from ...safe_json import load_json

            name = str(ds["deepspeed_config_file"])
            config = load_json(read(name), name)
        else:
            config = {"zero_optimization": {
                "stage": ds.get("zero_stage", 2),
                "offload_optimizer": {"device": ds.get("offload_optimizer_device", "none")},
                "offload_param": {"device": ds.get("offload_param_device", "none")}}}
        got = distribution_from_deepspeed(config, str(ds.get("deepspeed_config_file", "accelerate deepspeed_config")))
        launch.ignored.extend(got.ignored)
        return got.distribution, got.half, got.optimizer, True
    if kind == "FSDP":
        offload = to_bool("fsdp_offload_params", _section(acc, "fsdp_config").get("fsdp_offload_params", False))
        return {"strategy": "fsdp", **({"offload_params": True, "offload_optimizer": True} if offload else {})}, "auto", None, True
    if kind not in ("NO", "MULTI_GPU"):
        raise InputError("distributed_type", f"{kind!r} is not planned; allowed: NO, MULTI_GPU, DEEPSPEED, FSDP")
    return {"strategy": "ddp"}, "auto", None, False


def _visible(env: Mapping[str, str]) -> int | None:
    devices = env.get("CUDA_VISIBLE_DEVICES")
    return len([d for d in devices.split(",") if d.strip()]) if devices else None


def rollout(keys: Keys, launch: Launch, arch: ModelArch, vllm: tuple[int, ...], hardware: Any,
            sequences_per_rank: int, notes: list[str], prompt_truncation: int | None = None,
            completion: int = 512) -> tuple[dict[str, Any], int]:
    """(the spec's rollout section, GPUs per node) under TRL ``keys.version`` (versions.py).
    ``sequences_per_rank`` is TRL's colocated max_num_seqs / TP; ``prompt_truncation`` +
    ``completion`` is the colocated engine's max_model_len before TRL 0.26."""
    processes = launch.processes_per_node
    colocate_keys = ("vllm_gpu_memory_utilization", "vllm_tensor_parallel_size", "vllm_enable_sleep_mode",
                     "vllm_max_model_length")
    if not keys.bool("use_vllm", False):
        for name in ("vllm_mode", *colocate_keys):
            keys.ignore(name, "no effect: use_vllm is false (transformers generate)")
        return {"engine": "hf"}, processes
    graphs = vllm >= GRAPHS_IN_BUDGET_FROM
    placement = TV.vllm_placement(keys.version)
    if placement == "device" or (keys.get("vllm_device") is not None and "vllm_mode" not in keys.values
                                 and placement == "mode" and not keys.version_stated):  # a stated 0.18+ drops it
        return _legacy_device(keys, launch, arch, graphs, hardware, notes)
    if placement == "server":
        for name in ("vllm_device", "vllm_gpu_memory_utilization", "vllm_dtype", "vllm_max_model_len"):
            keys.ignore(name, f"deprecated and unused in TRL {'.'.join(map(str, keys.version[:2]))}: "
                              "vLLM runs as `trl vllm-serve`")
        return _server(launch, arch, graphs, hardware, notes)
    default_mode = str(keys.default("vllm_mode", "colocate"))
    mode = str(keys.get("vllm_mode", default_mode))
    spare = (hardware.gpus_per_node or 0) - processes
    if "vllm_mode" not in keys.values and default_mode == "colocate" and launch.server is None and spare > 0:
        mode = "server"
        notes.append(f"vllm_mode unset and --gpus-per-node leaves {spare} GPU(s) beside the {processes} training "
                     "processes: planned as TRL 0.18-0.2x's default, vllm_mode server (`trl vllm-serve` on them)")
    if mode == "colocate":
        tp = keys.int("vllm_tensor_parallel_size", 1)
        if processes % tp:
            raise InputError("vllm_tensor_parallel_size", f"{tp} does not divide the {processes} processes per node")
        utilization = keys.default("vllm_gpu_memory_utilization", 0.3)
        out = {"engine": "vllm_colocate", "gpu_memory_utilization": keys.float("vllm_gpu_memory_utilization", utilization),
               "tensor_parallel_size": tp, "max_model_len": _colocate_model_len(keys, arch, prompt_truncation, completion),
               "max_num_seqs": sequences_per_rank * tp, "cuda_graphs_in_budget": graphs}
        if keys.version >= TV.COLOCATE_BATCHED_TOKENS_FROM:
            out["max_num_batched_tokens"] = COLOCATE_MAX_NUM_BATCHED_TOKENS
        if keys.bool("vllm_enable_sleep_mode", False):
            out["sleep_level"] = 2 if keys.version >= TV.SLEEP_LEVEL_2_FROM else 1
        return out, processes
    if mode != "server":
        raise InputError("vllm_mode", f"{mode!r} is not allowed; allowed: colocate, server")
    for name in colocate_keys:
        keys.ignore(name, "no effect in server mode: set it on `trl vllm-serve`")
    return _server(launch, arch, graphs, hardware, notes)


def _colocate_model_len(keys: Keys, arch: ModelArch, prompt_truncation: int | None, completion: int) -> int:
    """`vllm_max_model_length` from TRL 0.26; before, max_prompt_length + max_completion_length
    (vLLM's own, the model's, when prompts are not truncated). Source: versions.py."""
    given = keys.int("vllm_max_model_length")
    if given is not None:
        return given
    if keys.version < TV.VLLM_MAX_MODEL_LENGTH_FROM and prompt_truncation is not None:
        return prompt_truncation + completion
    return arch.max_position_embeddings


LAST_ENGINE_ON_DEVICE = (0, 15)
"""The release a `vllm_device` key is read under when the stated one has none (versions.py)."""


def _legacy_device(keys: Keys, launch: Launch, arch: ModelArch, graphs: bool, hardware: Any,
                   notes: list[str]) -> tuple[dict[str, Any], int]:
    """TRL 0.14-0.15 `vllm_device`: one vLLM engine in the main process on one GPU. "auto" (the
    default) takes the GPU after the training processes (`cuda:{num_processes}`; from 0.15 cuda:0
    on a one-GPU machine), so the run uses processes + 1 GPUs; a `cuda:K` among the training GPUs
    shares GPU K with rank K, the GPU that binds, planned as colocated. Source: trl 0.14.0 and
    0.15.2 grpo_trainer.py (`vllm_device == "auto"` → next GPU index; `LLM(..., device,
    gpu_memory_utilization, max_model_len=vllm_max_model_len)`), grpo_config.py (defaults "auto",
    0.9). A config with `vllm_device` and no version directive is read this way too."""
    processes = launch.processes_per_node
    release = min(keys.version, LAST_ENGINE_ON_DEVICE)
    device = str(keys.get("vllm_device") or TV.default("vllm_device", release, "auto"))
    one_gpu = hardware.gpus_per_node == 1 and keys.version >= TV.COMPLETIONS_PER_DEVICE_BATCH
    index = (0 if one_gpu else processes) if device == "auto" else to_int("vllm_device", device.rpartition(":")[2] or "0", minimum=0)
    length = keys.int("vllm_max_model_len") or keys.int("vllm_max_model_length") or arch.max_position_embeddings
    utilization = TV.default("vllm_gpu_memory_utilization", release, None)
    out = {"gpu_memory_utilization": keys.float("vllm_gpu_memory_utilization", utilization),
           "tensor_parallel_size": 1, "max_model_len": length, "cuda_graphs_in_budget": graphs}
    notes.append(f"vllm_device: TRL <= 0.15: one vLLM engine on cuda:{index}")
    if index >= processes:
        return {**out, "engine": "vllm_separate", "num_gpus": 1}, processes + 1
    notes.append(f"vllm_device cuda:{index} is a training GPU: planned as vLLM colocated with every rank "
                 "(the shared GPU is the one that binds)")
    return {**out, "engine": "vllm_colocate"}, processes


def _server(launch: Launch, arch: ModelArch, graphs: bool, hardware: Any, notes: list[str]) -> tuple[dict[str, Any], int]:
    processes, server = launch.processes_per_node, launch.server
    values: dict[str, Any] = _cli_values(parse_flags(server.argv[2:], "trl vllm-serve")) if server else {}
    tp = to_int("--tensor_parallel_size", values.pop("tensor_parallel_size", 1), minimum=1)
    dp = to_int("--data_parallel_size", values.pop("data_parallel_size", 1), minimum=1)
    out = {"engine": "vllm_separate",
           "gpu_memory_utilization": to_float("--gpu_memory_utilization", values.pop("gpu_memory_utilization", 0.9)),
           "tensor_parallel_size": tp,
           "max_model_len": to_int("--max_model_len", values.pop("max_model_len", arch.max_position_embeddings), minimum=1),
           "cuda_graphs_in_budget": graphs}
    if to_bool("--enforce_eager", values.pop("enforce_eager", False)):
        out["enforce_eager"] = True
    values.pop("model", None)
    launch.ignored.extend(f"trl vllm-serve --{k}: no effect on memory or not understood" for k in values)
    if server is not None:
        gpus = _visible(server.env) or tp * dp
    elif hardware.gpus_per_node is not None and hardware.gpus_per_node > processes:
        gpus = hardware.gpus_per_node - processes
        notes.append(f"vLLM server on {gpus} GPU(s) per node with `trl vllm-serve` defaults")
    else:
        raise InputError("--gpus-per-node", "vllm_mode server without a `trl vllm-serve` command: give the GPUs per "
                         f"node counting the server's (more than the {processes} training processes)")
    out["num_gpus"] = gpus
    return out, processes + gpus
