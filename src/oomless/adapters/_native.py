"""Small helpers shared by the verl, EasyR1, OpenRLHF, ORZ and VLM-R1 adapters.

Reading a framework's file into plain Python values, Hydra/OmegaConf-style dotted overrides,
shell launch lines, a declared framework version, catalog names for local model paths, and
writing an exported file without clobbering. Every user mistake is an `InputError` naming
the key or flag, its value and what is allowed.
"""

from __future__ import annotations

import re
import shlex
from enum import Enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import InputError
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


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(str(path), f"cannot read: {err}") from None


def load_yaml_mapping(text: str, where: str) -> dict[str, Any]:
    """A YAML document that must be a mapping (an empty file is an empty mapping)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise InputError(where, f"malformed YAML{at}: {getattr(err, 'problem', None) or 'invalid YAML'}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError(where, f"expected a mapping of keys at the top level, got {type(data).__name__}")
    return data


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}} → {"a.b": 1}. Lists and empty mappings are leaves."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten(value, dotted + "."))
        else:
            out[dotted] = value
    return out


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
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key, value


def shell_words(text: str, where: str) -> list[str]:
    """The words of a shell launch script: comments dropped, `\\` continuations joined."""
    joined = re.sub(r"\\\r?\n", " ", text)
    lines = [ln for ln in joined.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    try:
        return shlex.split("\n".join(lines).replace("\n", " ; "), comments=True)
    except ValueError as err:
        raise InputError(where, f"malformed command line: {err}") from None


def command_after(words: list[str], markers: tuple[str, ...]) -> list[str] | None:
    """The arguments of the first command whose word ends with one of ``markers`` (a module
    after `-m` or a script path), up to the next `;`, `&&` or `|`."""
    for i, word in enumerate(words):
        if any(word == m or word.endswith(m) for m in markers):
            args = []
            for w in words[i + 1:]:
                if w in (";", "&&", "||", "|", "&"):
                    break
                args.append(w)
            return args
    return None


def env_assignments(words: list[str]) -> dict[str, str]:
    """`NAME=value` words (exported or prefixed to a command) anywhere in the script."""
    out: dict[str, str] = {}
    for w in words:
        m = re.match(r"^([A-Z_][A-Z0-9_]*)=(.*)$", w)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def parse_version(text: str, where: str) -> tuple[int, ...]:
    parts = re.findall(r"\d+", text.split("+")[0])[:3]
    if not parts:
        raise InputError(where, f"{text!r} is not a version number")
    return tuple(int(p) for p in parts)


def declared_version(text: str, framework: str) -> str | None:
    """A version the file declares in a comment, pip style: `# openrlhf==0.10.1`."""
    match = re.search(rf"#.*\b{re.escape(framework)}\s*==\s*([0-9][\w.+\-]*)", text, re.I)
    return match.group(1) if match else None


def check_version(text: str, framework: str, lowest: str, highest: str) -> tuple[int, ...] | None:
    """The declared version, or None; InputError when it is outside [lowest, highest]."""
    version = declared_version(text, framework)
    if version is None:
        return None
    where = f"{framework}=={version}"
    v = parse_version(version, where)
    if not parse_version(lowest, where) <= v <= parse_version(highest, where):
        raise InputError(where, f"unknown {framework} version; supported: {lowest} to {highest}")
    return v


def as_int(key: str, value: Any, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InputError(key, f"{value!r} is not an integer")
    try:
        number = int(value)
    except ValueError:
        raise InputError(key, f"{value!r} is not an integer") from None
    if minimum is not None and number < minimum:
        raise InputError(key, f"{number} is too small; allowed: >= {minimum}")
    return number


def as_float(key: str, value: Any, low: float | None = None, high: float | None = None) -> float:
    if isinstance(value, bool):
        raise InputError(key, f"{value!r} is not a number")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InputError(key, f"{value!r} is not a number") from None
    if (low is not None and number < low) or (high is not None and number > high):
        raise InputError(key, f"{number} is out of range; allowed: {low} to {high}")
    return number


def as_bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise InputError(key, f"{value!r} is not true or false")


def model_ref(name: Any, key: str, collected: Collected) -> str:
    """A model path as the spec's `model`: kept when it exists here or names a catalog
    model; a local path that is not on this machine is replaced by the catalog model with
    the same folder name (`/data/Qwen2.5-7B-Instruct` → `Qwen/Qwen2.5-7B-Instruct`)."""
    from ..catalog.models import catalog_ids

    if not isinstance(name, str) or not name.strip():
        raise InputError(key, f"{name!r} is not a model name or path")
    if Path(name).expanduser().exists():
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


def write_new_file(path: Path, text: str, force: bool) -> Path:
    """Write ``text`` to ``path``; an existing file is kept unless ``force``."""
    if path.exists() and not force:
        raise InputError(str(path), "already exists; pass --force to overwrite it")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def spec_get(spec: Any, dotted: str) -> Any:
    node = spec
    for part in dotted.split("."):
        node = getattr(node, part)
    return node.value if isinstance(node, Enum) else node


def require(spec: Any, dotted: str, allowed: tuple[Any, ...], framework: str) -> Any:
    """The spec's value at ``dotted``; InputError when ``framework`` cannot express it."""
    value = spec_get(spec, dotted)
    if value not in allowed:
        shown = ", ".join(str(a) for a in allowed)
        raise InputError(dotted, f"{value!r} cannot be written for {framework}; allowed: {shown}")
    return value


def dump_yaml(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False)


def header(lines: list[str]) -> str:
    return "".join(f"# {line}\n" for line in lines)
