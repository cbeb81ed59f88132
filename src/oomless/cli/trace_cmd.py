"""`oomless trace SPEC`: the exact memory of the spec's training step, traced on fake tensors.

Builds the model from its config.json (no download, no GPU), runs one policy update of the
spec's algorithm (GRPO, DAPO, RLOO, or PPO's actor) — no-grad log-prob forward, training
forward, loss, backward, first optimizer step — in every logits mode but Liger's `fused`, and
reports the peak
live bytes per category, the moment of the peak, the modules whose tensors fill it, and the
plan's prediction of the same step's training activation peak next to the traced one.
The trace is one process holding one unsharded replica; under ZeRO/FSDP the header and the
JSON (`scope`) say which categories each real rank would hold only a shard of. A Qwen2.5-VL
spec with images traces the vision tower inside the step and compares its part with the plan's
vision terms (JSON `vision`, `plan.vision`); other vision towers are left out, with a warning.

Examples:
    oomless trace examples/seeds/s1-after.yaml
    oomless trace examples/seeds/s1-after.yaml --json
    oomless trace --model Qwen/Qwen2.5-0.5B-Instruct --micro-batch 2 --prompt-tokens 512 --completion-tokens 512
    oomless trace examples/quickstart.yaml --no-checkpointing

Needs the optional extra: pip install 'oomless[trace]'.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from .import_cmd import FROM_HELP, GPUS_PER_NODE_OPTION, GPU_HELP, HOST_RAM_OPTION, NODES_OPTION

from ..errors import EXIT_FITS, InputError

if TYPE_CHECKING:
    from ..spec.load import ResolvedRun
    from ..spec.run import RunSpec
    from ..trace.compare import Prediction
    from ..trace.result import TraceResult

TRACE_ONLY_CAPACITY_GIB = 1024
"""GPU capacity of the spec made from flags alone (only the train phase's terms are compared)."""


def _resolve(spec: Path | None, overrides: dict[str, Any], native: tuple[ResolvedRun, dict[str, Any]] | None = None) -> ResolvedRun:
    from ..spec.load import load_run, parse_spec, read_yaml, resolve

    if spec is None:
        if "model" not in overrides:
            raise InputError("trace", "give a SPEC file or --model ID")
        data: dict[str, Any] = {"hardware": {"gpu_capacity_gib": TRACE_ONLY_CAPACITY_GIB, "gpus_per_node": 1},
                                "distribution": {"strategy": "ddp"}, "rollout": {"engine": "hf"}}
        base = None
    elif native is not None:
        if not overrides:
            return native[0]
        data, base = dict(native[1]), spec.resolve().parent
    else:
        if not overrides:
            return load_run(spec)
        data, base = read_yaml(spec), spec.resolve().parent
    for dotted, value in overrides.items():
        node = data
        *parents, leaf = dotted.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return resolve(parse_spec(data), base)


def _without_images(run: ResolvedRun) -> tuple[ResolvedRun, list[str]]:
    """A vision tower the tracer does not build (`trace.vision_plan.TRACED_TOWERS`): compare
    against the plan of the text-only step."""
    import dataclasses

    from ..trace.vision_plan import tower_traced

    if run.arch.vision is None or run.spec.vision.images_per_prompt == 0:
        return run, []
    notes = []
    if run.spec.vision.dense_attention_mask:
        notes.append("vision.dense_attention_mask (transformers 4.49-4.53) is planned but not traced: "
                     "the trace runs the installed transformers' per-window attention")
    if tower_traced(run.arch):
        return run, notes
    vision = run.spec.vision.model_copy(update={"images_per_prompt": 0})
    spec = run.spec.model_copy(update={"vision": vision})
    return dataclasses.replace(run, spec=spec), [f"the {run.arch.vision.model_type} vision tower and its image tokens "
                                                  "are not traced; the step is traced and planned with text prompts only"]


def _with_traced_transformers(spec: RunSpec) -> RunSpec:
    """The spec the trace is compared with: it traced the installed transformers, so a spec
    that names no `transformers_version` is planned for that one (its checkpointing hooks
    decide what a frozen vision tower keeps: `planner.vision_terms`)."""
    if spec.transformers_version is not None:
        return spec
    import transformers

    from ..planner.vision_terms import frozen_tower_keeps_activations

    traced = spec.model_copy(update={"transformers_version": transformers.__version__})
    if frozen_tower_keeps_activations(traced):
        typer.echo(f"note: compared with the plan for transformers {transformers.__version__}, the release traced "
                   "(the spec names no transformers_version; it decides what the frozen vision tower keeps)", err=True)
    return traced


def trace_command(
    spec: Path = typer.Argument(None, help="Run spec (YAML). Optional with --model."),
    as_json: bool = typer.Option(False, "--json", help="Print the trace and the plan's prediction as JSON."),
    model: str = typer.Option(None, "--model", help="Catalog id or config path (overrides the spec's model)."),
    micro_batch: int = typer.Option(None, "--micro-batch", min=1, help="Sequences per training micro-batch."),
    prompt_tokens: int = typer.Option(None, "--prompt-tokens", min=1, help="Prompt length in tokens."),
    completion_tokens: int = typer.Option(None, "--completion-tokens", min=1, help="Completion length in tokens."),
    checkpointing: bool = typer.Option(None, "--checkpointing/--no-checkpointing", help="Gradient checkpointing."),
    from_framework: str = typer.Option(None, "--from", help=FROM_HELP),
    gpu: str = typer.Option(None, "--gpu", help=GPU_HELP),
    gpus_per_node: int = GPUS_PER_NODE_OPTION,
    nodes: int = NODES_OPTION,
    host_ram: float = HOST_RAM_OPTION,
) -> None:
    """Trace the spec's training step on fake tensors; compare with the plan. Exit 0, or 2 on bad input."""
    from .main import run_guarded

    def body() -> int:
        from ..trace import require_torch

        require_torch()
        import dataclasses

        from ..trace.compare import predict, setup_from_spec, trace_scope
        from ..trace.model import raw_config
        from ..trace.step import run_trace

        flags = {"model": model, "batch.micro_batch_size": micro_batch, "lengths.max_prompt_tokens": prompt_tokens,
                 "lengths.max_completion_tokens": completion_tokens, "gradient_checkpointing": checkpointing}
        native = None
        if from_framework is not None:
            if spec is None:
                raise InputError("--from", "give the framework's config file as SPEC")
            from .import_cmd import hardware_flags, load_native

            native = load_native(spec, from_framework, hardware_flags(gpu, gpus_per_node, nodes, host_ram))
        run, notes = _without_images(_resolve(spec, {k: v for k, v in flags.items() if v is not None}, native))
        for line in (*run.warnings, *notes):
            typer.echo(f"warning: {line}", err=True)
        result = run_trace(raw_config(run.arch), setup_from_spec(run.spec, run.arch), chunk_rows=run.spec.logits_chunk_rows)
        result = dataclasses.replace(result, scope=trace_scope(run.spec))
        prediction = predict(_with_traced_transformers(run.spec), run.arch, run.gpu)
        if as_json:
            typer.echo(json.dumps(_document(result, prediction), indent=2))
        else:
            _render(result, prediction)
        return EXIT_FITS

    run_guarded(body)


def _document(result: TraceResult, prediction: Prediction) -> dict[str, Any]:
    from ..trace.compare import relative_difference

    traced = result.activation_peak.activation_bytes
    plan: dict[str, Any] = {
        "train_phase_components": dict(prediction.components),
        "activation_bytes": prediction.activation_bytes,
        "traced_activation_bytes": traced,
        "relative_difference": round(relative_difference(prediction.activation_bytes, traced), 5),
    }
    if prediction.vision is not None and result.vision is not None:
        plan["vision"] = {**prediction.vision.to_dict(), "traced_charged_bytes": result.vision.charged_bytes,
                          "relative_difference": round(relative_difference(prediction.vision.train_bytes,
                                                                           result.vision.charged_bytes), 5)}
    return {**result.to_dict(), "plan": plan}


def _render(result: TraceResult, prediction: Prediction) -> None:
    from ..spec.enums import Algorithm
    from ..trace.compare import ALGORITHM_STEPS, relative_difference
    from ..units import format_bytes

    s, peak, act = result.setup, result.peak, result.activation_peak
    images = f" + {s.image_tokens_per_sequence} image" if s.image_tokens_per_sequence else ""
    typer.echo(
        f"{s.model}: {ALGORITHM_STEPS[Algorithm(s.algorithm)]} of {s.num_sequences} × ({s.prompt_len}{images} + {s.completion_len}) tokens, {s.finetune}, "
        f"{s.attention}, {'checkpointing' if s.checkpointing else 'no checkpointing'}, logits {s.logits}, "
        f"{s.optimizer} {s.precision} — traced on fake tensors in {result.seconds:.1f} s "
        f"(torch {result.versions.get('torch')}, transformers {result.versions.get('transformers')})"
    )
    typer.echo(f"Traced: {result.scope.statement}")
    typer.echo(f"\nPeak of the step: {format_bytes(peak.total_bytes)} in {peak.region} ({peak.module or '-'}: {peak.op})")
    for cat, num in sorted(peak.by_category.items(), key=lambda kv: -kv[1]):
        typer.echo(f"  {cat:6s} {format_bytes(num):>12s}")
    typer.echo("\nPeak per region (total / ACT+TEMP):")
    for name, p in result.region_peaks.items():
        typer.echo(f"  {name:9s} {format_bytes(p.total_bytes):>12s} / {format_bytes(p.activation_bytes):>12s}  "
                   f"at {p.module or '-'}: {p.op}")
    typer.echo(f"\nTraining activation peak (ACT + TEMP): {format_bytes(act.activation_bytes)} "
               f"in {act.region} ({act.module or '-'}: {act.op}); largest makers of what is alive then:")
    for module, num in act.top_modules:
        typer.echo(f"  {format_bytes(num):>12s}  {module}")
    parts = ", ".join(f"{name} {format_bytes(num)}" for name, num in prediction.components.items() if num)
    diff = relative_difference(prediction.activation_bytes, act.activation_bytes)
    typer.echo(f"\nPlan (train phase ACT + TEMP): {format_bytes(prediction.activation_bytes)} ({parts}); "
               f"traced {format_bytes(act.activation_bytes)}; plan − trace = {100 * diff:+.2f} %")
    if result.vision is not None and prediction.vision is not None:
        _render_vision(result, prediction)


def _render_vision(result: TraceResult, prediction: Prediction) -> None:
    """The vision tower's traced terms beside the plan's (`trace.vision_plan.VisionPrediction`)."""
    from ..trace.compare import relative_difference
    from ..units import format_bytes

    v, p, s = result.vision, prediction.vision, result.setup
    assert v is not None and p is not None
    t, h, w = s.image_grid_thw
    state = ("trained" if v.trains else "frozen") + (", checkpointed" if v.checkpointing else "")
    typer.echo(f"\nVision tower ({state}): {v.num_images} images of {t}×{h}×{w} = {v.num_patches:,} patches "
               f"({s.image_tokens_per_sequence:,} image tokens per sequence); the plan's worst image has {p.num_patches:,}")
    rows = [
        ("held while the LM trains", v.held_bytes, p.saved_bytes, "saved + merger; 0 when frozen before transformers 5.0"),
        ("training forward peak", v.forward_peak_bytes, p.train_bytes, "train phase vision.activations"),
        ("log-prob forward peak", v.logprob_forward_peak_bytes, p.logprob_bytes, "log-prob phase vision.activations"),
        ("backward peak", v.backward_peak_bytes, p.saved_bytes + p.backward_transient_bytes, "saved + backward transient"),
    ]
    for label, traced, planned, what in rows:
        diff = f"{100 * relative_difference(planned, traced):+.2f} %" if traced else "-"
        typer.echo(f"  {label:27s} traced {format_bytes(traced):>12s}   plan {format_bytes(planned):>12s} ({what}); plan − trace = {diff}")
    diff = relative_difference(p.train_bytes, v.charged_bytes)
    typer.echo(f"  Plan (train phase vision.activations): {format_bytes(p.train_bytes)}; traced max(held, forward peak) "
               f"{format_bytes(v.charged_bytes)}; plan − trace = {100 * diff:+.2f} %")


def register(app: typer.Typer) -> None:
    app.command("trace")(trace_command)
