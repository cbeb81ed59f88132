"""Write a fitted configuration as a new spec file: the input's YAML with the changes, under a
header naming the source and every change. Never the input, never an existing file."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

from .. import __version__
from ..errors import InputError
from ..units import format_bytes
from .search import Choice

FIELD = "--write"


def check_target(target: Path, source: Path) -> None:
    """Refuse the input file and any existing file before searching."""
    if target.resolve() == source.resolve():
        raise InputError(FIELD, f"{target} is the input spec; fit writes a new file and never overwrites")
    if target.exists():
        raise InputError(FIELD, f"{target} already exists; fit never overwrites a file (choose a new name)")
    if not target.parent.is_dir():
        raise InputError(FIELD, f"no such directory: {target.parent}")


def leading_comments(text: str) -> list[str]:
    """The source's comment block before its first key (its assumptions, in the seed files)."""
    out = []
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            out.append(line)
        else:
            break
    while out and not out[-1].strip():
        out.pop()
    return out


def _value(v: Any) -> str:
    """A value as YAML writes it inline (``default`` for None)."""
    if v is None:
        return "default"
    try:
        return _hashable_value(type(v), v)
    except TypeError:  # a list: not hashable
        return _yaml_inline(v)


@functools.lru_cache(maxsize=256)
def _hashable_value(kind: type, v: Any) -> str:
    """`_yaml_inline` once per value and type (`True` and `1` are equal keys otherwise): the
    human output of a fit shows a few values in tens of changes, each a whole YAML dump."""
    return _yaml_inline(v)


def _yaml_inline(v: Any) -> str:
    return yaml.safe_dump(v, default_flow_style=True, width=10_000).strip().removesuffix("...").strip()


def header(choice: Choice, source: Path, margin: str) -> list[str]:
    lines = [f"# Written by `oomless fit` {__version__} from {source}."]
    if choice.changes:
        lines.append("# Changes (each keeps the training maths unless allowed with --allow):")
        lines += [f"#   {field}: {_value(old)} -> {_value(new)}" for field, (old, new) in choice.changes.items()]
    else:
        lines.append("# No change: the input is already the fastest configuration found that fits.")
    seconds = choice.estimate.total_s
    lines.append(f"# Its plan fits with a {margin} margin (tightest: {format_bytes(choice.min_slack_bytes)} free); "
                 f"predicted {seconds:.1f} s per optimizer step (an estimate; see oomless.perf).")
    return lines


def write_spec(target: Path, choice: Choice, source: Path, margin: str) -> None:
    check_target(target, source)
    comments = leading_comments(source.read_text(encoding="utf-8"))
    body = yaml.safe_dump(choice.data, sort_keys=False, allow_unicode=True)
    parts = header(choice, source, margin)
    if comments:
        parts += ["#", "# Comments of the source spec:"] + comments
    target.write_text("\n".join(parts) + "\n" + body, encoding="utf-8")
