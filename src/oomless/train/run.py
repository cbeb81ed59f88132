"""`oomless train SPEC`: plan, refuse what does not fit, then run GRPO on TRL and compare.

Order: read the spec (optionally through `oomless.fit`), plan it, stop unless it fits (or
`force`), check the machine can run it, write multi-GPU launch files, build or find the model,
load data and rewards, train with telemetry, and return the per-phase plan-vs-actual rows and
the reward curve. Files in the output folder: `telemetry.jsonl` (one record per step and
phase), `events.jsonl` (out-of-memory recoveries), `rewards.jsonl`, `checkpoint-N/`, `final/`,
`launch/` (multi-GPU specs), `model/` (a built tiny model), `summary.json`.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from ..errors import EXIT_DOES_NOT_FIT, EXIT_FITS, InputError
from ..planner.plan import Plan, make_plan
from ..spec.load import ResolvedRun, load_run
from ..spec.run import RolloutEngine, RunSpec
from . import settings as S
from .launch import launch_files
from .report import plan_vs_actual_rows, reward_curve

TELEMETRY_FILE, EVENTS_FILE, REWARDS_FILE, SUMMARY_FILE = "telemetry.jsonl", "events.jsonl", "rewards.jsonl", "summary.json"


@dataclass(frozen=True)
class TrainOptions:
    force: bool = False
    fit: bool = False
    output_dir: Path | None = None
    max_steps: int | None = None
    resume: bool = False
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


def prepare_output(out_dir: Path, resume: bool, say: Callable[[str], None] = print) -> Path | None:
    """The checkpoint to resume from (None for a fresh run, whose old records are removed)."""
    from transformers.trainer_utils import get_last_checkpoint

    from .telemetry import keep_records_up_to

    checkpoint = get_last_checkpoint(str(out_dir)) if out_dir.is_dir() else None
    if resume:
        if checkpoint is None:
            raise InputError("--resume", f"no checkpoint-N folder in {out_dir}")
        step = int(Path(checkpoint).name.split("-")[-1])
        for name in (TELEMETRY_FILE, REWARDS_FILE):
            keep_records_up_to(out_dir / name, step)
        return Path(checkpoint)
    for name in (TELEMETRY_FILE, EVENTS_FILE, REWARDS_FILE, SUMMARY_FILE):
        (out_dir / name).unlink(missing_ok=True)
    old_checkpoints = sorted(out_dir.glob("checkpoint-*"))
    if old_checkpoints:
        say(f"note: {out_dir} holds checkpoints of an earlier run; they are replaced (--resume continues from them)")
    for old in old_checkpoints:
        shutil.rmtree(old)
    return None


def train(spec_path: Path, options: TrainOptions, say: Callable[[str], None] = print) -> TrainOutcome:
    """Everything `oomless train` does; returns the outcome (exit code 0 trained, 1 refused)."""
    run = fitted_run(spec_path, say) if options.fit else load_run(spec_path)
    if run is None:
        run = load_run(spec_path)
        say("fit: no configuration fits with the default margin; the spec as written is planned")
    spec = run.spec
    if spec.train is None:
        raise InputError("train", "missing: `oomless train` needs a train section (data, rewards); see examples/tiny-arith.yaml")
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
    checkpoint = prepare_output(out_dir, options.resume, say)
    from .session import run_session

    outcome = run_session(spec, plan, spec_path.resolve().parent, out_dir, max_steps, checkpoint, machine, options.progress, say)
    return replace(outcome, notes=notes + outcome.notes)


def summary_document(outcome: TrainOutcome) -> dict[str, Any]:
    return {
        "exit_code": outcome.exit_code,
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


__all__ = ["TrainOptions", "TrainOutcome", "train", "summary_document", "EXIT_FITS"]
