"""A drop-in `transformers.TrainerCallback` (TRL, ms-swift, VLM-R1 and any HF-Trainer job):
marks steps and phases, measures each phase's memory, and logs it beside the plan to whatever
`report_to` is set (wandb, TensorBoard, MLflow...).

    from oomless.watch.callback import OomlessMemoryCallback
    trainer = GRPOTrainer(...)
    OomlessMemoryCallback.attach(trainer, spec="run.yaml")   # spec optional
    trainer.train()

`attach` puts the callback first in the trainer's list, so its metrics enter the `logs` dict
before the reporting callbacks read it (`CallbackHandler.call_event` passes one dict to every
callback in order; `Trainer.__init__` puts `report_to`'s callbacks before user `callbacks=`,
so a callback passed that way still marks and measures, but its metrics reach no reporter).
`attach` also wraps the trainer's generation (`_generate_and_score_completions`, TRL and
ms-swift) and loss (`compute_loss`) so the phases rollout and train are told apart.

Phases: rollout (generation, rewards, old/ref log-probs), train (forward/backward), optimizer
(`on_pre_optimizer_step`), save (marked at the end of a step the trainer will save after). Each phase's peak is
`torch.cuda.max_memory_reserved` after a reset at the phase's start on a GPU; on a CPU the
process RSS at the phase's end (psutil). At each `logging_steps` the latest step's figures go
into the log as `oomless/<phase>_peak_gib`, `oomless/<phase>_planned_gib` and
`oomless/<phase>_over_plan` (measured / planned), plus `oomless/host_rss_gib` and
`oomless/step_peak_gib`. Each step and phase is printed to stderr as `[oomless] step N phase P`,
the mark `oomless watch` reads. SIGUSR1 (what `oomless watch --on-risk checkpoint` sends) asks
for a checkpoint at the end of the current step.

Source: transformers 5.x `TrainerCallback` events and `Trainer.__init__`'s callback order;
trl 1.16 `GRPOTrainer._generate_and_score_completions` and `compute_loss`.
"""

from __future__ import annotations

import functools
import signal
import sys
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

GIB = 1024**3
PREFIX = "oomless/"
PHASE_METHODS = {"_generate_and_score_completions": "rollout", "compute_loss": "train"}
"""Trainer methods whose call starts a phase (wrapped by `attach` where the trainer has them)."""


class OomlessMemoryCallback(TrainerCallback):
    def __init__(self, spec: str | Path | None = None, mark_steps: bool = True, handle_sigusr1: bool = True) -> None:
        self.planned = _planned_phases(Path(spec)) if spec is not None else {}
        self.mark_steps = mark_steps
        self.step = 0
        self.phase: str | None = None
        self.phase_peaks: dict[str, int] = {}
        self.latest: dict[str, float] = {}
        self.peak_bytes = 0
        self._save_requested = False
        if handle_sigusr1 and hasattr(signal, "SIGUSR1"):
            try:
                signal.signal(signal.SIGUSR1, self._request_save)
            except ValueError:
                pass  # not the main thread: no handler, the signal keeps its default

    @classmethod
    def attach(cls, trainer: Any, **kwargs: Any) -> OomlessMemoryCallback:
        """Add a callback to ``trainer`` ahead of its reporting callbacks, wrap its phase
        methods; return the callback."""
        callback = cls(**kwargs)
        trainer.callback_handler.callbacks.insert(0, callback)
        for name, phase in PHASE_METHODS.items():
            method = getattr(trainer, name, None)
            if callable(method):
                setattr(trainer, name, _entering(method, callback, phase))
        return callback

    def _request_save(self, signum: int, frame: Any) -> None:
        self._save_requested = True

    def enter(self, phase: str) -> None:
        """Close the current phase (its peak) and start ``phase``."""
        if phase == self.phase:
            return
        self._close_phase()
        self.phase = phase
        if self.mark_steps:
            print(f"[oomless] step {self.step} phase {phase}", file=sys.stderr, flush=True)

    def _close_phase(self) -> None:
        import torch

        if self.phase is not None:
            peak = _peak_bytes()
            self.phase_peaks[self.phase] = max(self.phase_peaks.get(self.phase, 0), peak)
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.step = state.global_step + 1
        self.phase_peaks = {}
        self.phase = None
        self._close_phase()
        if self.mark_steps:
            print(f"[oomless] step {self.step}", file=sys.stderr, flush=True)

    def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.enter("optimizer")

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        import psutil

        self._close_phase()
        self.phase = None
        step_peak = max(self.phase_peaks.values(), default=_peak_bytes())
        self.peak_bytes = max(self.peak_bytes, step_peak)
        self.latest = {f"{PREFIX}step_peak_gib": step_peak / GIB, f"{PREFIX}run_peak_gib": self.peak_bytes / GIB,
                       f"{PREFIX}host_rss_gib": psutil.Process().memory_info().rss / GIB}
        for phase, peak in self.phase_peaks.items():
            self.latest[f"{PREFIX}{phase}_peak_gib"] = peak / GIB
            planned = self.planned.get(phase)
            if planned:
                self.latest[f"{PREFIX}{phase}_planned_gib"] = planned / GIB
                self.latest[f"{PREFIX}{phase}_over_plan"] = peak / planned
        if self.planned:
            self.latest[f"{PREFIX}planned_peak_gib"] = max(self.planned.values()) / GIB
        if self._save_requested:
            self._save_requested = False
            control.should_save = True
        if self.mark_steps and _will_save(args, state, control):
            print(f"[oomless] step {self.step} phase save", file=sys.stderr, flush=True)
        return control

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if logs is not None and self.latest:
            logs.update(self.latest)


def _entering(method: Any, callback: OomlessMemoryCallback, phase: str) -> Any:
    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        callback.enter(phase)
        return method(*args, **kwargs)

    return wrapper


def _will_save(args: Any, state: Any, control: Any) -> bool:
    """Whether the trainer saves a checkpoint after this step (`DefaultFlowCallback`'s rule,
    which runs after this callback)."""
    strategy = getattr(args.save_strategy, "value", args.save_strategy)
    every = getattr(state, "save_steps", 0) or 0  # resolved from args.save_steps (a fraction allowed)
    return bool(control.should_save) or (strategy == "steps" and every >= 1 and state.global_step % int(every) == 0)


def _peak_bytes() -> int:
    """Peak reserved GPU memory since the last reset, or this process's RSS without a GPU."""
    import torch

    if torch.cuda.is_available():
        return int(torch.cuda.max_memory_reserved())
    import psutil

    return int(psutil.Process().memory_info().rss)


def _planned_phases(spec: Path) -> dict[str, int]:
    """The plan's peak per phase on a training GPU (the figures a measured phase is held against)."""
    from ..planner.plan import make_plan
    from ..spec.load import load_run

    run = load_run(spec)
    plan = make_plan(run.spec, run.arch, run.gpu, run.archs)
    group = next((g for g in plan.devices if g.role == "train"), plan.devices[0])
    return {p.name: p.peak_bytes for p in group.phases}
