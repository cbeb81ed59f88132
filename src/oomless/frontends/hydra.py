"""Hydra/OmegaConf configs through omegaconf: a YAML file with its `defaults` list, command-line
overrides (`key=v`, `+key=v`, `++key=v`, `~key`), then every interpolation resolved.

`compose(defaults, text, where, overrides)` gives the keys the user set (to report the ones a
planner does not read) and the values a run would see (the framework's defaults overlaid with
the user's, interpolations such as `${.x}`, `${a.b}` and `${oc.select:a.b,default}` resolved).
Local entries of a `defaults` list (`- base` with `base.yaml` beside the file, `- group: option`
with `group/option.yaml`) are merged in their order; the framework's own config names (verl
`ppo_trainer`) are the `defaults` mapping the caller passes. A broken interpolation is one
`InputError` naming the file, line and key. Nothing is executed: only OmegaConf's built-in
resolvers exist (`oc.select`, `oc.env`, ...); a custom one (`${eval:...}`) is a broken
interpolation.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import InputError
from .. import safe_paths as SP
from ..mappings import flatten
from ..safe_yaml import load_yaml_scalar, load_yaml_wording_errors

ALLOWED_INTERPOLATIONS = "${key}, ${.sibling}, ${oc.select:key,default}"
_OVERRIDE = re.compile(r"^(~|\+{0,2})([A-Za-z_][\w.\-@/]*)(?:=(.*))?$", re.S)


@dataclass(frozen=True)
class Override:
    """One command-line override and where it was written (`script.sh:12`)."""

    token: str
    where: str


@dataclass
class Composed:
    user: dict[str, Any]
    """Dotted keys the user set (file, its local defaults, overrides), values as written."""
    values: dict[str, Any]
    """The framework's defaults overlaid with the user's, interpolations resolved."""
    lines: dict[str, str] = field(default_factory=dict)
    """Where each user key was set (`file.yaml:7`, `run.sh:12`)."""
    deleted: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)


def parse_override(token: str, where: str = "") -> tuple[str, str, Any]:
    """(`+`/`++`/`~`/``, key, value): a Hydra override; values are read as YAML scalars or flow
    lists, as Hydra's grammar reads them."""
    match = _OVERRIDE.match(token)
    if match is None or (match.group(1) != "~" and match.group(3) is None):
        raise InputError(where or token, f"{token!r} is not an override; allowed: key=value, +key=value, ++key=value, ~key")
    prefix, key, raw = match.group(1), match.group(2), match.group(3)
    if raw is None:
        return prefix, key, None
    return prefix, key, load_yaml_scalar(raw)


def load_yaml(text: str, where: str) -> dict[str, Any]:
    try:
        data = load_yaml_wording_errors(text, where)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f":{mark.line + 1}" if mark else ""
        raise InputError(f"{where}{at}", f"malformed YAML: {getattr(err, 'problem', None) or 'invalid YAML'}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError(where, f"expected a mapping of keys at the top level, got {type(data).__name__}")
    return data


def key_lines(text: str, where: str) -> dict[str, str]:
    """`file:line` of every dotted key of a YAML mapping (empty when the text is not YAML)."""
    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return {}
    out: dict[str, str] = {}

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                dotted = f"{prefix}{key.value}"
                out[dotted] = f"{where}:{key.start_mark.line + 1}"
                walk(value, dotted + ".")

    walk(root, "")
    return out


def compose(defaults: Mapping[str, Any], text: str | None, where: str, overrides: Sequence[Override] = (),
            folder: Path | None = None, own_configs: Sequence[str] = ()) -> Composed:
    """The user's YAML (``text``, may be None) with its local defaults list, then ``overrides``,
    over the flattened framework ``defaults``; see the module docstring."""
    user: dict[str, Any] = {}
    lines: dict[str, str] = {}
    notes: list[str] = []
    if text is not None:
        _merge_file(text, where, folder, own_configs, user, lines, notes, depth=0)
    deleted: set[str] = set()
    for override in overrides:
        prefix, key, value = parse_override(override.token, override.where)
        if prefix == "~":
            deleted.add(key)
            for k in [k for k in user if k == key or k.startswith(key + ".")]:
                user.pop(k)
            continue
        for k in [k for k in user if k.startswith(key + ".")]:
            user.pop(k)
        if isinstance(value, dict):
            for sub, v in flatten(value).items():
                user[f"{key}.{sub}"], lines[f"{key}.{sub}"] = v, override.where
        else:
            user[key], lines[key] = value, override.where
    merged = {k: v for k, v in defaults.items() if not any(k == d or k.startswith(d + ".") for d in deleted)}
    merged = _overlay(merged, user, lines, where)
    return Composed(user, resolve(merged, lines, where), lines, deleted, notes)


def _overlay(base: Mapping[str, Any], user: Mapping[str, Any], lines: Mapping[str, str], where: str) -> dict[str, Any]:
    """``base`` with ``user`` on top. As OmegaConf.merge, a value cannot replace a mapping of the
    defaults, nor a mapping a value (an InputError naming the key and its line)."""
    out = dict(base)
    for key, value in user.items():
        under = [k for k in base if k.startswith(key + ".")]
        if value == {} and under:
            continue  # merging an empty mapping keeps the defaults under it
        if under and not isinstance(value, dict):
            raise InputError(lines.get(key, where), f"{key}: {value!r} cannot replace the mapping of "
                                                    f"{len(under)} keys under it; allowed: a mapping ({under[0]}: ...)")
        parts = key.split(".")
        for i in range(1, len(parts)):
            parent = ".".join(parts[:i])
            if parent in base and base[parent] not in ({}, None):
                raise InputError(lines.get(key, where), f"{key}: {parent} is a value ({base[parent]!r}), not a mapping")
            out.pop(parent, None)
        out[key] = value
    return out


def _merge_file(text: str, where: str, folder: Path | None, own: Sequence[str], user: dict[str, Any],
                lines: dict[str, str], notes: list[str], depth: int) -> None:
    data = load_yaml(text, where)
    entries = data.pop("defaults", None) or []
    data.pop("hydra", None)
    here = key_lines(text, where)
    own_values = flatten(data)
    if not isinstance(entries, list):
        raise InputError(here.get("defaults", where), "defaults must be a list; allowed: [name, group: option, _self_]")
    if "_self_" not in entries:
        entries = [*entries, "_self_"]
    for entry in entries:
        if entry == "_self_":
            for key, value in own_values.items():
                user[key], lines[key] = value, here.get(key, where)
            continue
        file, package = _default_file(entry, folder)
        if file is None or depth > 8:
            if str(entry) not in own:
                notes.append(f"{where}: defaults entry {entry!r} is not a local file; read as the framework's own config")
            continue
        nested: dict[str, Any] = {}
        try:
            nested_text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise InputError(str(file), f"cannot read: {err}") from None
        _merge_file(nested_text, str(file), file.parent, own, nested, lines, notes, depth + 1)
        for key, value in nested.items():
            dotted = f"{package}.{key}" if package else key
            user[dotted] = value
            lines.setdefault(dotted, lines.get(key, str(file)))


def _default_file(entry: Any, folder: Path | None) -> tuple[Path | None, str]:
    """The local YAML a defaults entry names, and the package it is merged at."""
    if folder is None:
        return None, ""
    if isinstance(entry, str):
        candidate = folder / (entry if entry.endswith((".yaml", ".yml")) else f"{entry}.yaml")
        return (candidate, "") if SP.is_file(candidate) else (None, "")
    if isinstance(entry, dict) and len(entry) == 1:
        (group, option), = entry.items()
        group = str(group).removeprefix("override ").strip()
        name, _, package = group.partition("@")
        candidate = folder / name / f"{option}.yaml"
        if SP.is_file(candidate):
            return candidate, package or name.replace("/", ".")
    return None, ""


def resolve(values: Mapping[str, Any], lines: Mapping[str, str], where: str) -> dict[str, Any]:
    """Every interpolation resolved; a broken one names its file, line and key. The plain forms
    (`${a.b}`, `${.x}`, `${oc.select:a.b,default}`, the whole value) are resolved here; OmegaConf,
    whose grammar parser is slow, only sees the rest."""
    out = dict(values)
    complex_keys = []
    for key in sorted(values, key=lambda k: k not in lines):  # the user's keys first: an error names theirs
        try:
            out[key] = _simple(key, out, set())
        except _NotSimple:
            complex_keys.append(key)
        except _Broken as err:
            raise InputError(lines.get(key, where), f"{key}: broken interpolation {values[key]!r} ({err}); "
                             f"allowed: {ALLOWED_INTERPOLATIONS}") from None
    return _omegaconf(out, lines, where) if complex_keys else out


class _NotSimple(Exception):
    pass


class _Broken(Exception):
    pass


_KEY = re.compile(r"\.*[A-Za-z_][\w.\-]*")


def _simple(key: str, values: dict[str, Any], seen: set[str]) -> Any:
    """``values[key]`` with `${key}`, `${.rel}` and `${oc.select:key,default}` (nested, and
    inside longer strings) resolved; _NotSimple for any other resolver."""
    return _evaluate(key, values[key], values, seen)


def _evaluate(key: str, value: Any, values: dict[str, Any], seen: set[str]) -> Any:
    if not isinstance(value, str) or "${" not in value:
        return value
    text = value.strip()
    end = _closing_brace(text, 1) if text.startswith("${") else -1
    if end == len(text) - 1:
        return _interpolation(key, text[2:-1], values, seen)
    out, i = [], 0
    while i < len(value):
        start = value.find("${", i)
        if start < 0:
            out.append(value[i:])
            break
        end = _closing_brace(value, start + 1)
        if end < 0:
            raise _Broken("unclosed ${")
        out.append(value[i:start])
        out.append(str(_interpolation(key, value[start + 2:end], values, seen)))
        i = end + 1
    return "".join(out)


def _closing_brace(text: str, start: int) -> int:
    depth = 0
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return i
    return -1


def _interpolation(key: str, body: str, values: dict[str, Any], seen: set[str]) -> Any:
    select = body.startswith("oc.select:")
    if select:
        ref, comma, default = body[len("oc.select:"):].partition(",")
    elif ":" in body:
        raise _NotSimple
    else:
        ref, comma, default = body, "", ""
    ref = ref.strip()
    if not _KEY.fullmatch(ref):
        raise _NotSimple
    target = _absolute(key, ref)
    if target in seen or target == key:
        raise _Broken(f"interpolation cycle through {target}")
    if target in values:
        return _simple(target, values, seen | {key})
    subtree = {k[len(target) + 1:]: k for k in values if k.startswith(target + ".")}
    if subtree:
        return _nested({sub: _simple(full, values, seen | {key}) for sub, full in subtree.items()})
    if select and comma:
        default = default.strip()
        if "${" in default:
            return _evaluate(key, default, values, seen)
        return load_yaml_scalar(default)
    if select:
        return None
    raise _Broken(f"interpolation key '{target}' not found")


def _nested(flat: Mapping[str, Any]) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    for key, value in flat.items():
        node = nested
        *parents, leaf = key.split(".")
        for part in parents:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[leaf] = value
    return nested


def _absolute(key: str, ref: str) -> str:
    if not ref.startswith("."):
        return ref
    dots = len(ref) - len(ref.lstrip("."))
    parent = key.split(".")[:-dots] if dots <= key.count(".") + 1 else []
    return ".".join([*parent, ref[dots:]])


def _omegaconf(values: Mapping[str, Any], lines: Mapping[str, str], where: str) -> dict[str, Any]:
    from omegaconf import OmegaConf  # slow to import: only for interpolations beyond the plain forms
    from omegaconf.errors import OmegaConfBaseException

    nested = _nested(values)
    try:
        resolved = OmegaConf.to_container(OmegaConf.create(nested), resolve=True)
    except OmegaConfBaseException as err:
        key = str(getattr(err, "full_key", "") or "")
        message = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise InputError(lines.get(key, where), f"{key}: broken interpolation {values.get(key, '')!r} ({message}); "
                         f"allowed: {ALLOWED_INTERPOLATIONS}") from None
    return flatten(resolved)
