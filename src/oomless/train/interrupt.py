"""Ctrl-C during `oomless train`: finish the step under way, save a checkpoint, stop cleanly.

The first SIGINT (Ctrl-C) or SIGTERM (a scheduler's stop) only asks: at the end of the current
optimizer step the callback sets transformers' `control.should_save` and
`control.should_training_stop`, so the Trainer writes `checkpoint-N` (its usual save, whatever
`save_steps` says) and leaves its loop; `oomless train` then exits with `EXIT_INTERRUPTED`
(130) and `--resume` continues at step N + 1. A second Ctrl-C stops at once
(`KeyboardInterrupt`), without a checkpoint.

Source: transformers 5.24 `Trainer._inner_training_loop` (`on_step_end`, then
`_maybe_log_save_evaluate` saves when `control.should_save`, then the loop breaks on
`control.should_training_stop`).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from transformers import TrainerCallback

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopOnSignal(TrainerCallback):
    """Turns a stop request into a checkpoint and a clean end of training."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say
        self.requested = False
        self.stopped_at_step: int | None = None

    def request(self, signum: int = signal.SIGINT, frame: Any = None) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        self.say(f"{signal.Signals(signum).name}: saving a checkpoint at the end of this step, then stopping "
                 "(Ctrl-C again stops at once, without one)")

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.requested and self.stopped_at_step is None:
            control.should_save = True
            control.should_training_stop = True
            self.stopped_at_step = state.global_step

    @contextmanager
    def installed(self) -> Iterator[StopOnSignal]:
        """The handler in place for the block (only the main thread may set signal handlers)."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {s: signal.signal(s, self.request) for s in STOP_SIGNALS}
        try:
            yield self
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
