"""open-r1's Slurm launch, `sbatch [--nodes N] slurm/train.slurm ARGS`, read as the commands the
script runs; the script's bash is never executed and only `GPUS_PER_NODE=` and `#SBATCH --nodes`
are read from it (regular expressions).

What the script does (huggingface/open-r1 `slurm/train.slurm` at ca8664d and at 1416fa0, HEAD):
- ARGS: ca8664d positional `MODEL TASK CONFIG_SUFFIX ACCELERATOR ['OPTIONAL_ARGS']`; HEAD flags
  `--model --task --config --accelerator [--dp N] [--tp N] [--args "..."]` (any other option, or
  a missing value, exits; `--help` anywhere prints the usage and exits).
- CONFIG_FILE=recipes/$MODEL/$TASK/config_$CONFIG_SUFFIX.yaml; the accelerate config
  recipes/accelerate_configs/$ACCELERATOR.yaml; GPUS_PER_NODE=8; NUM_NODES=$SLURM_NNODES.
- A config line `use_vllm: true` (grep -qE '^\\s*use_vllm:\\s*true') gives the last node to
  `trl vllm-serve --model <model_name_or_path> --tensor_parallel_size TP [--data_parallel_size DP]`
  (HEAD: --tp/--dp, default 1; ca8664d: scripts/get_tensor_parallel_size.py, DP unset) and appends
  `--vllm_server_host=<node>` to OPTIONAL_ARGS; training runs on NUM_NODES-1 nodes.
- Training: `accelerate launch --config_file ... --gradient_accumulation_steps G --num_machines
  NUM_NODES --num_processes NUM_NODES*GPUS_PER_NODE ... src/open_r1/$TASK.py --config CONFIG_FILE
  $OPTIONAL_ARGS` inside `bash -c` (so OPTIONAL_ARGS is split as the shell splits it). G is the
  config's `gradient_accumulation_steps` (HEAD: a `--gradient_accumulation_steps=` in OPTIONAL_ARGS
  wins); the training script reads its own value, so the launcher's has no memory effect.

`read_job` turns such a launch into the `Launch` those two commands give (`launch.read_launch`);
the server's node is planned beside a training node (`own_node_hardware`).
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import gcd
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from ...errors import InputError
from ..common import ShellCommand, load_yaml_mapping, parse_flags, to_int
from ...frontends.versions import read_directives

if TYPE_CHECKING:
    from .launch import Launch

SCRIPT = "slurm/train.slurm"
DEFAULT_GPUS_PER_NODE = 8
"""`GPUS_PER_NODE=8` in open-r1's slurm/train.slurm (ca8664d and 1416fa0), used when the script is not readable."""
TASKS = ("grpo",)
"""`src/open_r1/$TASK.py` the script runs that this reader plans (sft.py has no rollout)."""
FLAG_OPTIONS = ("model", "task", "config", "accelerator", "dp", "tp", "args")
"""HEAD's `case $1 in` options; anything else is `Unknown option` and exit 1."""
REQUIRED = ("model", "task", "config", "accelerator")
POSITIONAL_NAMES = ("model_name (1st argument)", "task (2nd argument)", "config_suffix (3rd argument)",
                    "accelerator (4th argument)")
ACCELERATOR_NAMES = ("ddp", "fsdp", "zero1", "zero2", "zero3")
"""Names probed for the allowed list when an accelerator file is missing (open-r1's
recipes/accelerate_configs/ holds ddp, fsdp, zero2, zero3 at ca8664d and HEAD)."""
USE_VLLM_LINE = re.compile(r"(?m)^[ \t]*use_vllm:[ \t]*true")
"""The script's `grep -qE '^\\s*use_vllm:\\s*true' $CONFIG_FILE` (case-sensitive: `True` does not match)."""
PINS = {"trl": re.compile(r"[\"']trl(?:\[[\w,\s]*\])?==([0-9][\w.]*)[\"']"),
        "vllm": re.compile(r"[\"']vllm==([0-9][\w.]*)[\"']")}
"""open-r1's setup.py pins (`"trl[vllm]==0.18.0"` at HEAD, `"trl==0.16.0"`, `"vllm==0.7.2"` at
ca8664d): the `openr1` venv the script activates is installed from them."""


@dataclass(frozen=True)
class Job:
    """The arguments of one `sbatch slurm/train.slurm` call, as the script reads them."""

    root: str
    """The folder sbatch runs in (the repository root), relative to the launch file ("" = same)."""
    model: str
    task: str
    suffix: str
    accelerator: str
    optional_args: str
    tp: int | None
    """HEAD's --tp (default 1); None at ca8664d (derived from the model)."""
    dp: int | None
    nodes: int
    gpus_per_node: int
    ignored: tuple[str, ...] = ()

    def path(self, name: str) -> str:
        return posixpath.join(self.root, name) if self.root else name

    def field(self, flag: str) -> str:
        """The user's spelling of a script argument, for errors."""
        if self.tp is None and flag in REQUIRED:
            return POSITIONAL_NAMES[REQUIRED.index(flag)]
        return f"--{flag}"


def sbatch_command(commands: Sequence[ShellCommand]) -> ShellCommand | None:
    """The first `sbatch ... train.slurm ...` command, or None."""
    for cmd in commands:
        if PurePosixPath(cmd.argv[0]).name == "sbatch" and _script_at(cmd.argv) is not None:
            return cmd
    return None


def _script_at(argv: Sequence[str]) -> int | None:
    return next((i for i, w in enumerate(argv[1:], start=1) if PurePosixPath(w).name == "train.slurm"), None)


def _try(read: Callable[[str], str], name: str) -> str | None:
    try:
        return read(name)
    except InputError:
        return None


def read_job(name: str, text: str, cmd: ShellCommand, read: Callable[[str], str]) -> Launch:
    """The `Launch` of an open-r1 sbatch job: the `trl vllm-serve` and `accelerate launch`
    commands the script runs, read by `launch.read_launch`, plus the job's notes."""
    from . import launch as TL

    notes: list[str] = []
    job = parse_job(cmd, read, notes)
    config_name = job.path(f"recipes/{job.model}/{job.task}/config_{job.suffix}.yaml")
    config_text = _recipe(job, config_name, read)
    accelerate_name = job.path(f"recipes/accelerate_configs/{job.accelerator}.yaml")
    if _try(read, accelerate_name) is None:
        found = [n for n in ACCELERATOR_NAMES if _try(read, job.path(f"recipes/accelerate_configs/{n}.yaml")) is not None]
        raise InputError(job.field("accelerator"), f"{job.accelerator!r}: {accelerate_name} does not exist; allowed: "
                         + (", ".join(found) if found else "a name NAME with recipes/accelerate_configs/NAME.yaml"))
    config = load_yaml_mapping(config_text, config_name, allow_empty=False)
    optional = _split_args(job)
    unset = [w for w in optional if w.startswith("$")]  # expanded at run time: not readable here
    optional = [w for w in optional if not w.startswith("$")]
    notes.extend(f"OPTIONAL_ARGS word {w!r} is expanded at run time: not read" for w in unset)
    nodes = job.nodes
    server: list[str] = []
    if USE_VLLM_LINE.search(config_text):
        if nodes < 2:
            raise InputError("--nodes", f"{nodes}: {config_name} sets use_vllm: true, so the script gives the last node "
                             "to `trl vllm-serve` and leaves no node to train; allowed: 2 or more (sbatch --nodes)")
        nodes -= 1
        tp = job.tp if job.tp is not None else _derived_tp(config, job.gpus_per_node, notes)
        if tp * (job.dp or 1) > job.gpus_per_node:
            raise InputError("--dp", f"--tp {tp} × --dp {job.dp or 1} = {tp * (job.dp or 1)} vLLM GPUs exceed the server node's "
                             f"{job.gpus_per_node} (GPUS_PER_NODE); allowed: tp × dp <= {job.gpus_per_node}")
        server = ["trl", "vllm-serve", "--model", str(config.get("model_name_or_path")), "--tensor_parallel_size", str(tp)]
        server += ["--data_parallel_size", str(job.dp)] if job.dp is not None else []
        optional.append("--vllm_server_host=VLLM_NODE")
    accelerate = ["accelerate", "launch", "--config_file", accelerate_name,
                  "--gradient_accumulation_steps", _launcher_accumulation(job, config_text, optional, config_name),
                  "--num_machines", str(nodes), "--num_processes", str(nodes * job.gpus_per_node),
                  job.path(f"src/open_r1/{job.task}.py"), "--config", config_name, *optional]
    commands = ((shlex.join(server) + " &\n") if server else "") + shlex.join(accelerate) + "\n"
    launch = TL.read_launch(name + " (as slurm/train.slurm runs it)", commands, read)
    directives = _pinned(read, job, text, notes)
    return dataclasses.replace(launch, directives_text=directives + text + "\n" + config_text,
                               ignored=[*job.ignored, *launch.ignored], notes=notes,
                               node_gpus=job.gpus_per_node if server else None)


def parse_job(cmd: ShellCommand, read: Callable[[str], str], notes: list[str]) -> Job:
    at = _script_at(cmd.argv)
    assert at is not None
    root = cmd.cwd
    script_path = posixpath.join(root, cmd.argv[at]) if root else cmd.argv[at]
    script_text = _try(read, script_path)
    nodes, ignored = _sbatch_nodes(cmd.argv[1:at], script_text)
    gpus = DEFAULT_GPUS_PER_NODE
    if script_text is None:
        notes.append(f"{script_path} not readable: planned as open-r1's script (GPUS_PER_NODE={gpus}, "
                     "ca8664d and 1416fa0), its layout taken from the arguments")
    else:
        found = re.search(r"(?m)^[ \t]*GPUS_PER_NODE=(\d+)[ \t]*(?:#.*)?$", script_text)
        gpus = to_int("GPUS_PER_NODE", found.group(1), minimum=1) if found else gpus
    args = list(cmd.argv[at + 1:])
    flags = _flag_layout(script_text, args)
    common = {"root": root, "nodes": nodes, "gpus_per_node": gpus}
    if flags:
        return Job(**common, **_flags(args), ignored=tuple(ignored))
    values = (args + [""] * 5)[:5]
    for i, value in enumerate(values[:4]):
        if not value:
            raise InputError(POSITIONAL_NAMES[i], "missing: the script takes MODEL TASK CONFIG_SUFFIX ACCELERATOR "
                             "['OPTIONAL_ARGS'] (sbatch slurm/train.slurm Qwen2.5-1.5B-Instruct grpo demo zero2)")
    ignored += [f"slurm/train.slurm argument {i} {w!r}: the script reads $1-$5 only" for i, w in enumerate(args[5:], 6)]
    model, task, suffix, accelerator, optional = values
    _check_task(task, POSITIONAL_NAMES[1])
    return Job(**common, model=model, task=task, suffix=suffix, accelerator=accelerator, optional_args=optional,
               tp=None, dp=None, ignored=tuple(ignored))


def _flag_layout(script_text: str | None, args: list[str]) -> bool:
    """HEAD's `--model X ...` (the script has `--model)` in its `case`), else ca8664d's `$1 $2 ...`;
    an unreadable script: whichever the arguments use."""
    if script_text is not None and re.search(r"(?m)^\s*--model\)", script_text):
        return True
    if script_text is not None and re.search(r"(?m)^\s*MODEL=\$1\b", script_text):
        return False
    return bool(args) and args[0].startswith("--")


def _flags(args: list[str]) -> dict[str, Any]:
    if "--help" in " ".join(args):  # `[[ "$*" == *"--help"* ]]`
        raise InputError("--help", "slurm/train.slurm prints its usage and exits: nothing is trained; remove it")
    values: dict[str, str] = {}
    i = 0
    while i < len(args):
        name = args[i][2:] if args[i].startswith("--") else ""
        if name not in FLAG_OPTIONS:
            raise InputError(f"slurm/train.slurm {args[i]}", "unknown option (the script exits on it); allowed: "
                             + ", ".join(f"--{o} VALUE" for o in FLAG_OPTIONS))
        if i + 1 >= len(args):
            raise InputError(f"--{name}", "needs a value (the script's `shift 2` fails and it exits)")
        values[name] = args[i + 1]
        i += 2
    missing = [f"--{o}" for o in REQUIRED if not values.get(o)]
    if missing:
        raise InputError(missing[0], "missing: slurm/train.slurm requires --model, --task, --config and --accelerator "
                         f"(missing: {', '.join(missing)})")
    _check_task(values["task"], "--task")
    return {"model": values["model"], "task": values["task"], "suffix": values["config"],
            "accelerator": values["accelerator"], "optional_args": values.get("args", ""),
            "tp": to_int("--tp", values.get("tp", "1"), minimum=1), "dp": to_int("--dp", values.get("dp", "1"), minimum=1)}


def _check_task(task: str, field: str) -> None:
    if task not in TASKS:
        raise InputError(field, f"{task!r} is not planned (src/open_r1/{task}.py has no rollout); allowed: {', '.join(TASKS)}")


def _sbatch_nodes(options: Sequence[str], script_text: str | None) -> tuple[int, list[str]]:
    """SLURM_NNODES: sbatch's `--nodes N`/`-N N` (over the script's `#SBATCH` lines), default 1."""
    found, ignored, i = None, [], 0
    while i < len(options):
        word = options[i]
        match = re.fullmatch(r"(?:--nodes=|-N)(.+)", word)
        if match:
            found = match.group(1)
        elif word in ("--nodes", "-N") and i + 1 < len(options):
            found, i = options[i + 1], i + 1
        elif word.startswith("-"):
            name = word.split("=", 1)[0]
            gpus = name in ("--gres", "--gpus", "--gpus-per-node", "-G")
            ignored.append(f"sbatch {name}: " + ("not read: the script starts GPUS_PER_NODE processes per node "
                                                 "whatever sbatch allocates" if gpus else "no effect on memory"))
        i += 1
    if found is None and script_text is not None:
        for line in script_text.splitlines()[1:]:
            if line.strip() and not line.lstrip().startswith("#"):
                break  # sbatch reads #SBATCH lines only before the first command
            match = re.match(r"\s*#SBATCH\s+(?:--nodes[= ]|-N\s*)(\S+)", line)
            found = match.group(1) if match else found
    if found is None:
        return 1, ignored
    if not re.fullmatch(r"\d+", found):
        raise InputError("--nodes", f"{found!r}: one node count is planned (SLURM_NNODES); allowed: a whole number >= 1")
    return to_int("--nodes", found, minimum=1), ignored


def _recipe(job: Job, config_name: str, read: Callable[[str], str]) -> str:
    text = _try(read, config_name)
    if text is not None:
        return text
    hint = ""
    if job.suffix.startswith("config_"):
        bare = job.suffix[len("config_"):]
        if _try(read, job.path(f"recipes/{job.model}/{job.task}/config_{bare}.yaml")) is not None:
            hint = f"; the script adds `config_` itself: give {bare!r}"
    raise InputError(job.field("config"), f"{job.suffix!r}: {config_name} does not exist (the script builds "
                     f"recipes/$MODEL/$TASK/config_$CONFIG_SUFFIX.yaml); allowed: a suffix with such a file{hint}")


def _split_args(job: Job) -> list[str]:
    try:
        return shlex.split(job.optional_args)
    except ValueError as err:
        raise InputError("--args" if job.tp is not None else "OPTIONAL_ARGS (5th argument)",
                         f"{job.optional_args!r}: {err} (the script's `bash -c` cannot split it)") from None


def _launcher_accumulation(job: Job, config_text: str, optional: list[str], config_name: str) -> str:
    """GRAD_ACC_STEPS: `grep 'gradient_accumulation_steps' CONFIG_FILE | awk '{print $2}'`, at
    HEAD overridden by a `--gradient_accumulation_steps=N` in OPTIONAL_ARGS."""
    if job.tp is not None:
        given = next((w.split("=", 1)[1] for w in optional if w.startswith("--gradient_accumulation_steps=")), None)
        if given:
            return given
    line = next((l for l in config_text.splitlines() if "gradient_accumulation_steps" in l), None)
    words = line.split() if line else []
    if len(words) < 2:
        raise InputError("gradient_accumulation_steps", f"not set in {config_name}: the script passes it to "
                         "`accelerate launch --gradient_accumulation_steps`, which then fails; set it in the recipe")
    return words[1]


def _derived_tp(config: dict[str, Any], default_tp: int, notes: list[str]) -> int:
    """ca8664d's scripts/get_tensor_parallel_size.py: the node's GPU count, or gcd(heads, GPUs)
    when num_attention_heads is not a multiple of it; the GPU count when the config cannot be
    loaded (it prints a warning and falls back)."""
    from ...catalog.resolve import load_model

    model = str(config.get("model_name_or_path"))
    try:
        heads = load_model(model).num_attention_heads
    except InputError:
        notes.append(f"vLLM tensor parallel size {default_tp}: {model}'s config is not available here, and "
                     "scripts/get_tensor_parallel_size.py then falls back to GPUS_PER_NODE")
        return default_tp
    tp = default_tp if heads % default_tp == 0 else max(gcd(heads, default_tp), 1)
    notes.append(f"vLLM tensor parallel size {tp}: scripts/get_tensor_parallel_size.py (ca8664d) for "
                 f"{heads} attention heads on {default_tp} GPUs")
    return tp


def _pinned(read: Callable[[str], str], job: Job, text: str, notes: list[str]) -> str:
    """`# oomless: trl==X vllm==Y` from the repository's setup.py pins, when the launch file states
    no TRL release (its own directive, later in the text, wins either way)."""
    if "trl" in read_directives(text):
        return ""
    setup = _try(read, job.path("setup.py"))
    found = {k: m.group(1) for k, p in PINS.items() if setup and (m := p.search(setup))}
    if "trl" not in found:
        return ""
    pins = " ".join(f"{k}=={v}" for k, v in found.items())
    notes.append(f"{pins}: {job.path('setup.py')}'s pins (the `openr1` venv the script activates is installed from them)")
    return f"# oomless: {pins}\n"


def own_node_hardware(hw: Any, launch: Any, gpus: int, nodes: int, notes: list[str]) -> Any:
    """The hardware flags checked against a job whose vLLM server has a node of its own: that
    node's GPUs are planned beside a training node's (the spec has no separate-node notion), so
    `--gpus-per-node` may be the script's GPUS_PER_NODE and `--nodes` sbatch's count."""
    served = _served_gpus(launch.server)
    if hw.num_nodes == nodes + 1:
        hw = dataclasses.replace(hw, num_nodes=nodes)
    if gpus - launch.processes_per_node != served:
        why = (f"the config does not use the `trl vllm-serve` slurm/train.slurm starts on its last node ({served} "
               "GPU(s))")
        hint = ("its vllm_mode / vllm_device keys place vLLM elsewhere (vllm_mode: server uses the script's server)"
                if "trl" in read_directives(launch.directives_text) else "it is read under the TRL release this plan "
                "assumes; state the job's with `# oomless: trl==X.Y` (open-r1 pins it in setup.py)")
        if hw.gpus_per_node is not None and hw.gpus_per_node != gpus:
            raise InputError("--gpus-per-node", f"{hw.gpus_per_node}, but {why} and runs {gpus} GPUs per node; {hint}")
        notes.append(f"{why}: its vLLM is planned as the config says and that node is not planned; {hint}")
        return hw
    if hw.gpus_per_node not in (None, launch.node_gpus, gpus):
        raise InputError("--gpus-per-node", f"{hw.gpus_per_node}, but slurm/train.slurm runs {launch.node_gpus} GPUs per "
                         f"node (GPUS_PER_NODE); allowed: {launch.node_gpus}, or {gpus} (a training node's "
                         f"{launch.processes_per_node} and the server's {served} planned as one node)")
    notes.append(f"slurm/train.slurm runs the vLLM server on a node of its own ({served} of its {launch.node_gpus} GPUs): "
                 f"planned beside each training node's {launch.processes_per_node} GPUs as one {gpus}-GPU node; "
                 "per-GPU memory is the same, host RAM per node then counts both")
    if hw.gpus_per_node == launch.node_gpus:
        hw = dataclasses.replace(hw, gpus_per_node=gpus)
    return hw


def _served_gpus(server: ShellCommand | None) -> int:
    if server is None:
        return 0
    flags = parse_flags(server.argv[2:], "trl vllm-serve")
    tp = int((flags.get("tensor_parallel_size") or ["1"])[0])
    return tp * int((flags.get("data_parallel_size") or ["1"])[0])
