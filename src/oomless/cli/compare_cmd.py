"""`oomless compare BEFORE AFTER`: two plans side by side, with the differences named.

Examples:
    oomless compare examples/seeds/s0-before.yaml examples/seeds/s0-after.yaml
    oomless compare examples/seeds/s1-before.yaml examples/seeds/s1-after.yaml --json
    oomless compare examples/seeds/s0-before.yaml examples/seeds/s0-after.yaml --html s0.html --png s0.png

Names what changed: each plan's verdict and binding constraint, every spec field that differs
(defaults filled in), the peak of every phase on every device role and on the host, and the
GPU components whose size changed the most.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from ..errors import EXIT_DOES_NOT_FIT, EXIT_FITS
from .import_cmd import FROM_HELP, GPUS_PER_NODE_OPTION, GPU_HELP, HOST_RAM_OPTION, NODES_OPTION

NUM_SHOWN_COMPONENTS = 8


def compare_command(
    before: Path = typer.Argument(..., help="Run spec before the change (YAML)."),
    after: Path = typer.Argument(..., help="Run spec after the change (YAML); the exit code is its verdict."),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison (both plans and their differences) as JSON."),
    html: Path = typer.Option(None, "--html", help="Also write a self-contained HTML page of both plans side by side."),
    png: Path = typer.Option(None, "--png", help="Also write a PNG of both plans side by side."),
    from_framework: str = typer.Option(None, "--from", help=FROM_HELP + " Applies to BEFORE and AFTER"),
    gpu: str = typer.Option(None, "--gpu", help=GPU_HELP),
    gpus_per_node: int = GPUS_PER_NODE_OPTION,
    nodes: int = NODES_OPTION,
    host_ram: float = HOST_RAM_OPTION,
) -> None:
    """Compare two plans (before/after a fix); exit 0 if AFTER fits, 1 if it does not, 2 bad input."""
    from .main import run_guarded

    def body() -> int:
        from .import_cmd import hardware_flags

        comparison = build_comparison(before, after, from_framework, hardware_flags(gpu, gpus_per_node, nodes, host_ram))
        if html is not None or png is not None:
            from ..charts import write_compare_charts

            write_compare_charts(comparison, html=html, png=png, inputs=(before, after))
        if as_json:
            typer.echo(json.dumps(comparison, indent=2))
        else:
            render_comparison(comparison)
        return EXIT_FITS if comparison["differences"]["verdict"]["after"] else EXIT_DOES_NOT_FIT

    run_guarded(body)


def build_comparison(before: Path, after: Path, framework: str | None = None, hardware: Any = None) -> dict[str, Any]:
    from ..charts.compare import compare_documents
    from ..planner.plan import make_plan
    from ..planner.report import plan_to_dict
    from .import_cmd import hardware_flags, load_any

    docs, specs = [], []
    for path in (before, after):
        run = load_any(path, framework, hardware or hardware_flags(None, None, None, None))
        for warning in run.warnings:
            typer.echo(f"warning: {path}: {warning}", err=True)
        docs.append(plan_to_dict(make_plan(run.spec, run.arch, run.gpu, run.archs), run.warnings))
        specs.append(run.spec.model_dump(mode="json"))
    return compare_documents(docs[0], docs[1], specs[0], specs[1], str(before), str(after))


def render_comparison(comparison: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    from ..charts.compare import headline, show_value, signed_bytes
    from ..charts.model import size_label

    out = Console()
    d = comparison["differences"]
    from .render import wrap_text

    for line, fits in zip(headline(comparison), (d["verdict"]["before"], d["verdict"]["after"])):
        out.print(wrap_text(line, out.width), style="bold green" if fits else "bold red", highlight=False,
                  markup=False, soft_wrap=True)
    fields = Table(title="Spec fields that differ (defaults filled in)")
    for col in ("field", "before", "after"):
        fields.add_column(col)
    for r in d["spec_fields"]:
        fields.add_row(r["field"], show_value(r["before"]), show_value(r["after"]))
    out.print(fields)
    peaks = Table(title="Peak per phase (per GPU; host per node)")
    for col in ("device", "phase", "before", "after", "Δ"):
        peaks.add_column(col, justify="right" if col in ("before", "after", "Δ") else "left")
    for r in d["phase_peaks"]:
        where = f"{r['device_role']} GPU" if r["device"] == "gpu" else "host"
        size = [("—" if r[k] is None else size_label(r[k])) for k in ("before_bytes", "after_bytes")]
        peaks.add_row(where, r["phase"], *size, signed_bytes(r["delta_bytes"]))
    out.print(peaks)
    comps = Table(title="GPU components that changed the most (largest value in any phase, per GPU)")
    for col in ("component", "before", "after", "Δ"):
        comps.add_column(col, justify="left" if col == "component" else "right")
    for r in d["components"][:NUM_SHOWN_COMPONENTS]:
        comps.add_row(r["name"], size_label(r["before_bytes"]), size_label(r["after_bytes"]), signed_bytes(r["delta_bytes"]))
    out.print(comps)


def register(app: typer.Typer) -> None:
    app.command("compare")(compare_command)
