"""`oomless gpus`, `oomless schema`: the GPU catalog and the spec.

Examples:
    oomless gpus
    oomless schema > run-spec.schema.json
"""

from __future__ import annotations

import json

import typer


def gpus_command() -> None:
    """List the GPU catalog with usable capacity and how it is known (measured/reported/derived)."""
    from ..catalog.gpus import capacity_rule, gpu_ids, load_gpu
    from ..units import GiB

    for gid in gpu_ids():
        g = load_gpu(gid)
        typer.echo(f"{gid:14s} {g.capacity_bytes / GiB:8.2f} GiB  {g.capacity_source:8s} {g.name}")
    typer.echo(f"\nderived: {capacity_rule()}")


def schema_command() -> None:
    """Print the run spec's JSON schema (every field with its description and default)."""
    from ..spec.run import RunSpec

    typer.echo(json.dumps(RunSpec.model_json_schema(), indent=2))


def register(app: typer.Typer) -> None:
    app.command("gpus")(gpus_command)
    app.command("schema")(schema_command)
