"""`oomless explain SPEC [COMPONENT]`: where every number of a plan comes from.

For each component of each phase on each GPU group and on the host: the formula, the formula
with its inputs filled in, the result, what each input is, the source it cites (paper,
framework file) and the oomless function that computes it; then each check of the plan (a
phase's peak against the GPU, the host against its limit, vLLM's start-up checks, the step
timeline) with the formulas of what it needs and what it has.

Examples:
    oomless explain examples/seeds/s1-before.yaml
    oomless explain examples/seeds/s1-before.yaml logits
    oomless explain examples/seeds/s1-before.yaml vllm. --json
    oomless explain --from swift examples/seeds/native/s1-before.sh --gpu RTX-3090 policy.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from ..errors import EXIT_FITS
from .import_cmd import FROM_HELP, GPU_HELP, GPUS_PER_NODE_OPTION, HOST_RAM_OPTION, NODES_OPTION


def explain_command(
    spec: Path = typer.Argument(..., help="Run spec (YAML), or a framework config with --from."),
    component: str = typer.Argument(None, help="A component name (logits) or a prefix of names (vllm., policy.); default: all."),
    as_json: bool = typer.Option(False, "--json", help="Print the explanations as a JSON document."),
    from_framework: str = typer.Option(None, "--from", help=FROM_HELP),
    gpu: str = typer.Option(None, "--gpu", help=GPU_HELP),
    gpus_per_node: int = GPUS_PER_NODE_OPTION,
    nodes: int = NODES_OPTION,
    host_ram: float = HOST_RAM_OPTION,
) -> None:
    """Explain a plan: each component's and each check's formula, inputs, result and source; exit 0, 2 bad input."""
    from .main import run_guarded

    def body() -> int:
        from ..adapters import HardwareFlags
        from ..explain import checks_to_dicts, explain_selected, title, to_dicts
        from ..planner.plan import make_plan
        from .plan_cmd import load_any

        run = load_any(spec, from_framework, HardwareFlags(gpu, gpus_per_node, nodes, host_ram))
        plan = make_plan(run.spec, run.arch, run.gpu, run.archs)
        for warning in run.warnings:
            typer.echo(f"warning: {warning}", err=True)
        chosen = explain_selected(plan, component)
        if as_json:
            doc = {"title": title(plan), "verdict": plan.verdict, "components": to_dicts(chosen)}
            typer.echo(json.dumps(doc if component else {**doc, "checks": checks_to_dicts(plan)}, indent=2))
        else:
            from ..explain.checks import explain_checks
            from ..explain.render import render_checks, render_text

            typer.echo(render_text(chosen, title(plan)), nl=False)
            if not component:
                typer.echo(render_checks(explain_checks(plan)), nl=False)
        return EXIT_FITS

    run_guarded(body)


def register(app: typer.Typer) -> None:
    app.command("explain")(explain_command)
