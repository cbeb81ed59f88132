"""The frameworks' own argument parsers, where installed, on a file `fit --write` patched.

Only TRL installs here (`pip list`: trl 1.16.0; ms-swift, verl, EasyR1, OpenRLHF, ORZ and
VLM-R1 do not, they need CUDA builds). TRL's check parses the training command the way its
scripts do (`TrlParser((ScriptArguments, GRPOConfig | RLOOConfig, ModelConfig))` and
`parse_args_and_config`: a `--config` YAML first, flags over it) and a `trl vllm-serve` line
with `trl.scripts.vllm_serve.ScriptArguments`. The written copy is *accepted* when it parses
wherever the original parses and leaves no argument unconsumed that the original did not (the
example scripts' own dataclasses hold the rest). GRPOConfig checks its batch against the world
size, which a launcher sets: the parse sees the processes oomless reads the launch as.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
from pathlib import Path
from typing import Any

CPU = ["--use_cpu", "true"]
"""TrainingArguments checks bf16 against the device; on this CPU-only machine `use_cpu` lets it pass."""


def check(framework: str, original: Path, written: Path, cwd: Path, hardware: list[str]) -> tuple[str, str]:
    """(accepted | rejected | not installed | not checked, detail)."""
    if framework != "trl":
        return "not installed", ""
    if importlib.util.find_spec("trl") is None:
        return "not installed", "trl"
    if _commands(original)[2] == "PPOConfig":
        return "not installed", "TRL's PPO scripts parse with PPOConfig, which trl 1.16 no longer has"
    read_as, installed = _releases(original)
    if read_as != installed:  # the patch writes the keys of the release the file runs with
        return "not installed", f"the file runs with trl {'.'.join(map(str, read_as))}; trl {'.'.join(map(str, installed))} is installed"
    before = _parse_trl(original, cwd, _world_size(original, cwd, hardware))
    after = _parse_trl(written, cwd, _world_size(written, cwd, hardware))
    if isinstance(before, str):
        return "not checked", f"the original does not parse either: {before}"[:300]
    if isinstance(after, str):
        return "rejected", after[:300]
    extra = sorted(set(after[1]) - set(before[1]))
    if extra:
        return "rejected", "arguments no dataclass takes: " + " ".join(extra)[:300]
    return "accepted", f"{after[2]}; {len(after[1])} argument(s) left to the script's own dataclasses"


def _commands(path: Path) -> tuple[list[str], list[str] | None, str]:
    """(training-script arguments, `trl vllm-serve` arguments or None, config class name)."""
    from oomless.adapters.common import parse_shell
    from oomless.adapters.trl import launch as L

    text = path.read_text(encoding="utf-8")
    if path.suffix in (".yaml", ".yml"):
        return ["--config", str(path)], None, "GRPOConfig"
    commands = parse_shell(text, str(path))
    job = _sbatch_args(commands, path)
    if job is not None:  # open-r1's sbatch job: the training command slurm/train.slurm runs
        return job, None, "GRPOConfig"
    main = next(c for c in commands if L._is_main(c))
    server = next((c for c in commands if c.argv[:2] == ("trl", "vllm-serve")), None)
    script = next((Path(w).name.lower() for w in main.argv if w.endswith(".py")), "")
    kind = "RLOOConfig" if "rloo" in script else "PPOConfig" if script.startswith("ppo") else "GRPOConfig"
    _, script_args = L._split(main)
    return list(script_args), None if server is None else list(server.argv[2:]), kind


def _releases(path: Path) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(the TRL release oomless reads and patches the file as, the installed one), major.minor."""
    import trl

    from oomless.adapters.common import parse_version
    from oomless.adapters.trl.writer import file_dialect

    read_as = file_dialect(path.read_text(encoding="utf-8"), str(path))
    return tuple(read_as[:2]), tuple(parse_version("trl", trl.__version__)[:2])


def _sbatch_args(commands: list[Any], path: Path) -> list[str] | None:
    """`--config RECIPE OPTIONAL_ARGS` of an open-r1 `sbatch slurm/train.slurm` job (the
    script's `src/open_r1/$TASK.py --config $CONFIG_FILE $OPTIONAL_ARGS`), or None."""
    import shlex

    from oomless.adapters.trl import slurm as S

    cmd = S.sbatch_command(commands)
    if cmd is None:
        return None
    from oomless.adapters.common import read_text

    job = S.parse_job(cmd, lambda name: read_text(path.parent / name), [])  # InputError when absent: layout from the args
    return ["--config", job.path(f"recipes/{job.model}/{job.task}/config_{job.suffix}.yaml"), *shlex.split(job.optional_args)]


def _world_size(path: Path, cwd: Path, hardware: list[str]) -> int:
    """The training processes the file's launch starts, as oomless reads it (GRPOConfig checks
    its batch against `TrainingArguments.world_size`, which a launcher sets: 1 in this process)."""
    from oomless.adapters import HardwareFlags
    from oomless.cli.import_cmd import load_native

    flags = dict(zip(hardware[::2], hardware[1::2]))
    here = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                run, _ = load_native(path, "trl", HardwareFlags(gpu=flags.get("--gpu"), gpus_per_node=_int(flags.get("--gpus-per-node")),
                                                            num_nodes=_int(flags.get("--nodes"))))
    except Exception:  # noqa: BLE001 - unreadable: the parser then sees one process
        return 1
    finally:
        os.chdir(here)
    hw, ro = run.spec.hardware, run.spec.rollout
    return (hw.gpus_per_node - (ro.num_gpus if ro.engine.value == "vllm_separate" else 0)) * hw.num_nodes


def _int(text: str | None) -> int | None:
    return None if text is None else int(text)


def _parse_trl(path: Path, cwd: Path, world_size: int) -> tuple[Any, list[str], str] | str:
    """(parsed dataclasses, unconsumed arguments, what was parsed) or the error text; the
    config classes see ``world_size`` processes, as under the file's launcher."""
    from unittest import mock

    import trl
    from transformers import TrainingArguments
    from trl import ModelConfig, ScriptArguments, TrlParser

    try:
        args, server, kind = _commands(path)
    except (StopIteration, ValueError, Exception) as err:  # noqa: BLE001 - any reading failure is the answer
        return f"{type(err).__name__}: {err}"
    here = os.getcwd()
    os.chdir(cwd)  # a --config path is relative to where the user runs the command
    said = io.StringIO()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(said), \
                mock.patch.object(TrainingArguments, "world_size", new_callable=mock.PropertyMock, return_value=world_size):
            parser = TrlParser((ScriptArguments, getattr(trl, kind), ModelConfig))
            *parsed, rest = parser.parse_args_and_config([*args, *CPU], return_remaining_strings=True)
            what = f"{kind}+ModelConfig+ScriptArguments on {world_size} process(es)"
            if server is not None:
                from trl.scripts.vllm_serve import ScriptArguments as ServeArguments

                _, server_rest = TrlParser((ServeArguments,)).parse_args_and_config(server, return_remaining_strings=True)
                rest = [*rest, *(f"vllm-serve:{w}" for w in server_rest)]
                what += " and vllm-serve's ScriptArguments"
    except SystemExit as err:
        errors = [line for line in said.getvalue().splitlines() if "error:" in line]
        return f"argparse exit {err.code}: " + (errors[-1].strip() if errors else " ".join(said.getvalue().split()[-20:]))
    except Exception as err:  # noqa: BLE001 - the parser's own refusal is the answer
        return f"{type(err).__name__}: {err}".replace("\n", " ")
    finally:
        os.chdir(here)
    return parsed, [w for w in rest if w.startswith("-") or w.startswith("vllm-serve:-")], what
