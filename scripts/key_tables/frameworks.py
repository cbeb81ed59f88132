"""Which files of each framework's wheel hold its keys, read into {key: {type, default}} per
version without importing the framework.

- TRL: the dataclasses `trl grpo` parses (`dataclass_types` in `trl/scripts/grpo.py`:
  GRPOScriptArguments, GRPOConfig, ModelConfig, and DatasetMixtureConfig in 1.x), from
  `trl/trainer/{grpo_config,base_config,model_config}.py` and `trl/scripts/{utils,grpo}.py`.
  GRPOConfig's base `TrainingArguments` is transformers' (its own table).
- transformers: `TrainingArguments` in `transformers/training_args.py`.
- ms-swift: `RLHFArguments` (what `swift rlhf` parses) in `swift/llm/argument/rlhf_args.py`
  (3.x) or `swift/arguments/rlhf_args.py` (4.x), with its bases from the argument packages and
  `swift/trainers/arguments.py`, `swift/rlhf_trainers/{args_mixin,arguments}.py`.
- verl: every key of `verl/trainer/config/_generated_ppo_trainer.yaml` (>= 0.5) or the flat
  `ppo_trainer.yaml` (0.3-0.4), flattened to dotted keys.
- OpenRLHF: every `parser.add_argument` of `openrlhf/cli/train_ppo_ray.py`.
"""

from __future__ import annotations

import ast
import zipfile
from pathlib import Path
from typing import Any

import yaml

from oomless.mappings import flatten

from .dataclass_fields import classes_in, fields_of, literal, MISSING

Table = dict[str, dict[str, Any]]


def wheel_version(wheel: Path) -> str:
    return wheel.name.split("-")[1]


def _read(z: zipfile.ZipFile, names: list[str]) -> dict[str, str]:
    present = set(z.namelist())
    return {n: z.read(n).decode() for n in names if n in present}


# --- TRL and transformers ----------------------------------------------------------------------

TRL_FILES = ["trl/trainer/grpo_config.py", "trl/trainer/base_config.py", "trl/trainer/model_config.py",
             "trl/scripts/utils.py", "trl/scripts/grpo.py"]


def trl_parser_classes(grpo_script: str) -> list[str]:
    """The class names in `dataclass_types = (...)` of trl/scripts/grpo.py."""
    for node in ast.walk(ast.parse(grpo_script)):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "dataclass_types" for t in node.targets):
            return [ast.unparse(e) for e in node.value.elts]
    raise ValueError("trl/scripts/grpo.py has no dataclass_types")


def trl_keys(wheel: Path) -> tuple[Table, set[str]]:
    with zipfile.ZipFile(wheel) as z:
        sources = _read(z, TRL_FILES)
    classes = classes_in(sources)
    table: Table = {}
    external: set[str] = set()
    for name in trl_parser_classes(sources["trl/scripts/grpo.py"]):
        fields, outside = fields_of(classes, name)
        table.update(fields)
        external |= outside
    return table, external


def transformers_keys(wheel: Path) -> Table:
    with zipfile.ZipFile(wheel) as z:
        sources = _read(z, ["transformers/training_args.py"])
    return fields_of(classes_in(sources), "TrainingArguments")[0]


# --- ms-swift -----------------------------------------------------------------------------------

SWIFT_DIRS = ("swift/llm/argument/", "swift/arguments/")
SWIFT_FILES = ("swift/trainers/arguments.py", "swift/trainers/rlhf_arguments.py", "swift/ray_utils/arguments.py", "swift/ray/arguments.py",
               "swift/rlhf_trainers/args_mixin.py", "swift/rlhf_trainers/arguments.py")
SWIFT_EXTERNAL_OK = {"TrainingArguments", "Seq2SeqTrainingArguments", "HfTrainingArguments",
                     "HfSeq2SeqTrainingArguments"}
"""transformers' classes (their keys are in the transformers table)."""


def swift_keys(wheel: Path) -> tuple[Table, set[str]]:
    with zipfile.ZipFile(wheel) as z:
        names = [n for n in z.namelist() if n.endswith(".py") and (n.startswith(SWIFT_DIRS) or n in SWIFT_FILES)]
        sources = _read(z, names)
    # argument files first: a later file (the trainers') does not replace an argument class
    ordered = dict(sorted(sources.items(), key=lambda kv: not kv[0].startswith(SWIFT_DIRS)))
    classes = {}
    for path, text in reversed(list(ordered.items())):
        classes.update(classes_in({path: text}))
    return fields_of(classes, "RLHFArguments")


def swift_sources(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        return sorted(n for n in z.namelist() if n.endswith("rlhf_args.py") and n.startswith(SWIFT_DIRS))


# --- verl ---------------------------------------------------------------------------------------

VERL_FILES = ("verl/trainer/config/_generated_ppo_trainer.yaml", "verl/trainer/config/ppo_trainer.yaml")


def verl_yaml(wheel: Path) -> tuple[str, dict[str, Any]]:
    """(file read, flattened defaults): the generated file where it exists, else ppo_trainer.yaml."""
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        name = next(n for n in VERL_FILES if n in names)
        data = yaml.safe_load(z.read(name).decode())
    data.pop("defaults", None)
    return name, flatten(data)


def verl_keys(wheel: Path) -> Table:
    return {k: {"default": v} for k, v in verl_yaml(wheel)[1].items()}


# --- OpenRLHF -----------------------------------------------------------------------------------

def _value(node: ast.AST) -> Any:
    value = literal(node)
    return ast.unparse(node) if value is MISSING else value


def _fstring_names(node: ast.JoinedStr) -> list[str]:
    tail = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
    return [f"--{prefix}{tail.removeprefix('--')}" for prefix in ("actor", "critic")]


def argparse_flags(source: str) -> Table:
    """Every `add_argument(...)`: flag -> type, default, action, choices, nargs."""
    flags: Table = {}
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument"):
            continue
        names = [a.value for a in node.args if isinstance(a, ast.Constant)]
        if not names:  # f-string names: --{prefix}.x for actor and critic
            names = [n for a in node.args if isinstance(a, ast.JoinedStr) for n in _fstring_names(a)]
        info = {k.arg: _value(k.value) for k in node.keywords if k.arg in ("type", "default", "action", "choices", "nargs")}
        if "type" in info:
            info["type"] = str(info["type"])
        for name in names:
            flags[name] = info
    return flags


def openrlhf_flags(wheel: Path) -> Table:
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith("openrlhf/cli/train_ppo_ray.py"))
        return argparse_flags(z.read(name).decode())


def openrlhf_keys(wheel: Path) -> Table:
    """Flags as the range table holds them: type and default (store_true flags default false)."""
    out: Table = {}
    for flag, info in openrlhf_flags(wheel).items():
        entry = {"type": str(info.get("type", info.get("action", "")))}
        if "default" in info or info.get("action") == "store_true":
            entry["default"] = info.get("default", False)
        out[flag] = entry
    return out

