"""Commands a launch script documents in comments, read as data (never run).

Framework examples that start several programs (a vLLM server and a trainer, a verifier and a
trainer) often keep the commands meant for other terminals as comment blocks above the one that
runs: ms-swift's `examples/train/grpo/plugin/deepeyes/deepeyes.sh` documents its
`swift rollout` server (its GPU, `--vllm_max_model_len 8192`, `--vllm_gpu_memory_utilization
0.8`) that way and runs only `swift rlhf --vllm_mode server`. `commented_commands` gives the
commands such blocks hold, each with the line it starts on in the script, so an adapter can take
the documented server when the script has no live one (and say so).

A comment block is a run of consecutive lines whose first non-blank character is `#` (the `#!`
line excluded); each line loses its `#` and one following space, and the block is read by the
same bash parser as the script. Blocks of prose that do not parse are skipped.
"""

from __future__ import annotations

import dataclasses

from ..errors import InputError
from .shell import ShellCommand, parse_shell


def commented_commands(text: str, source: str) -> list[ShellCommand]:
    """The simple commands of every comment block of ``text`` that parses, in order; each
    command's `line` is the script line its block line is on."""
    found: list[ShellCommand] = []
    for first_line, lines in _blocks(text):
        try:
            commands = parse_shell("\n".join(lines) + "\n", f"{source} (comment from line {first_line})")
        except InputError:
            continue
        found.extend(dataclasses.replace(c, line=c.line + first_line - 1) for c in commands)
    return found


def _blocks(text: str) -> list[tuple[int, list[str]]]:
    blocks: list[tuple[int, list[str]]] = []
    current: list[str] = []
    start = 0
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.lstrip()
        if stripped.startswith("#") and not stripped.startswith("#!"):
            if not current:
                start = number
            body = stripped[1:]
            current.append(body[1:] if body.startswith(" ") else body)
            continue
        if current:
            blocks.append((start, current))
            current = []
    if current:
        blocks.append((start, current))
    return blocks
