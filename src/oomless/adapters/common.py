"""Helpers every framework adapter uses: shell scripts, command-line flags, versions, YAML,
value checks, files. The one place for them; `_native` keeps only what the Ray-based adapters
(verl, EasyR1, OpenRLHF, ORZ, VLM-R1) share beyond this.

Pure functions over text (no I/O except `read_text` and `write_new_files`). Errors are
`InputError`s naming the file, line, key or flag, so the CLI prints one line.

- shell scripts, flags and versions come from `oomless.frontends` (bashlex, argparse-style
  flags, packaging) and are re-exported here; `command_with(commands, markers)` finds the
  launch command of a module or script.
- `to_*` (HfArgumentParser-style: `1e3` is an int) and `as_*` (YAML-style: strict types)
  value checks; `require(spec, dotted, allowed, framework)` for exporters.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from enum import Enum
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..frontends.flags import parse_flags, single
from ..frontends.shell import ShellCommand, parse_shell, pick_command, read_script
from ..safe_json import load_json
from ..safe_yaml import load_yaml
from ..frontends.versions import check_version, declared_version, parse_version, read_directives, version_text

__all__ = ["ShellCommand", "check_version", "declared_version", "parse_flags", "parse_shell", "parse_version",
           "pick_command", "read_directives", "read_script", "single", "version_text"]

_TRUE = ("true", "t", "yes", "y", "1")
_FALSE = ("false", "f", "no", "n", "0")


# --- files -------------------------------------------------------------------------------

def write_new_files(files: Mapping[Path, str], force: bool) -> list[Path]:
    """Write every file, or none: an existing file without ``force`` is an InputError naming it."""
    if not force:
        for path in files:
            if path.exists():
                raise InputError(str(path), "file exists; pass --force to overwrite it")
    written = []
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def write_new_file(path: Path, text: str, force: bool) -> Path:
    return write_new_files({path: text}, force)[0]


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(str(path), f"cannot read: {err}") from None


def load_yaml_mapping(text: str, where: str, allow_empty: bool = True) -> dict[str, Any]:
    """A YAML document that must be a mapping; an empty one is ``{}`` when ``allow_empty``."""
    data = load_yaml(text, where)
    if data is None and allow_empty:
        return {}
    if not isinstance(data, dict):
        raise InputError(where, f"expected a mapping of keys at the top level, got {type(data).__name__}")
    return data


# --- values ------------------------------------------------------------------------------

def to_bool(name: str, value: str | bool) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise InputError(name, f"{value!r} is not a boolean; allowed: true, false")


def to_int(name: str, value: Any, minimum: int | None = None) -> int:
    try:
        number = float(value) if isinstance(value, str) and re.search(r"[eE.]", value) else value
        result = int(number)
        if result != float(number):
            raise ValueError
    except (TypeError, ValueError, OverflowError):
        raise InputError(name, f"{value!r} is not an integer") from None
    if minimum is not None and result < minimum:
        raise InputError(name, f"{result} is below the minimum {minimum}")
    return result


def to_float(name: str, value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise InputError(name, f"{value!r} is not a number") from None


def to_json(name: str, value: str | Mapping[str, Any]) -> Any:
    if not isinstance(value, str):
        return value
    return load_json(value, name)


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
    number = to_float(key, value)
    if (low is not None and number < low) or (high is not None and number > high):
        raise InputError(key, f"{number} is out of range; allowed: {low} to {high}")
    return number


def as_bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise InputError(key, f"{value!r} is not true or false")


def spec_get(spec: Any, dotted: str) -> Any:
    node = spec
    for part in dotted.split("."):
        node = getattr(node, part)
    return node.value if isinstance(node, Enum) else node


_UNEXPRESSED: ContextVar[list[tuple[str, str]] | None] = ContextVar("oomless_unexpressed", default=None)
_FALLBACK: ContextVar[Any] = ContextVar("oomless_unexpressed_fallback", default=None)


@contextmanager
def collect_unexpressed(fallback: Any = None) -> Iterator[list[tuple[str, str]]]:
    """Inside it, `require` and `cannot_express` record (spec field, why) instead of raising,
    so a writer renders everything it can and the caller names every field it could not in one
    message (`fit --from --write`, `fit --export`). `require` then goes on with ``fallback``'s
    value of the field (the run before the change) when allowed, else the first allowed value."""
    found: list[tuple[str, str]] = []
    token, fallback_token = _UNEXPRESSED.set(found), _FALLBACK.set(fallback)
    try:
        yield found
    finally:
        _UNEXPRESSED.reset(token)
        _FALLBACK.reset(fallback_token)


def fallback_spec() -> Any:
    """The run `collect_unexpressed` falls back to (None outside it, or when it has none)."""
    return _FALLBACK.get()


def cannot_express(dotted: str, why: str) -> None:
    """A writer cannot say the spec's value at ``dotted``: an InputError, or recorded inside
    `collect_unexpressed` (the writer then goes on with its fallback)."""
    found = _UNEXPRESSED.get()
    if found is None:
        raise InputError(dotted, why)
    found.append((dotted, why))


def require(spec: Any, dotted: str, allowed: tuple[Any, ...], framework: str) -> Any:
    """The spec's value at ``dotted``; InputError when ``framework`` cannot express it (inside
    `collect_unexpressed`: recorded, and the first allowed value is returned as the fallback)."""
    value = spec_get(spec, dotted)
    if value not in allowed:
        shown = ", ".join(str(a) for a in allowed)
        cannot_express(dotted, f"{value!r} cannot be written for {framework}; allowed: {shown}")
        fallback = _FALLBACK.get()
        kept = spec_get(fallback, dotted) if fallback is not None else None
        return kept if kept in allowed else allowed[0]
    return value


def command_with(commands: Sequence[ShellCommand], markers: tuple[str, ...]) -> tuple[ShellCommand, list[str]] | None:
    """The first command with a word ending in one of ``markers`` (a module after `-m`, a
    script path), and its words after that one."""
    for command in commands:
        for i, word in enumerate(command.argv):
            if any(word == m or word.endswith(m) for m in markers):
                return command, list(command.argv[i + 1:])
    return None


def transformers_directive(spec: Any) -> str:
    """` transformers==X` for a writer's `# oomless:` line when the spec names the release
    (`adapters.import_native` reads it back into `transformers_version`), else ""."""
    version = getattr(spec, "transformers_version", None)
    return f" transformers=={version}" if version else ""


def require_merged_lora(spec: Any, framework: str) -> None:
    """Frameworks that merge LoRA adapters into the weights they send to the engine (TRL, ms-swift,
    OpenRLHF, VLM-R1) cannot say verl's or EasyR1's unmerged syncs (`rollout.lora_sync`)."""
    if spec.finetune.method.value != "full":
        require(spec, "rollout.lora_sync", ("merge",), framework)
