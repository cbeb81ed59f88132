"""`oomless export SPEC --to FRAMEWORK`: write a spec as a framework's launch command/config.

Examples:
    oomless export examples/seeds/s1-after.yaml --to swift --out-dir run/
    oomless export examples/quickstart.yaml --to trl --out-dir trl-run/ --force
    oomless export --from ms-swift examples/seeds/native/s1-after.sh --gpu RTX-3090 --to trl --out-dir trl-run/
"""

from __future__ import annotations

from pathlib import Path

import typer

from .import_cmd import FROM_HELP, GPUS_PER_NODE_OPTION, GPU_HELP, HOST_RAM_OPTION, NODES_OPTION


def export_command(
    spec: Path = typer.Argument(..., help="Run spec (YAML), or a framework config with --from."),
    to: str = typer.Option(..., "--to", help="Framework: swift, trl, verl, easyr1, openrlhf, orz, vlmr1."),
    out_dir: Path = typer.Option(Path("."), "--out-dir", help="Folder for the files written. Default: here."),
    force: bool = typer.Option(False, "--force", help="Overwrite files that exist (never the input spec)."),
    from_framework: str = typer.Option(None, "--from", help=FROM_HELP),
    gpu: str = typer.Option(None, "--gpu", help=GPU_HELP),
    gpus_per_node: int = GPUS_PER_NODE_OPTION,
    nodes: int = NODES_OPTION,
    host_ram: float = HOST_RAM_OPTION,
) -> None:
    """Write SPEC in FRAMEWORK's own form with the memory knobs set; exit 0 written, 2 bad input."""
    from .main import run_guarded

    def body() -> int:
        from ..adapters import export_native
        from ..errors import InputError
        from .import_cmd import hardware_flags, load_any

        run = load_any(spec, from_framework, hardware_flags(gpu, gpus_per_node, nodes, host_ram))
        original = spec.read_bytes()
        out_dir.mkdir(parents=True, exist_ok=True)
        written = export_native(to, run.spec, out_dir, force)
        if any(path.resolve() == spec.resolve() for path in written):
            spec.write_bytes(original)  # --force must never cost the user their spec
            raise InputError("--out-dir", f"an exported file has the input spec's name {spec}; choose another --out-dir")
        for path in written:
            typer.echo(str(path))
        return 0

    run_guarded(body)


def register(app: typer.Typer) -> None:
    app.command("export")(export_command)
