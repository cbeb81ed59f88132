"""`oomless fit SPEC`: the fastest configuration that fits, as the smallest change to SPEC.

Examples:
    oomless fit examples/seeds/s1-before.yaml
    oomless fit examples/seeds/s1-before.yaml --margin 2 --top 3 --json
    oomless fit examples/seeds/s3-before.yaml --allow lengths --allow max_pixels
    oomless fit examples/seeds/s1-before.yaml --write s1-fitted.yaml --export swift
    oomless fit --from swift examples/seeds/native/s1-before.sh --gpu RTX-3090 --write fitted/
    oomless fit --from swift run.sh --gpu H100 --in-place          # run.sh patched, run.sh.bak kept
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ..errors import EXIT_DOES_NOT_FIT, EXIT_FITS, InputError
from .import_cmd import (DATA_OPTION, DATA_SPLIT_OPTION, FROM_HELP, GPUS_PER_NODE_OPTION, GPU_HELP, HOST_RAM_OPTION,
                         NODES_OPTION, RUN_LOG_OPTION, TOKENIZER_OPTION, measured)

if TYPE_CHECKING:
    from ..fit.probe import Margin
    from ..fit.search import Choice, FitOptions
    from .fit_native import NativeOutcome

def fit_command(
    spec: Path = typer.Argument(..., help="Run spec (YAML), or a framework config with --from."),
    from_framework: str = typer.Option(None, "--from", help=FROM_HELP),
    gpu: str = typer.Option(None, "--gpu", help=GPU_HELP),
    gpus_per_node: int = GPUS_PER_NODE_OPTION,
    nodes: int = NODES_OPTION,
    host_ram: float = HOST_RAM_OPTION,
    margin: float = typer.Option(None, "--margin", metavar="GIB", help="GiB every GPU and host constraint must keep free."),
    margin_fraction: float = typer.Option(
        None, "--margin-fraction", metavar="F", help="Fraction of each device's capacity to keep free (default 0.05)."
    ),
    allow: list[str] = typer.Option(
        None, "--allow", metavar="KNOB",
        help="Let a knob that changes the training move (repeatable): method, lora_rank, lengths, num_generations, "
        "max_pixels, beta, gpus.",
    ),
    maximize_path: str = typer.Option(
        None, "--maximize", metavar="FIELD",
        help="Instead: the largest value of a numeric spec field (e.g. lengths.max_completion_tokens) that fits with "
        "the margin, with everything else as given and with the fastest memory knobs that fit.",
    ),
    top: int = typer.Option(5, "--top", metavar="K", help="Alternatives to list after the best configuration."),
    write: Path = typer.Option(
        None, "--write", metavar="FILE|DIR",
        help="Save the best configuration as a new spec YAML (never overwrites an existing file); with --from, "
        "a directory for patched copies of the framework file (only the changed keys edited; a diff is shown).",
    ),
    in_place: bool = typer.Option(False, "--in-place", help="With --from: patch the framework file itself, keeping FILE.bak."),
    overwrite: bool = typer.Option(False, "--overwrite", help="With --from: replace existing copies in --write DIR (or FILE.bak)."),
    export: str = typer.Option(
        None, "--export", metavar="FRAMEWORK",
        help="Also emit the best configuration for a framework (swift, trl, verl, easyr1, openrlhf, orz, vlmr1) into "
        "FILE-FRAMEWORK/ next to --write, else SPEC-fit-FRAMEWORK/ in the current directory.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the result as a JSON document."),
    data: str = DATA_OPTION,
    data_split: str = DATA_SPLIT_OPTION,
    tokenizer: str = TOKENIZER_OPTION,
    run_log: str = RUN_LOG_OPTION,
) -> None:
    """Search memory knobs that keep the training maths for the fastest configuration that fits;
    exit 0 found, 1 nothing fits, 2 bad input."""
    from .main import run_guarded

    def body() -> int:
        from ..fit.search import FitOptions, fit_file
        from ..fit.space import MATH_KNOBS
        from ..fit.write import check_target, write_spec

        options = FitOptions(_margin(margin, margin_fraction), _allowed(allow, MATH_KNOBS), _top(top))
        data_args = (data, data_split, tokenizer, run_log)
        if maximize_path is not None:
            return _maximize(spec, from_framework, (gpu, gpus_per_node, nodes, host_ram), maximize_path, options, as_json,
                             data_args)
        if from_framework is not None:
            from .fit_native import check_targets

            check_targets(spec, write, in_place, overwrite)
        elif in_place or overwrite:
            raise InputError("--in-place" if in_place else "--overwrite", "only with --from FRAMEWORK (a spec is never overwritten)")
        elif write is not None:
            check_target(write, spec)
        native = None
        if from_framework is None and data is None and run_log is None:
            result = fit_file(spec, options)
        elif from_framework is None:
            from ..fit.search import fit
            from ..spec.load import load_run, read_yaml

            run, raw = measured(load_run(spec), read_yaml(spec), spec, *data_args)
            result = fit(run, raw, spec.resolve().parent, options)
        else:
            from ..fit.search import fit
            from .import_cmd import hardware_flags, load_native

            hardware = hardware_flags(gpu, gpus_per_node, nodes, host_ram)
            run, raw = measured(*load_native(spec, from_framework, hardware), spec, *data_args)
            for warning in run.warnings:
                typer.echo(f"warning: {warning}", err=True)
            import dataclasses

            from .fit_native import NATIVE_ALTERNATIVES, native_limits, native_outcome

            wide = dataclasses.replace(options, top_k=max(options.top_k, NATIVE_ALTERNATIVES),
                                       **native_limits(from_framework, spec, run))
            result = fit(run, raw, spec.resolve().parent, wide)
            if result.best is not None:
                native = native_outcome(from_framework, spec, run, [result.best, *result.alternatives], hardware, write,
                                        in_place, overwrite, options.margin)
            result = dataclasses.replace(result, alternatives=result.alternatives[:options.top_k])
        shown = _margin_text(options.margin)
        document: dict = {}  # the human output reads only what is written and exported from it
        if as_json:  # the whole document (each configuration's plan as a dict) only for --json
            from ..fit.report import fit_to_dict

            document = fit_to_dict(result, str(spec))
        export_error = None
        if result.best is not None:
            if native is not None:
                document["native"] = {"framework": from_framework, "patched_choice": native.rank, "note": native.note,
                                      "changes": native.changes, "diff": native.diff,
                                      "cannot_express": native.message, "written": [str(p) for p in native.written],
                                      "read_back": native.read_back}
            elif write is not None:
                write_spec(write, result.best, spec, shown)
                document["written"] = str(write)
            if export is not None:
                try:
                    paths, export_note = _export(export, result.best, spec, write if native is None else None)
                    document["exported"] = [str(p) for p in paths]
                    document["export_note"] = export_note
                except InputError as err:
                    shown = err.message if err.field.startswith("--") else f"{err.field}: {err.message}"
                    export_error = InputError("--export", shown)
        if as_json:
            typer.echo(json.dumps(document, indent=2))
        else:
            from .fit_render import render_fit

            render_fit(result, shown, native=None if native is None else (from_framework, native.changes, native.rank))
            if native is not None:
                _echo_native(native)
            if "written" in document:
                typer.echo(f"wrote {document['written']}")
            for path in document.get("exported", []):
                typer.echo(f"exported {path}")
            if document.get("export_note"):
                typer.echo(f"warning: --export: {document['export_note']}", err=True)
        if export_error is not None:
            raise export_error
        return EXIT_FITS if result.best is not None else EXIT_DOES_NOT_FIT

    # One-shot (the cyclic collector stays paused, as for `plan`): a fit of the seeds leaves no
    # cyclic garbage at all (`gc.collect()` after `fit_file` of s0-before, s1-after-shared and
    # s2-before finds 0 objects) and its peak RSS is unchanged, while the ~130 collections cost
    # ~60 ms of the ~1.1 s of `oomless fit examples/seeds/s0-before.yaml`.
    run_guarded(body, one_shot=True)


def _maximize(spec: Path, framework: str | None, hardware: tuple, path: str, options: FitOptions, as_json: bool,
              data_args: tuple[str | None, str, str | None, str | None]) -> int:
    """`--maximize FIELD`: print the largest fitting value (`fit.maximize`)."""
    from ..fit.maximize import maximize, maximize_lines, maximize_to_dict
    from ..spec.load import load_run, read_yaml

    if framework is None:
        run, raw = load_run(spec), read_yaml(spec)
    else:
        from .import_cmd import hardware_flags, load_native

        run, raw = load_native(spec, framework, hardware_flags(*hardware))
    run, raw = measured(run, raw, spec, *data_args)
    result = maximize(run, raw, spec.resolve().parent, path, options)
    if as_json:
        typer.echo(json.dumps(maximize_to_dict(result), indent=2))
    else:
        typer.echo("\n".join(maximize_lines(result, _margin_text(options.effective_margin))))
    found = result.held.value is not None or result.with_knobs is not None
    return EXIT_FITS if found else EXIT_DOES_NOT_FIT


def _margin(gib: float | None, fraction: float | None) -> Margin:
    from ..fit.probe import Margin
    from ..fit.search import DEFAULT_MARGIN_FRACTION
    from ..units import gib_to_bytes

    if gib is not None and fraction is not None:
        raise InputError("--margin", "give --margin or --margin-fraction, not both")
    if gib is not None:
        if gib < 0:
            raise InputError("--margin", f"{gib} is not valid; allowed: GiB >= 0")
        return Margin(num_bytes=gib_to_bytes(gib))
    fraction = DEFAULT_MARGIN_FRACTION if fraction is None else fraction
    if not 0 <= fraction < 1:
        raise InputError("--margin-fraction", f"{fraction} is not valid; allowed: 0 <= F < 1")
    return Margin(fraction=fraction)


def _margin_text(margin: Margin) -> str:
    from ..units import format_bytes

    if margin.num_bytes:
        return format_bytes(margin.num_bytes)
    return f"{margin.fraction:.0%}-of-capacity"


def _allowed(values: list[str] | None, known: tuple[str, ...]) -> frozenset[str]:
    for value in values or []:
        if value not in known:
            raise InputError("--allow", f"unknown knob {value!r}; allowed: {', '.join(known)}")
    return frozenset(values or [])


def _top(k: int) -> int:
    if k < 0:
        raise InputError("--top", f"{k} is not valid; allowed: K >= 0")
    return k


def _export(framework: str, best: Choice, source: Path, write: Path | None) -> tuple[list[Path], str | None]:
    """The framework's files of the best configuration, and the one message naming every value
    they cannot say (`adapters.patch.export`)."""
    from ..adapters import canonical
    from ..adapters.patch.export import export_fitted

    out_dir = write.with_name(f"{write.stem}-{framework}") if write is not None else Path.cwd() / f"{source.stem}-fit-{framework}"
    return export_fitted(canonical(framework), best.run.spec, best.run.arch, out_dir)


def _echo_native(native: NativeOutcome) -> None:
    if native.note:
        typer.echo(f"note: {native.note}")
    if native.diff:
        typer.echo(native.diff.rstrip("\n"))
    if native.message:
        typer.echo(f"warning: {native.message}", err=True)
    for path in native.written:
        typer.echo(f"wrote {path}")
    if native.read_back:
        typer.echo(native.read_back)


def register(app: typer.Typer) -> None:
    app.command("fit")(fit_command)
