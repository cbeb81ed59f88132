"""`oomless train SPEC`: plan, refuse what does not fit, then run GRPO on TRL and compare.

Order: read the spec (optionally through `oomless.fit`), plan it, stop unless it fits (or
`force`), check the machine can run it, write multi-GPU launch files, build or find the model,
load data and rewards, train with telemetry, and return the per-phase plan-vs-actual rows and
the reward curve. Files in the output folder: `telemetry.jsonl` (one record per step and
phase), `events.jsonl` (out-of-memory recoveries), `rewards.jsonl`, `checkpoint-N/`, `final/`,
`launch/` (multi-GPU specs), `model/` (a built tiny model), `summary.json`. A folder that holds
another run is refused unless `--resume` (continue it) or `--overwrite` (replace it) is given;
every file of ours is written atomically (`oomless.train.files`); Ctrl-C saves a checkpoint and
stops (`oomless.train.interrupt`).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from ..errors import EXIT_DOES_NOT_FIT, EXIT_FITS, EXIT_INTERRUPTED, InputError
from ..planner.plan import Plan, make_plan
from ..spec.load import ResolvedRun, load_run
from ..spec.run import RolloutEngine, RunSpec
from . import settings as S
from .files import checkpoints, last_complete_checkpoint, write_text
from .launch import launch_files
from .report import plan_vs_actual_rows, reward_curve

TELEMETRY_FILE, EVENTS_FILE, REWARDS_FILE, SUMMARY_FILE = "telemetry.jsonl", "events.jsonl", "rewards.jsonl", "summary.json"
FINAL_DIR = "final"
RUN_FILES = (TELEMETRY_FILE, EVENTS_FILE, REWARDS_FILE, SUMMARY_FILE)
LOGGER_MODULES = {
    "tensorboard": ("tensorboard", "tensorboardX"), "wandb": ("wandb",), "mlflow": ("mlflow",), "trackio": ("trackio",),
    "comet_ml": ("comet_ml",), "clearml": ("clearml",), "swanlab": ("swanlab",), "dvclive": ("dvclive",),
}
"""Loggers `--report-to` passes through to TRL (transformers 5.24 `INTEGRATION_TO_CALLBACK` keys
that log scalars) and the module each needs (any one of them)."""
REPORT_TO = ("none", "all", *LOGGER_MODULES)
""""none": no logger; "all": every one installed."""


@dataclass(frozen=True)
class TrainOptions:
    force: bool = False
    fit: bool = False
    output_dir: Path | None = None
    max_steps: int | None = None
    resume: bool = False
    overwrite: bool = False
    report_to: tuple[str, ...] = ("none",)
    progress: bool = True


@dataclass
class TrainOutcome:
    exit_code: int
    plan: Plan
    output_dir: Path | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)
    curve: list[dict[str, Any]] = field(default_factory=list)
    rewards: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    interrupted_at_step: int | None = None
    """The step whose checkpoint Ctrl-C saved (the run stopped there; `--resume` continues)."""


def fitted_run(spec_path: Path, say: Callable[[str], None]) -> ResolvedRun | None:
    """The fastest configuration `oomless.fit` finds for the spec, or None when it finds none.
    Without `oomless.fit` installed the spec is used as written (with a warning)."""
    try:
        from ..fit.search import FitOptions, fit_file
    except ImportError:
        say("warning: --fit needs oomless.fit, which this installation lacks; training the spec as written")
        return load_run(spec_path)
    result = fit_file(spec_path, FitOptions())
    if result.best is None:
        return None
    if not result.best.changes:
        say("fit: the spec already is the fastest configuration that fits")
    for path, (old, new) in result.best.changes.items():
        say(f"fit: {path}: {old} → {new}")
    return result.best.run


def _violation_lines(plan: Plan) -> list[str]:
    return [
        f"{c.phase} on {c.device_role if c.device == 'gpu' else 'host'} {c.device}: {c.component} needs "
        f"{c.required_bytes:,} B, has {c.available_bytes:,} B ({c.message})"
        for c in plan.violations
    ]


def training_gpus(spec: RunSpec) -> int:
    separate = spec.rollout.num_gpus if spec.rollout.engine == RolloutEngine.vllm_separate else 0
    return (spec.hardware.gpus_per_node - separate) * spec.hardware.num_nodes


def write_launch_files(spec: RunSpec, folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, content in launch_files(spec).items():
        path = folder / name
        text = json.dumps(content, indent=2) if name.endswith(".json") else yaml.safe_dump(content, sort_keys=False)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def model_location(spec: RunSpec, base_dir: Path) -> str:
    local = base_dir / spec.model
    if local.exists():
        return str(local.parent if local.is_file() else local)
    return spec.model


def run_contents(out_dir: Path) -> list[str]:
    """What of an earlier run ``out_dir`` holds (telemetry, checkpoints, the final model)."""
    if not out_dir.is_dir():
        return []
    found = [name for name in (*RUN_FILES, FINAL_DIR) if (out_dir / name).exists()]
    return found + [p.name for _, p in checkpoints(out_dir)]


def check_options(options: TrainOptions) -> None:
    if options.resume and options.overwrite:
        raise InputError("--resume", "and --overwrite exclude each other: continue the run in the folder, or replace it")
    if len(options.report_to) > 1 and {"none", "all"} & set(options.report_to):
        raise InputError("--report-to", f"{' and '.join(options.report_to)}: 'none' and 'all' stand alone")
    unknown = [r for r in options.report_to if r not in REPORT_TO]
    if unknown:
        raise InputError("--report-to", f"{unknown[0]!r} is not a logger TRL reports to; allowed: {', '.join(REPORT_TO)}")
    import importlib.util

    for name in options.report_to:
        modules = LOGGER_MODULES.get(name, ())
        if modules and not any(importlib.util.find_spec(m) for m in modules):
            raise InputError("--report-to", f"{name} is not installed: pip install {modules[0].replace('_', '-')}")


def refuse_a_used_folder(out_dir: Path, resume: bool, overwrite: bool) -> list[str]:
    """What of another run ``out_dir`` holds; an `InputError` when that is something and
    neither ``resume`` nor ``overwrite`` says what to do with it."""
    contents = run_contents(out_dir)
    if contents and not (resume or overwrite):
        raise InputError(
            "--output-dir",
            f"{out_dir} holds another run ({', '.join(contents[:3])}{', ...' if len(contents) > 3 else ''}); "
            "--resume continues it, --overwrite replaces it",
        )
    return contents


def prepare_output(out_dir: Path, resume: bool, say: Callable[[str], None] = print, overwrite: bool = False) -> Path | None:
    """The checkpoint to resume from (None for a fresh run). A folder holding another run is
    refused unless ``resume`` (continue from its last complete checkpoint) or ``overwrite``
    (its run's files are removed first)."""
    from .telemetry import keep_records_up_to

    contents = refuse_a_used_folder(out_dir, resume, overwrite)
    if resume:
        checkpoint, incomplete = last_complete_checkpoint(out_dir)
        for path in incomplete:
            say(f"note: {path} was cut off while being saved (no trainer_state.json); it is skipped")
        if checkpoint is None:
            raise InputError("--resume", f"no complete checkpoint-N folder in {out_dir}")
        step = int(checkpoint.name.split("-")[-1])
        for name in (TELEMETRY_FILE, REWARDS_FILE, EVENTS_FILE):
            keep_records_up_to(out_dir / name, step)
        return checkpoint
    if contents:
        say(f"note: --overwrite: removing the earlier run in {out_dir} ({', '.join(contents)})")
    for name in RUN_FILES:
        (out_dir / name).unlink(missing_ok=True)
    for old in [p for _, p in checkpoints(out_dir)] + [out_dir / FINAL_DIR]:
        shutil.rmtree(old, ignore_errors=True)
    return None


def train(spec_path: Path, options: TrainOptions, say: Callable[[str], None] = print) -> TrainOutcome:
    """Everything `oomless train` does; returns the outcome (exit code 0 trained, 1 refused,
    130 stopped by Ctrl-C after saving a checkpoint)."""
    check_options(options)
    run = fitted_run(spec_path, say) if options.fit else load_run(spec_path)
    if run is None:
        run = load_run(spec_path)
        say("fit: no configuration fits with the default margin; the spec as written is planned")
    spec = run.spec
    if spec.train is None:
        raise InputError("train", "missing: `oomless train` needs a train section (data, rewards); see examples/tiny-arith.yaml")
    refuse_a_used_folder(options.output_dir or Path(spec.train.output_dir), options.resume, options.overwrite)
    plan = make_plan(spec, run.arch, run.gpu, run.archs)
    spec = plan.spec  # with the defaults the planner chose (planner.defaults), so the run is the one planned
    for warning in run.warnings:
        say(f"warning: {warning}")
    for note in plan.notes:
        say(f"note: {note}")
    if not plan.fits:
        for line in _violation_lines(plan):
            say(f"does not fit: {line}")
        if not options.force:
            say("refused: the plan does not fit (--force trains anyway, --fit searches a configuration that fits)")
            return TrainOutcome(EXIT_DOES_NOT_FIT, plan)
        say("warning: --force: training a run whose plan does not fit")
    from .devices import detect_machine

    machine = detect_machine()
    refusals = S.refusals(spec, machine)
    if refusals:
        field_name, _, message = refusals[0].partition(": ")
        raise InputError(field_name, message)
    S.batch_layout(spec)  # batch shape errors before anything is built
    notes = S.notes(spec, machine)
    for note in notes:
        say(f"note: {note}")
    train_section = spec.train
    out_dir = options.output_dir or Path(train_section.output_dir)
    max_steps = options.max_steps or train_section.max_steps
    if training_gpus(spec) > 1:
        written = write_launch_files(spec, out_dir / "launch")
        say(f"launch files for {training_gpus(spec)} training GPUs: {', '.join(str(p) for p in written)} "
            "(start with `accelerate launch --config_file launch/accelerate.yaml -m oomless train SPEC` on the GPU machines)")
        if machine.device == "cpu":
            notes.append("multi-GPU spec trained in one CPU process here; launch files generated only")
    checkpoint = prepare_output(out_dir, options.resume, say, options.overwrite)
    from .session import SessionOptions, run_session

    session = SessionOptions(max_steps, checkpoint, options.progress, options.report_to)
    outcome = run_session(spec, plan, spec_path.resolve().parent, out_dir, session, machine, say)
    return replace(outcome, notes=notes + outcome.notes)


def summary_document(outcome: TrainOutcome) -> dict[str, Any]:
    return {
        "exit_code": outcome.exit_code,
        "interrupted_at_step": outcome.interrupted_at_step,
        "seconds": round(outcome.seconds, 2),
        "plan_vs_actual": outcome.rows,
        "reward_curve": outcome.curve,
        "oom_events": outcome.events,
        "notes": outcome.notes,
    }


def finish(outcome: TrainOutcome, hooks_rewards: list[dict[str, Any]], summaries: dict[str, Any]) -> TrainOutcome:
    outcome.rows = plan_vs_actual_rows(summaries)
    outcome.rewards = hooks_rewards
    outcome.curve = reward_curve(hooks_rewards)
    return outcome


def write_summary(outcome: TrainOutcome) -> None:
    assert outcome.output_dir is not None
    write_text(outcome.output_dir / SUMMARY_FILE, json.dumps(summary_document(outcome), indent=2))


__all__ = ["TrainOptions", "TrainOutcome", "train", "summary_document", "EXIT_FITS", "EXIT_INTERRUPTED"]
