"""A drop-in `transformers.TrainerCallback` (TRL, ms-swift, VLM-R1 and any HF-Trainer job):
measures each step's memory, logs it beside the plan to whatever `report_to` is set, and marks
steps for `oomless watch`.

    from oomless.watch.callback import OomlessMemoryCallback
    trainer = GRPOTrainer(..., callbacks=[OomlessMemoryCallback(spec="run.yaml")])
    # or, to put the metrics into the same log call as the trainer's own (before the
    # reporting callbacks read it):  OomlessMemoryCallback.attach(trainer, spec="run.yaml")

Per step it records the peak GPU memory reserved by PyTorch (`torch.cuda.max_memory_reserved`,
reset at each step's start) or, on a CPU run, the process RSS; the host RSS; and, with a spec,
the plan's peak for the training GPU. At each `logging_steps` the latest figures go into the
trainer's log dict under `oomless/…` keys (GiB), which the HF reporting callbacks (wandb,
TensorBoard, MLflow…) send on: the callback must come before them in the callback list,
which `attach` ensures. Each step also prints `[oomless] step N` to stderr, the mark `oomless
watch` reads. SIGUSR1 (what `oomless watch --on-risk checkpoint` sends) asks for a checkpoint
at the end of the current step.

Source: transformers `TrainerCallback` events (`on_step_begin`, `on_step_end`, `on_log`), and
`CallbackHandler.call_event`, which passes one `logs` dict to every callback in order.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

GIB = 1024**3
PREFIX = "oomless/"


class OomlessMemoryCallback(TrainerCallback):
    def __init__(self, spec: str | Path | None = None, mark_steps: bool = True, handle_sigusr1: bool = True) -> None:
        self.planned_bytes = _planned_train_peak(Path(spec)) if spec is not None else None
        self.mark_steps = mark_steps
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
        """Add a callback to ``trainer`` ahead of its reporting callbacks; return it."""
        callback = cls(**kwargs)
        trainer.callback_handler.callbacks.insert(0, callback)
        return callback

    def _request_save(self, signum: int, frame: Any) -> None:
        self._save_requested = True

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        import torch

        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        if self.mark_steps:
            print(f"[oomless] step {state.global_step + 1}", file=sys.stderr, flush=True)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        import psutil
        import torch

        rss = psutil.Process().memory_info().rss
        peak = torch.cuda.max_memory_reserved() if torch.cuda.is_available() else rss
        self.peak_bytes = max(self.peak_bytes, peak)
        self.latest = {f"{PREFIX}step_peak_gib": peak / GIB, f"{PREFIX}host_rss_gib": rss / GIB,
                       f"{PREFIX}run_peak_gib": self.peak_bytes / GIB}
        if self.planned_bytes:
            self.latest[f"{PREFIX}planned_train_gib"] = self.planned_bytes / GIB
            self.latest[f"{PREFIX}peak_over_plan"] = peak / self.planned_bytes
        if self._save_requested:
            self._save_requested = False
            control.should_save = True
        return control

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if logs is not None and self.latest:
            logs.update(self.latest)


def _planned_train_peak(spec: Path) -> int:
    """The plan's largest phase on a training GPU (the figure a step's peak is held against)."""
    from ..planner.plan import make_plan
    from ..spec.load import load_run

    run = load_run(spec)
    plan = make_plan(run.spec, run.arch, run.gpu, run.archs)
    group = next((g for g in plan.devices if g.role == "train"), plan.devices[0])
    return max(p.peak_bytes for p in group.phases)
