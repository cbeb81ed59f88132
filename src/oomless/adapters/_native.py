"""Small helpers shared by the verl, EasyR1, OpenRLHF, ORZ and VLM-R1 adapters.

What `common` does not already give every adapter: collecting an imported spec with its
ignored keys and notes, Hydra/OmegaConf-style dotted keys and overrides, catalog names for
local model paths, the hardware block, and YAML/comment output for exporters. Every user
mistake is an `InputError` naming the key or flag, its value and what is allowed.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import InputError
from .. import safe_paths as SP
from ..safe_yaml import load_yaml_scalar
from ..spec.dataset import DataRef
from . import HardwareFlags


MISSING = object()


@dataclass
class Collected:
    """What an importer gathered: the spec dict, and the lines for `ImportResult`."""

    spec: dict[str, Any] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def set(self, dotted: str, value: Any) -> None:
        set_dotted(self.spec, dotted, value)

    def ignore(self, key: str, value: Any, why: str) -> None:
        self.ignored.append(f"{key}={_show(value)}: {why}")


def _show(value: Any) -> str:
    return value if isinstance(value, str) else yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


def set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    node = data
    *parents, leaf = dotted.split(".")
    for key in parents:
        child = node.get(key)
        if not isinstance(child, dict):
            child = node[key] = {}
        node = child
    node[leaf] = value


_OVERRIDE = re.compile(r"^(\+{0,2})([A-Za-z_][\w.\-]*)=(.*)$", re.S)


def parse_override(token: str) -> tuple[str, Any]:
    """A Hydra/OmegaConf command-line override `key.sub=value` (also `+key=`, `++key=`).
    Values are read as YAML scalars or flow lists, as Hydra's grammar reads them."""
    match = _OVERRIDE.match(token)
    if match is None:
        raise InputError(token, "not a `key.sub=value` override")
    key, raw = match.group(2), match.group(3)
    return key, load_yaml_scalar(raw)


def model_ref(name: Any, key: str, collected: Collected) -> str:
    """A model path as the spec's `model`: kept when it exists here or names a catalog
    model; a local path that is not on this machine is replaced by the catalog model with
    the same folder name (`/data/Qwen2.5-7B-Instruct` → `Qwen/Qwen2.5-7B-Instruct`)."""
    from ..catalog.resolve import catalog_ids

    if not isinstance(name, str) or not name.strip():
        raise InputError(key, f"{name!r} is not a model name or path")
    variable = re.search(r"\$\{?([A-Za-z_]\w*)", name)
    if variable and not re.search(r"[\w.\-]$", name.rstrip("/")) or variable and name.rstrip("/").endswith("}"):
        raise InputError(key, f"{name} is a variable the script never sets; set {variable.group(1)}=<model id or "
                              "path> in the script")
    if not variable and not SP.path_problem(name) and SP.exists(SP.expand_user(name)):
        return name
    ids = catalog_ids()
    lowered = {i.lower(): i for i in ids}
    if name.lower() in lowered:
        return lowered[name.lower()]
    base = Path(name.rstrip("/")).name.lower()
    matches = [i for i in ids if i.split("/", 1)[-1].lower() == base]
    if len(matches) == 1:
        collected.notes.append(f"{key}={name} is not on this machine; planned as catalog model {matches[0]}")
        return matches[0]
    if variable:
        raise InputError(key, f"{name}: {variable.group(1)} is never set in the script and the folder name is not a "
                              f"catalog model; set {variable.group(1)}=... in the script or give the model's id")
    return name


def hardware(flags: HardwareFlags, framework: str, gpus_per_node: int | None, num_nodes: int | None,
             collected: Collected) -> dict[str, Any]:
    """The spec's hardware: the GPU type and host RAM from the CLI flags, GPU counts from the
    config unless a flag overrides them (noted)."""
    if flags.gpu is None:
        raise InputError("--gpu", f"the {framework} config does not name a GPU type; give --gpu (see `oomless gpus`)")
    out: dict[str, Any] = {"gpu": flags.gpu}
    for name, flag, config in (("gpus_per_node", flags.gpus_per_node, gpus_per_node), ("num_nodes", flags.num_nodes, num_nodes)):
        if flag is not None and config is not None and flag != config:
            collected.notes.append(f"hardware.{name}={flag} from the command line overrides {config} from the {framework} config")
        value = flag if flag is not None else config
        if value is not None:
            out[name] = value
    if flags.host_ram_gib is not None:
        out["host_ram_gib"] = flags.host_ram_gib
    return out


def dump_yaml(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False)


def header(lines: list[str]) -> str:
    return "".join(f"# {line}\n" for line in lines)


def data_ref(key: str, value: Any, *, split: str = "train", prompt_field: Any = None, image_field: Any = None,
             chat: bool = False, added_text: str = "", subset: Any = None, missing: str = "",
             chat_template: Any = None, image_roots: Any = (), drops_answer: bool = False) -> DataRef | None:
    """The training data a config names under ``key`` (a path or Hub id, or a list of them), or
    None when it names none (unset, Hydra's `???`)."""
    values = value if isinstance(value, (list, tuple)) else [value]
    # `$HOME/data/...` (verl's scripts): the variables of this environment, where the run starts too
    sources = tuple(os.path.expandvars(str(v).strip()) for v in values if v is not None and str(v).strip())
    if not sources or any(s == "???" for s in sources):
        return None  # a `$VAR` this environment does not set stays in: `--data auto` names it
    return DataRef(key, sources, split, str(subset) if subset else None, str(prompt_field) if prompt_field else None,
                   str(image_field) if image_field else None, chat, added_text,
                   chat_template if isinstance(chat_template, str) and chat_template else None,
                   drops_answer, tuple(os.path.expandvars(str(r)) for r in image_roots), missing)
