"""A progress bar of the run: step, mean reward of the last rollout, measured train peak.
Lines said while it runs (warnings, the Ctrl-C notice) are written above it (`tqdm.write`)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from transformers import TrainerCallback

from ..units import format_bytes
from .trainer import RunHooks


class ProgressBar(TrainerCallback):
    def __init__(self, hooks: RunHooks | None = None, enabled: bool = True, fallback: Callable[[str], None] = print) -> None:
        self.hooks, self.enabled, self.fallback = hooks, enabled, fallback
        self.bar: Any = None

    def say(self, line: str) -> None:
        """A line above the bar while it is shown, else through ``fallback``."""
        if self.bar is None:
            self.fallback(line)
            return
        from tqdm.auto import tqdm

        tqdm.write(line, file=sys.stderr)

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=state.max_steps, initial=state.global_step, desc="train", unit="step", mininterval=0.5,
                            file=sys.stderr)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.bar is None or self.hooks is None:
            return
        info = {}
        if self.hooks.rewards:
            info["reward"] = f"{self.hooks.rewards[-1]['reward']:.3f}"
        train = self.hooks.telemetry.summaries.get("train")
        if train is not None:
            info["train_peak"] = format_bytes(train.peak_bytes)
        self.bar.set_postfix(info, refresh=False)
        self.bar.update(state.global_step - self.bar.n)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
