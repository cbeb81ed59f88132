"""`oomless plan SPEC`: per-phase GPU and host memory, the verdict and the binding constraint.

Examples:
    oomless plan examples/seeds/s1-before.yaml
    oomless plan examples/seeds/s1-after.yaml --json
    oomless plan --from swift examples/seeds/native/s1-before.sh --gpu RTX-3090
    oomless plan examples/seeds/s0-before.yaml --html s0.html --png s0.png
    oomless plan --from trl grpo.yaml --gpu H100 --data data/train.jsonl   # verdict from the data's prompts
    oomless plan --from verl run.sh --gpu H100 --data auto --run-log trial.log  # ... and a trial run's completions
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from .import_cmd import (DATA_OPTION, DATA_SPLIT_OPTION, GPUS_PER_NODE_OPTION, HOST_RAM_OPTION, NODES_OPTION,
                         RUN_LOG_OPTION, TOKENIZER_OPTION, measured)

from ..errors import EXIT_DOES_NOT_FIT, EXIT_FITS

if TYPE_CHECKING:
    from ..adapters import HardwareFlags
    from ..explain import Explained
    from ..planner.plan import Plan
    from ..spec.load import ResolvedRun


def plan_command(
    spec: Path = typer.Argument(..., help="Run spec (YAML), or a framework config with --from."),
    as_json: bool = typer.Option(False, "--json", help="Print the plan as a JSON document."),
    from_framework: str = typer.Option(
        None, "--from", help="Read SPEC as this framework's own config: swift (ms-swift), trl, verl, easyr1, openrlhf, "
        "orz (open-reasoner-zero), vlmr1."
    ),
    gpu: str = typer.Option(None, "--gpu", help="GPU type when the framework config does not say (with --from)."),
    gpus_per_node: int = GPUS_PER_NODE_OPTION,
    nodes: int = NODES_OPTION,
    host_ram: float = HOST_RAM_OPTION,
    html: Path = typer.Option(None, "--html", help="Also write a self-contained HTML chart of the plan."),
    png: Path = typer.Option(None, "--png", help="Also write a PNG chart of the plan."),
    explain: bool = typer.Option(False, "--explain", help="Also show where every number comes from (as `oomless explain`)."),
    data: str = DATA_OPTION,
    data_split: str = DATA_SPLIT_OPTION,
    tokenizer: str = TOKENIZER_OPTION,
    run_log: str = RUN_LOG_OPTION,
) -> None:
    """Plan one run: peak memory per phase on every GPU and on the host; exit 0 fits, 1 does not fit, 2 bad input."""
    from .main import run_guarded

    def body() -> int:
        from ..planner.plan import make_plan
        from ..planner.report import plan_to_dict

        from ..adapters import HardwareFlags

        run = load_any(spec, from_framework, HardwareFlags(gpu, gpus_per_node, nodes, host_ram))
        run = measured(run, None, spec, data, data_split, tokenizer, run_log)[0]
        plan = make_plan(run.spec, run.arch, run.gpu, run.archs, explain=True)
        for warning in run.warnings:
            typer.echo(f"warning: {warning}", err=True)
        document = plan_to_dict(plan, run.warnings)
        explained = explained_plan(plan) if explain or html is not None else None
        if html is not None or png is not None:
            from ..charts import write_charts

            drawn = document if explained is None else {**document, "explain": explained[1]}
            write_charts(drawn, html=html, png=png, inputs=(spec,))
        if as_json:
            typer.echo(json.dumps({**document, "explain": explained[1]} if explained and explain else document, indent=2))
        else:
            from .render import render_plan

            render_plan(plan)
            if explained and explain:
                from ..explain import title
                from ..explain.checks import explain_checks
                from ..explain.render import render_checks, render_text

                typer.echo(render_text(explained[0], "\n" + title(plan)) + render_checks(explain_checks(plan)), nl=False)
        return EXIT_FITS if plan.fits else EXIT_DOES_NOT_FIT

    run_guarded(body, one_shot=True)


def explained_plan(plan: Plan) -> tuple[list[Explained], dict[str, Any]]:
    """Every component's explanation (`oomless.explain`), and the JSON form with the checks'."""
    from ..explain import checks_to_dicts, explain_plan, to_dicts

    entries = explain_plan(plan)
    return entries, {"components": to_dicts(entries), "checks": checks_to_dicts(plan)}


def load_any(path: Path, framework: str | None, hardware: HardwareFlags) -> ResolvedRun:
    """A YAML spec, or a framework's config through its adapter (see `import_cmd.load_any`)."""
    from .import_cmd import load_any as load

    return load(path, framework, hardware)


def register(app: typer.Typer) -> None:
    app.command("plan")(plan_command)
