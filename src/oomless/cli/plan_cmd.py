"""`oomless plan SPEC`: per-phase GPU and host memory, the verdict and the binding constraint.

Examples:
    oomless plan examples/seeds/s1-before.yaml
    oomless plan examples/seeds/s1-after.yaml --json
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from ..errors import EXIT_DOES_NOT_FIT, EXIT_FITS


def plan_command(
    spec: Path = typer.Argument(..., help="Run spec (YAML)."),
    as_json: bool = typer.Option(False, "--json", help="Print the plan as a JSON document."),
) -> None:
    """Plan one run: peak memory per phase on every GPU and on the host; exit 0 fits, 1 does not fit, 2 bad input."""
    from .main import run_guarded

    def body() -> int:
        from ..planner.plan import make_plan
        from ..planner.report import plan_to_dict
        from ..spec.load import load_run

        run = load_run(spec)
        plan = make_plan(run.spec, run.arch, run.gpu, run.archs)
        for warning in run.warnings:
            typer.echo(f"warning: {warning}", err=True)
        if as_json:
            typer.echo(json.dumps(plan_to_dict(plan, run.warnings), indent=2))
        else:
            from .render import render_plan

            render_plan(plan)
        return EXIT_FITS if plan.fits else EXIT_DOES_NOT_FIT

    run_guarded(body)


def register(app: typer.Typer) -> None:
    app.command("plan")(plan_command)
