"""`oomless gpus`, `oomless schema`: the GPU catalog and the spec.

Examples:
    oomless gpus
    oomless gpus --json
    oomless schema > run-spec.schema.json
"""

from __future__ import annotations

import json

import typer


def gpus_command(
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of text."),
) -> None:
    """List the GPU catalog with usable capacity and how it is known (measured/reported/derived)."""
    from ..catalog.gpus import capacity_rule, gpu_ids, load_gpu
    from ..units import GiB

    gpus = [load_gpu(gid) for gid in gpu_ids()]
    if as_json:
        rows = [{"id": gid, "name": g.name, "capacity_bytes": g.capacity_bytes, "capacity_gib": round(g.capacity_bytes / GiB, 2),
                 "capacity_source": g.capacity_source, "nvidia_smi_bytes": g.nvidia_smi_bytes, "bf16": g.bf16}
                for gid, g in zip(gpu_ids(), gpus)]
        typer.echo(json.dumps({"gpus": rows, "derived_capacity_rule": capacity_rule()}, indent=2))
        return
    for gid, g in zip(gpu_ids(), gpus):
        typer.echo(f"{gid:14s} {g.capacity_bytes / GiB:8.2f} GiB  {g.capacity_source:8s} {g.name}")
    import shutil
    import textwrap

    width = shutil.get_terminal_size().columns
    typer.echo("\n" + textwrap.fill(f"derived: {capacity_rule()}", width=max(width, 40), subsequent_indent="  "))


def schema_command() -> None:
    """Print the run spec's JSON schema (every field with its description and default)."""
    from ..spec.run import RunSpec

    typer.echo(json.dumps(RunSpec.model_json_schema(), indent=2))


def register(app: typer.Typer) -> None:
    app.command("gpus")(gpus_command)
    app.command("schema")(schema_command)
