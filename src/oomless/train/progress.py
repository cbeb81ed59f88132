"""A progress bar of the run: step, mean reward of the last rollout, measured train peak."""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback

from ..units import format_bytes
from .trainer import RunHooks


class ProgressBar(TrainerCallback):
    def __init__(self, hooks: RunHooks, enabled: bool = True) -> None:
        self.hooks, self.enabled = hooks, enabled
        self.bar: Any = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=state.max_steps, initial=state.global_step, desc="train", unit="step", mininterval=0.5)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.bar is None:
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
