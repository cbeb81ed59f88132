"""`oomless import --from FRAMEWORK FILE -o spec.yaml`: a framework's own config as a run spec,
each value commented with the native key it came from; and the `--from` helpers every command
that takes a spec shares (plan, fit, compare, trace, doctor, export, train, watch).

Examples:
    oomless import --from verl run_qwen2-7b.sh --gpu H100-80GB -o qwen2-7b.yaml
    oomless import --from ms-swift examples/seeds/native/s1-before.sh --gpu RTX-3090 -o s1.yaml
    oomless fit --from easyr1 examples/seeds/native/s2-before.yaml --gpu A100-40GB --host-ram 760
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from .. import safe_paths as SP

if TYPE_CHECKING:
    from ..adapters import HardwareFlags, ImportResult
    from ..spec.load import ResolvedRun

FROM_HELP = ("Read SPEC as this framework's own config: swift (ms-swift), trl, verl, easyr1, openrlhf, "
             "orz (open-reasoner-zero), vlmr1.")
GPU_HELP = "GPU type when the framework config does not say (with --from)."
GPUS_PER_NODE_OPTION = typer.Option(None, "--gpus-per-node", help="GPUs per node (with --from).")
NODES_OPTION = typer.Option(None, "--nodes", help="Nodes (with --from).")
HOST_RAM_OPTION = typer.Option(None, "--host-ram", help="Host RAM per node in GiB (with --from).")
"""The hardware a framework config does not say, shared by every command that takes `--from`."""

# `--data`, `--data-split`, `--tokenizer`: the run's dataset for `plan` and `fit` (`stats.apply`).
DATA_OPTION = typer.Option(
    None, "--data", help="The run's dataset (a .jsonl/.json/.parquet/.arrow file, a dataset folder or a cached Hub "
    "dataset id; `auto`: the one the --from config names): its prompt lengths (and image sizes) bound the batches the "
    "run meets; the worst batch the limits allow is reported beside them.")
DATA_SPLIT_OPTION = typer.Option("train", "--data-split", help="Split of --data (a dataset folder or Hub id).")
TOKENIZER_OPTION = typer.Option(
    None, "--tokenizer", help="Tokenizer for --data (folder or id). Default: the model's, from its folder or the local "
    "Hugging Face cache; else characters / 4.")


RUN_LOG_OPTION = typer.Option(
    None, "--run-log", help="The log of an earlier run of this config (console output, ms-swift logging.jsonl, "
    "wandb-history.jsonl): the completion lengths it logged (TRL/ms-swift completions/*, verl/EasyR1 response_length/*) "
    "bound the batches the run meets.")


def measured(run: Any, raw: dict | None, spec: Path, data: str | None, split: str,
             tokenizer: str | None, run_log: str | None = None) -> tuple[Any, dict | None]:
    """The run (and, for `fit`, its spec mapping) with ``data``'s lengths and ``run_log``'s
    completion lengths, their notes printed; unchanged, with a warning for options given in
    vain, without them."""
    notes: list[str] = []
    if data is None and (tokenizer is not None or split != "train"):
        typer.echo("warning: --tokenizer/--data-split are ignored without --data", err=True)
    if data is not None:
        from ..stats.apply import with_data, with_data_raw

        folder = spec.resolve().parent
        if raw is None:
            run, notes = with_data(run, data, split, tokenizer, config_folder=folder)
        else:
            run, raw, notes = with_data_raw(run, raw, data, split, tokenizer, config_folder=folder)
    if run_log is not None:
        from ..stats.apply import with_run_log

        run, raw, more = with_run_log(run, raw, run_log)
        notes = [*notes, *more]
    for note in notes:
        typer.echo(f"note: {note}", err=True)
    return run, raw
NO_EFFECT = re.compile(r": no effect on (the planned )?memory$")
"""Ignored-key lines that are only counted: understood keys that change nothing the plan models."""


def hardware_flags(gpu: str | None, gpus_per_node: int | None, nodes: int | None, host_ram: float | None) -> HardwareFlags:
    from ..adapters import HardwareFlags

    return HardwareFlags(gpu, gpus_per_node, nodes, host_ram)


def warning_lines(framework: str, ignored: tuple[str, ...]) -> tuple[str, ...]:
    """Keys that matter for memory and were not understood, one line each; keys without a memory
    effect counted in one line."""
    listed = tuple(f"{framework}: {line}" for line in ignored if not NO_EFFECT.search(line))
    quiet = [line.split(":", 1)[0].split("=", 1)[0] for line in ignored if NO_EFFECT.search(line)]
    if quiet:
        shown = ", ".join(quiet[:4]) + (", ..." if len(quiet) > 4 else "")
        listed += (f"{framework}: {len(quiet)} key(s) with no effect on memory were skipped ({shown}); "
                   "`oomless import` lists them",)
    return listed


def import_result(path: Path, framework: str, hardware: HardwareFlags, echo_notes: bool = True) -> ImportResult:
    from ..adapters import canonical, import_native

    result = import_native(canonical(framework), path, hardware)
    if echo_notes:
        for line in result.notes:
            typer.echo(f"note: {line}", err=True)
    return result


def load_native(path: Path, framework: str, hardware: HardwareFlags) -> tuple[ResolvedRun, dict[str, Any]]:
    """The resolved run of a framework config and its spec mapping; the keys not used become
    the run's warnings (`warning_lines`)."""
    import dataclasses

    from ..spec.load import parse_spec, resolve

    result = import_result(path, framework, hardware)
    spec, idle = with_idle_engine(result.spec, result.idle_engine)
    run = resolve(parse_spec(spec), path.resolve().parent)
    own = tuple(w for w in run.warnings if w.split(" is ignored", 1)[0] not in idle)
    return dataclasses.replace(run, warnings=warning_lines(framework, result.ignored) + own, data=result.data), spec


def with_idle_engine(spec: dict[str, Any], engine: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """``spec`` with the framework's idle vLLM engine (`ImportResult.idle_engine`) in its rollout
    section where it generates with HF, and those fields' dotted names: without effect on the
    plan (spec.ignored; their "is ignored" lines are dropped), they are what `fit --from` moving
    generation to vLLM starts from, so it plans the engine the framework would build."""
    rollout = spec.get("rollout", {})
    if not engine or rollout.get("engine") != "hf":
        return spec, set()
    added = {k: v for k, v in engine.items() if k not in rollout}
    return {**spec, "rollout": {**rollout, **added}}, {f"rollout.{k}" for k in added}


def load_any(path: Path, framework: str | None, hardware: HardwareFlags) -> ResolvedRun:
    """A YAML spec, or a framework's config through its adapter."""
    from ..spec.load import load_run

    if framework is None:
        if any(v is not None for v in vars(hardware).values()):
            typer.echo("warning: --gpu/--gpus-per-node/--nodes/--host-ram are ignored without --from", err=True)
        run = load_run(path)
    else:
        run = load_native(path, framework, hardware)[0]
    return with_model_warnings(run)


def with_model_warnings(run: ResolvedRun) -> ResolvedRun:
    """The run with the memory model's own approximations for its architectures added to its
    warnings (e.g. a hybrid's linear-attention layers planned as attention layers)."""
    import dataclasses

    from ..memory.activations import activation_model_warnings

    extra = tuple(w for a in (run.arch, *run.archs.values()) for w in activation_model_warnings(a) if w not in run.warnings)
    return dataclasses.replace(run, warnings=run.warnings + tuple(dict.fromkeys(extra))) if extra else run


def materialise(path: Path, framework: str | None, hardware: HardwareFlags, folder: Path) -> Path:
    """``path`` itself, or the spec imported from it written as YAML into ``folder`` (for
    commands that read a spec file: train)."""
    if framework is None:
        return path
    result = import_result(path, framework, hardware)
    for line in warning_lines(framework, result.ignored):
        typer.echo(f"warning: {line}", err=True)
    target = folder / f"{path.stem}.spec.yaml"
    target.write_text(commented_spec(result, framework, path), encoding="utf-8")
    return target


def commented_spec(result: ImportResult, framework: str, path: Path) -> str:
    """The imported spec as YAML; each value says which native key it came from (or that it is
    the framework's default, or derived), then the notes and the keys not used."""
    import yaml

    from ..adapters import canonical, spec_sources
    from ..mappings import flatten

    name = canonical(framework)
    sources, text = spec_sources(name), _read(path)
    lines = [f"# Imported by `oomless import --from {framework} {path}`.", "# Each value: the native key it came from."]
    body = yaml.safe_dump(result.spec, sort_keys=False, default_flow_style=False).splitlines()
    flat = flatten(result.spec)
    out, stack = [], []
    for line in body:
        indent = (len(line) - len(line.lstrip())) // 2
        key = line.strip().split(":", 1)[0]
        stack = [*stack[:indent], key]
        dotted = ".".join(stack)
        comment = _source_comment(dotted, sources, text) if dotted in flat else ""
        out.append(f"{line}  # {comment}" if comment else line)
    tail = [f"# note: {n}" for n in result.notes] + [f"# not used: {i}" for i in result.ignored]
    return "\n".join([*lines, *out, *tail]) + "\n"


COMMAND_LINE = {"hardware.gpu": "--gpu", "hardware.host_ram_gib": "--host-ram"}


def _source_comment(dotted: str, sources: dict[str, str], text: str) -> str:
    if dotted in COMMAND_LINE:
        return f"from {COMMAND_LINE[dotted]} (command line)"
    native = next((sources[k] for k in _prefixes(dotted) if k in sources), None)
    if native is None:
        return "derived or oomless default"
    keys = [k.strip() for k in native.split("|")]
    found = [k for k in keys if _mentions(text, k)]
    return f"from {found[0]}" if found else f"default of {keys[0]}"


def _prefixes(dotted: str) -> list[str]:
    parts = dotted.split(".")
    return [".".join(parts[:i]) for i in range(len(parts), 0, -1)]


def _mentions(text: str, key: str) -> bool:
    leaf = key.lstrip("-").split(".")[-1]
    return bool(re.search(rf"(?<![\w]){re.escape(key.lstrip('-'))}(?![\w])", text)) or (
        "." in key and bool(re.search(rf"\b{re.escape(leaf)}\s*[:=]", text)))


def _read(path: Path, depth: int = 0) -> str:
    """The file's text and that of the YAML/JSON files it names (a `--config-name`, a DeepSpeed
    JSON), so a value set in either counts as set."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""
    if depth > 0:
        return text
    names = re.findall(r"[\w./-]+\.(?:ya?ml|json)\b", text)
    names += [f"{n}.yaml" for n in re.findall(r"--config-name[= ]+([\w.-]+)", text) if not n.endswith((".yaml", ".yml"))]
    extra = [_read(path.parent / n, depth + 1) for n in dict.fromkeys(names) if not SP.path_problem(n) and SP.is_file(path.parent / n)]
    return "\n".join([text, *extra])


def import_command(
    config: Path = typer.Argument(..., help="The framework's config: a launch script, YAML or experiment file."),
    from_framework: str = typer.Option(..., "--from", help=FROM_HELP),
    output: Path = typer.Option(None, "-o", "--output", help="Write the spec here (never over an existing file without --force); default: standard output."),
    force: bool = typer.Option(False, "--force", help="Overwrite --output if it exists."),
    gpu: str = typer.Option(None, "--gpu", help=GPU_HELP),
    gpus_per_node: int = GPUS_PER_NODE_OPTION,
    nodes: int = NODES_OPTION,
    host_ram: float = HOST_RAM_OPTION,
) -> None:
    """Convert a framework's config into a run spec YAML; exit 0 written, 2 bad input."""
    from .main import run_guarded

    def body() -> int:
        from ..errors import InputError
        from ..spec.load import parse_spec

        result = import_result(config, from_framework, hardware_flags(gpu, gpus_per_node, nodes, host_ram), echo_notes=False)
        parse_spec(result.spec)  # the spec it writes must load
        text = commented_spec(result, from_framework, config)
        if output is None:
            typer.echo(text, nl=False)
            return 0
        if output.exists() and not force:
            raise InputError(str(output), "file exists; pass --force to overwrite it")
        if output.resolve() == config.resolve():
            raise InputError(str(output), "is the input config; choose another --output")
        output.write_text(text, encoding="utf-8")
        typer.echo(str(output))
        return 0

    run_guarded(body)


def register(app: typer.Typer) -> None:
    app.command("import")(import_command)
