"""`oomless env`: the versions a bug report needs, of oomless, Python and the frameworks found.

Examples:
    oomless env
    oomless env --json

Versions come from the installed distributions' metadata (`importlib.metadata`): nothing is
imported, so it answers in a fraction of a second even where torch or vLLM is installed, and a
broken framework install still shows its version.
"""

from __future__ import annotations

import json
import platform
import sys
from typing import Any

import typer

FRAMEWORKS = (
    "torch", "transformers", "trl", "peft", "accelerate", "vllm", "deepspeed", "ms-swift", "verl",
    "openrlhf", "ray", "flash-attn", "liger-kernel", "bitsandbytes",
)
"""Distributions whose version changes a plan or a crash (as PyPI names them)."""


def distribution_version(name: str) -> str | None:
    """The installed version of distribution ``name``, or None when it is not installed."""
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def environment() -> dict[str, Any]:
    from .. import __version__

    return {
        "oomless": __version__,
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "platform": platform.platform(terse=True),
        "frameworks": {name: distribution_version(name) for name in FRAMEWORKS},
    }


def env_command(
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of text."),
) -> None:
    """Print the versions of oomless, Python and the RL frameworks installed here (not imported)."""
    from .main import run_guarded

    def body() -> int:
        doc = environment()
        if as_json:
            typer.echo(json.dumps(doc, indent=2))
            return 0
        typer.echo(f"{'oomless':13s} {doc['oomless']}")
        typer.echo(f"{'python':13s} {doc['python']} ({doc['python_executable']})")
        typer.echo(f"{'platform':13s} {doc['platform']}")
        for name, version in doc["frameworks"].items():
            typer.echo(f"{name:13s} {version or 'not installed'}")
        return 0

    run_guarded(body)


def register(app: typer.Typer) -> None:
    app.command("env")(env_command)
