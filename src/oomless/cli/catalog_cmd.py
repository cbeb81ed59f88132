"""`oomless models`, `oomless gpus`, `oomless schema`: what the catalogs and the spec hold.

Examples:
    oomless models
    oomless gpus
    oomless schema > run-spec.schema.json
"""

from __future__ import annotations

import json

import typer


def models_command() -> None:
    """List the shipped model architectures (ids usable as `model:` in a spec)."""
    from ..catalog.models import catalog_ids, load_model
    from ..memory.params import num_parameters

    for ref in catalog_ids():
        arch = load_model(ref)
        typer.echo(f"{ref:45s} {num_parameters(arch) / 1e9:8.2f} B  {arch.model_type}")


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
    app.command("models")(models_command)
    app.command("gpus")(gpus_command)
    app.command("schema")(schema_command)
