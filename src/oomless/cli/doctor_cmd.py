"""`oomless doctor LOG`: the cause of a crash, the phase it happened in and the knobs that fix it.

Examples:
    oomless doctor train.log
    oomless doctor train.log --spec examples/seeds/s1-before.yaml
    oomless doctor train.log --from swift run.sh --gpu RTX-3090 --json
    oomless doctor oomless-watch          # a watched run: its job.log and telemetry.jsonl
    dmesg | oomless doctor -

Exit codes: 0 a known out-of-memory error was diagnosed, 1 nothing recognised, 2 bad input
(unreadable log, bad spec or framework config).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Tuple

import typer

from .import_cmd import GPUS_PER_NODE_OPTION, NODES_OPTION, HOST_RAM_OPTION

from ..errors import InputError

if TYPE_CHECKING:
    from ..doctor.diagnose import Diagnosis
    from ..doctor.fit_hook import FitProposal
    from ..doctor.fix_check import CheckedFix
    from ..doctor.fixes import Fix
    from ..doctor.growth import TelemetryFindings
    from ..doctor.reconcile import Reconciliation
    from ..spec.load import ResolvedRun

TELEMETRY_FILE, JOB_LOG = "telemetry.jsonl", "job.log"
"""What `oomless watch` writes in its folder (`oomless train` writes the telemetry)."""
EXIT_DIAGNOSED = 0
"""A known out-of-memory message was found and explained."""
EXIT_NOT_RECOGNISED = 1
"""The log holds no message the doctor knows. Bad input exits with `oomless.errors.EXIT_BAD_INPUT`."""


def doctor_command(
    log: Path = typer.Argument(..., help="Crash log (any text: stderr, dmesg, Ray job logs); - reads standard input; "
                               "a run folder of `oomless watch`/`train` (job.log and telemetry.jsonl)."),
    spec: Path = typer.Option(None, "--spec", help="Run spec (YAML) of the crashed run: compare the log with its plan."),
    from_native: Optional[Tuple[str, Path]] = typer.Option(
        None, "--from", metavar="FRAMEWORK CONFIG",
        help="The crashed run's framework config instead of a spec: swift, trl, verl, easyr1, openrlhf, orz, then the file.",
    ),
    gpu: str = typer.Option(None, "--gpu", help="GPU type when the framework config does not say (with --from)."),
    gpus_per_node: int = GPUS_PER_NODE_OPTION,
    nodes: int = NODES_OPTION,
    host_ram: float = HOST_RAM_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print the diagnosis as a JSON document."),
) -> None:
    """Diagnose a crash log: exit 0 diagnosed, 1 nothing recognised, 2 bad input."""
    from .main import run_guarded

    def body() -> int:
        from ..adapters import HardwareFlags
        from ..doctor import diagnose, read_log

        log_path, telemetry = _run_files(log)
        diagnosis = diagnose(read_log(log_path) if log_path is not None else "")
        measured = _telemetry(telemetry)
        hardware = HardwareFlags(gpu, gpus_per_node, nodes, host_ram)
        run = _load_run(spec, from_native, hardware)
        native = (from_native[0], Path(from_native[1]), hardware) if run is not None and from_native and from_native[0] else None
        checked: tuple[CheckedFix, ...] | None = None
        if run is None:
            fixes, reconciliation, fit = diagnosis.fixes, None, None
        else:
            fixes, reconciliation, fit, checked = _with_run(diagnosis, run, spec, native)
        warnings = run.warnings if run is not None else ()
        if as_json:
            from ..doctor.report import diagnosis_to_dict

            from ..doctor.growth import findings_to_dict

            extra = findings_to_dict(measured) if measured is not None else None
            typer.echo(json.dumps(diagnosis_to_dict(diagnosis, fixes, reconciliation, fit, warnings, telemetry=extra,
                                                    checked=checked), indent=2))
        else:
            for warning in warnings:
                typer.echo(f"warning: {warning}", err=True)
            typer.echo(render(diagnosis, fixes, reconciliation, fit, checked))
            if measured is not None:
                from ..doctor.growth import describe

                typer.echo("measured (telemetry):\n" + "\n".join(f"  {line}" for line in describe(measured)))
        return EXIT_DIAGNOSED if diagnosis.recognised else EXIT_NOT_RECOGNISED

    run_guarded(body)


def _run_files(log: Path) -> tuple[Path | None, Path | None]:
    """The log to read and the telemetry beside it: a run folder gives its job.log (if any) and
    telemetry.jsonl; a log file, the telemetry.jsonl in its folder when there is one."""
    if str(log) == "-":
        return log, None
    if log.is_dir():
        telemetry = log / TELEMETRY_FILE
        if not telemetry.is_file() and not (log / JOB_LOG).is_file():
            raise InputError("LOG", f"{log} is a directory without {JOB_LOG} or {TELEMETRY_FILE}; give a log file")
        return (log / JOB_LOG if (log / JOB_LOG).is_file() else None), (telemetry if telemetry.is_file() else None)
    beside = log.parent / TELEMETRY_FILE
    return log, beside if beside.is_file() else None


def _telemetry(path: Path | None) -> TelemetryFindings | None:
    if path is None:
        return None
    from ..doctor.growth import telemetry_findings
    from ..telemetry import read_records

    return telemetry_findings(read_records(path))


def _load_run(spec: Path | None, from_native: tuple[str, Path] | None, hardware: object) -> ResolvedRun | None:
    from .plan_cmd import load_any

    native = from_native if from_native and from_native[0] is not None else None
    if spec is not None and native is not None:
        raise InputError("--spec/--from", "give one of them, not both")
    if native is not None:
        return load_any(Path(native[1]), native[0], hardware)  # type: ignore[arg-type]
    if spec is not None:
        return load_any(spec, None, hardware)  # type: ignore[arg-type]
    if any(v is not None for v in vars(hardware).values()):
        typer.echo("warning: --gpu/--gpus-per-node/--nodes/--host-ram are ignored without --from", err=True)
    return None


def _with_run(diagnosis: Diagnosis, run: ResolvedRun, spec_path: Path | None, native: tuple[str, Path, object] | None
              ) -> tuple[tuple[Fix, ...], Reconciliation | None, FitProposal | None, tuple[CheckedFix, ...] | None]:
    """Fixes realised for the run and each planned with the margin (the gap the crash measured,
    if larger); fit's answer with that gap kept free and no safety setting of the run lowered."""
    import dataclasses

    from ..doctor.fit_hook import propose_fit
    from ..doctor.fix_check import check_fixes
    from ..doctor.fixes import realise
    from ..doctor.reconcile import reconcile
    from ..planner.plan import make_plan

    if not diagnosis.recognised:
        return (), None, None, None
    plan = make_plan(run.spec, run.arch, run.gpu, run.archs)
    fixes = tuple(r for r in (realise(f, run.spec) for f in diagnosis.fixes) if r is not None)
    reconciliation = reconcile(diagnosis, plan)
    gap = reconciliation.gap_bytes if reconciliation is not None else 0
    checked = check_fixes(tuple(f for f in fixes if not f.knob.startswith("env:")), run, gap)
    fit = propose_fit(run, spec_path if native is None else None, gap)
    if native is not None:
        from ..doctor.native import expressible_proposal, native_lines

        if checked is not None:
            checked = tuple(dataclasses.replace(c, native=native_lines(native[0], native[1], run.spec, c.spec)) for c in checked)
        if fit.spec is not None:
            fit = expressible_proposal(native[0], native[1], run, fit)
    return fixes, reconciliation, fit, checked


def render(diagnosis: Diagnosis, fixes: tuple[Fix, ...], reconciliation: Reconciliation | None, fit: FitProposal | None,
           checked: tuple[CheckedFix, ...] | None = None) -> str:
    """The diagnosis as a few labelled lines for a terminal; with ``checked`` (fixes planned
    against the run), only the fixes that fit with the margin are offered, each with its
    predicted peak, and the others are listed as not enough alone."""
    f = diagnosis.primary
    if f is None:
        return ("No known out-of-memory message found (PyTorch CUDA/HIP, vLLM, NCCL, Ray, kernel OOM killer, CPU allocator).\n"
                "If the run died without one, look for 'Killed process' in `dmesg` and for the last lines of every rank.")
    phase = diagnosis.phase
    lines = [f"{f.kind.value} ({f.variant}) at line {f.line}: {f.message[:160]}"]
    where = phase.phase or "unknown"
    if phase.detail:
        where += f" / {phase.detail}"
    lines.append(f"  phase:  {where}" + (f"   [{phase.evidence}]" if phase.evidence else ""))
    lines.append(f"  cause:  {diagnosis.cause}")
    gap = reconciliation.gap_bytes if reconciliation is not None else 0
    if checked is not None:
        from ..doctor.report import render_checked

        lines += render_checked(fixes, checked, gap)
    elif fixes:
        lines.append("  fixes:")
        for fix in fixes:
            note = "" if fix.keeps_maths else "  (changes the training maths)"
            lines.append(f"    {fix.knob}: {fix.change} — {fix.reason}{note}")
    if len(diagnosis.findings) > 1:
        others = ", ".join(f"{o.kind.value} at line {o.line}" for o in diagnosis.findings if o is not f)
        lines.append(f"  also:   {others}")
    if reconciliation is not None:
        lines.append(f"  plan:   {reconciliation.verdict}")
        lines.extend(f"          note: {n}" for n in reconciliation.notes)
    if fit is not None:
        from ..doctor.report import render_fit_proposal

        lines += render_fit_proposal(fit)
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor_command)
