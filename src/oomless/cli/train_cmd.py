"""`oomless train SPEC`: plan the run, refuse it unless it fits, then train GRPO on TRL with
per-phase memory telemetry, and print the plan against what was measured.

Examples:
    oomless train examples/tiny-arith.yaml                  # tiny model built locally, CPU, ~1-3 min
    oomless train examples/tiny-arith.yaml --max-steps 20 --output-dir /tmp/arith
    oomless train examples/tiny-arith.yaml --resume         # continue from the last checkpoint
    oomless train examples/tiny-arith.yaml --overwrite      # replace the run in the output folder
    oomless train my-run.yaml --report-to tensorboard       # loss, reward and plan-vs-measured memory
    oomless train my-run.yaml --fit                         # train oomless fit's configuration
    oomless train my-run.yaml --force                       # train although the plan does not fit

A folder that holds another run is refused (exit 2) unless --resume or --overwrite is given.
Ctrl-C saves a checkpoint at the end of the step under way and exits 130; --resume continues it.

Exit codes: 0 trained, 1 refused (the plan does not fit), 2 bad input or a run this machine
cannot do (QLoRA or vLLM without a GPU, missing `train:` section, a used output folder),
130 stopped by Ctrl-C (checkpoint saved). Needs `oomless[train]`.
"""

from __future__ import annotations

from pathlib import Path

import typer

from .import_cmd import FROM_HELP, GPUS_PER_NODE_OPTION, GPU_HELP, HOST_RAM_OPTION, NODES_OPTION

TRAIN_EXTRA = frozenset({"torch", "transformers", "trl", "peft", "accelerate", "datasets", "psutil", "tokenizers"})
"""Top-level modules of `oomless[train]`: missing one is an install problem, not a bug."""


def train_command(
    spec: Path = typer.Argument(..., help="Run spec (YAML) with a `train:` section."),
    force: bool = typer.Option(False, "--force", help="Train even when the plan does not fit."),
    fit: bool = typer.Option(False, "--fit", help="Train the configuration `oomless fit` finds for the spec."),
    output_dir: Path = typer.Option(None, "--output-dir", help="Checkpoints and telemetry. Default: train.output_dir."),
    max_steps: int = typer.Option(None, "--max-steps", min=1, help="Optimizer steps. Default: train.max_steps."),
    resume: bool = typer.Option(False, "--resume", help="Continue from the last checkpoint in the output folder."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace the run the output folder holds (its checkpoints and telemetry)."),
    report_to: list[str] = typer.Option(
        ["none"], "--report-to", help="Logger for loss, reward and plan-vs-measured memory (TRL report_to): tensorboard, wandb, ... Repeatable.",
    ),
    from_framework: str = typer.Option(None, "--from", help=FROM_HELP),
    gpu: str = typer.Option(None, "--gpu", help=GPU_HELP),
    gpus_per_node: int = GPUS_PER_NODE_OPTION,
    nodes: int = NODES_OPTION,
    host_ram: float = HOST_RAM_OPTION,
) -> None:
    """Train GRPO on TRL with the plan applied; exit 0 trained, 1 refused (does not fit), 2 bad input, 130 Ctrl-C."""
    from .main import run_guarded

    def body() -> int:
        from ..errors import InputError
        from ..train.run import TrainOptions, train

        options = TrainOptions(force=force, fit=fit, output_dir=output_dir, max_steps=max_steps, resume=resume,
                               overwrite=overwrite, report_to=tuple(report_to))
        try:
            import tempfile

            from .import_cmd import hardware_flags, materialise

            with tempfile.TemporaryDirectory(prefix="oomless-import-") as folder:
                path = materialise(spec, from_framework, hardware_flags(gpu, gpus_per_node, nodes, host_ram), Path(folder))
                outcome = train(path, options, say=lambda line: typer.echo(line, err=True))
        except ModuleNotFoundError as err:
            if err.name not in TRAIN_EXTRA:
                raise
            raise InputError("train", f"needs the train extra ({err.name} is missing): pip install 'oomless[train]'") from None
        if outcome.output_dir is not None:
            from .train_render import render_outcome

            render_outcome(outcome)
        return outcome.exit_code

    run_guarded(body)


def register(app: typer.Typer) -> None:
    app.command("train")(train_command)
