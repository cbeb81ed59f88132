"""Command-line flags as HfArgumentParser (ms-swift, TRL, transformers) and argparse read them.

`parse_flags(args, source)`: `--name value [value ...]`, `--name=value` and bare `--name`
(a switch); dashes in names become underscores (`--dataset-name` is `dataset_name`), a
repeated flag keeps its last values (argparse). A word before any flag is an error naming it.
`single(name, values)`: the one value of a flag. Typed reading lives in `adapters.args`.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import InputError


def parse_flags(args: Sequence[str], source: str) -> dict[str, list[str]]:
    """`--name v1 v2 --other=x --switch` → {name: [v1, v2], other: [x], switch: []}."""
    flags: dict[str, list[str]] = {}
    current: str | None = None
    for word in args:
        if word.startswith("--") and len(word) > 2:
            name, sep, value = word[2:].partition("=")
            current = name.replace("-", "_")
            flags[current] = [value] if sep else []
            if sep:
                current = None
        elif current is None:
            raise InputError(source, f"unexpected argument {word!r} (expected --flag value)")
        else:
            flags[current].append(word)
    return flags


def single(name: str, values: Sequence[str]) -> str:
    if len(values) != 1:
        raise InputError(f"--{name}", f"expected one value, got {len(values)}: {' '.join(values) or '(none)'}")
    return values[0]


def option_value(words: Sequence[str], flag: str) -> str | None:
    """The value of a launcher option (`--nproc_per_node 8` or `--nproc_per_node=8`), or None."""
    for i, word in enumerate(words):
        if word.startswith(flag + "="):
            return word.split("=", 1)[1]
        if word == flag and i + 1 < len(words):
            return words[i + 1]
    return None
