"""`oomless fit --from trl JOB --write` for an open-r1 `sbatch slurm/train.slurm` job: fit's
changes go into the job's OPTIONAL_ARGS (HEAD `--args "..."`, ca8664d the 5th argument), which
the script appends to the training command after `--config CONFIG_FILE`, so they override the
recipe YAML (TRL's parser: the YAML first, then the command line: trl/scripts/utils.py
`TrlParser.parse_args_and_config`). Only the job file changes: the recipe, the accelerate config
and the script stay as the user has them. What OPTIONAL_ARGS cannot say (processes, ZeRO stage,
nodes, the server's GPUs) reads back unchanged and is named by the patch's read-back.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from ...errors import InputError
from ..common import ShellCommand, load_yaml_mapping, parse_shell, parse_version
from ..patch import shell_text as SH
from ..patch.edits import Edit, apply_edits
from . import slurm as SL
from .reader import file_reader

STYLE = "sbatch_flags"
"""The patch style of such a job (`adapters.patch`): `--key value` words inside OPTIONAL_ARGS."""


def is_job(text: str, path: str) -> bool:
    try:
        return SL.sbatch_command(parse_shell(text, path)) is not None
    except InputError:
        return False


def dialect(text: str, path: Path) -> tuple[int, ...] | None:
    """The TRL release the reader reads the job under: its directive, else setup.py's pin."""
    notes: list[str] = []
    cmd = SL.sbatch_command(parse_shell(text, str(path)))
    read = file_reader(path.resolve().parent)
    job = SL.parse_job(cmd, read, notes)
    directives = SL._pinned(read, job, text, notes)
    for word in directives.split():
        if word.startswith("trl=="):
            return parse_version("trl version", word[len("trl=="):])
    return None


class JobFile:
    """The user's job file in the patch's terms: a key's current value (OPTIONAL_ARGS, else the
    recipe YAML) and the text with new OPTIONAL_ARGS."""

    STYLE = STYLE
    SERVER_FIELDS = ("rollout.gpu_memory_utilization", "rollout.max_model_len", "rollout.max_num_seqs",
                     "rollout.max_num_batched_tokens", "rollout.enforce_eager", "rollout.cuda_graphs_in_budget")
    """The `trl vllm-serve` engine's settings: the script starts it with --model, --tp and --dp only."""
    FIXED = ("rollout.engine", "rollout.tensor_parallel_size", "rollout.num_gpus", "distribution.strategy",
             "distribution.offload_params", "distribution.offload_optimizer", "hardware.gpus_per_node",
             "hardware.num_nodes")
    """Spec fields only the sbatch arguments, the accelerate config or the script set (--tp/--dp,
    --accelerator, --nodes, GPUS_PER_NODE): fit keeps them as the job has them."""

    def fixed(self, spec: Any) -> tuple[str, ...]:
        """`FIXED`, and the server engine's settings when the job generates on its server."""
        return self.FIXED + (self.SERVER_FIELDS if spec.rollout.engine.value == "vllm_separate" else ())

    def __init__(self, path: Path, text: str) -> None:
        self.path, self.text = path, text
        self.cmd: ShellCommand = SL.sbatch_command(parse_shell(text, str(path)))
        read = file_reader(path.resolve().parent)
        self.job = SL.parse_job(self.cmd, read, [])
        name = self.job.path(f"recipes/{self.job.model}/{self.job.task}/config_{self.job.suffix}.yaml")
        self.recipe = load_yaml_mapping(SL._recipe(self.job, name, read), name, allow_empty=False)
        self.args = SL._split_args(self.job)

    def _given(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        key = None
        for word in self.args:
            if word.startswith("--"):
                key, _, inline = word[2:].partition("=")
                out[key] = [inline] if inline else []
            elif key is not None:
                out[key].append(word)
        return out

    def value(self, key: str) -> Any:
        given = self._given()
        if key in given:
            words = given[key]
            return True if not words else words[0] if len(words) == 1 else words
        return self.recipe.get(key)

    def patch(self, values: dict[str, Any]) -> str:
        if any(c in self.job.optional_args for c in "$`"):
            raise InputError("--args" if self.job.tp is not None else "OPTIONAL_ARGS (5th argument)",
                             f"{self.job.optional_args!r} expands a shell variable or command: fit's changes cannot be "
                             "written into it without losing that; add them by hand")
        words, skip = [], False
        for word in self.args:  # the user's OPTIONAL_ARGS without the keys that change
            if word.startswith("--"):
                skip = word[2:].partition("=")[0] in values
            if not skip:
                words.append(word)
        for key, value in values.items():
            if value is None and key in self.recipe:
                raise InputError(key, f"fit leaves it to TRL's default, but the recipe sets it ({self.recipe[key]!r}); "
                                 "OPTIONAL_ARGS can override a value, not unset it: remove it from the recipe by hand")
            if value is None:
                continue
            shown = [("true" if v is True else "false" if v is False else str(v))
                     for v in (value if isinstance(value, (list, tuple)) else [value])]
            # `--key=value`: HEAD's script greps OPTIONAL_ARGS for `--gradient_accumulation_steps=N`
            # to pass the same N to `accelerate launch` (slurm.py `_launcher_accumulation`)
            words += [f"{SH.flag_name(key)}={shown[0]}"] if len(shown) == 1 else [SH.flag_name(key), *shown]
        return apply_edits(self.text, [self._edit(shlex.join(words))])

    def _edit(self, joined: str) -> Edit:
        """Replace the OPTIONAL_ARGS word, or add it after the job's last argument."""
        commands = SH.script_commands(self.text, str(self.path))
        words = next(c for c in commands if c and SH._unquoted(c[0].text).rsplit("/", 1)[-1] == "sbatch"
                     and any(SH._unquoted(w.text).endswith("train.slurm") for w in c))
        at = next(i for i, w in enumerate(words) if SH._unquoted(w.text).endswith("train.slurm"))
        args = words[at + 1:]
        quoted = shlex.quote(joined)
        if self.job.tp is not None:  # HEAD: --args VALUE
            for i, w in enumerate(args[:-1]):
                if SH._unquoted(w.text) == "--args":
                    return Edit(args[i + 1].start, args[i + 1].end, quoted)
            return Edit(words[-1].end, words[-1].end, f" --args {quoted}")
        if len(args) >= 5:  # ca8664d: MODEL TASK SUFFIX ACCELERATOR OPTIONAL_ARGS
            return Edit(args[4].start, args[4].end, quoted)
        return Edit(words[-1].end, words[-1].end, f" {quoted}")
