"""The first optimizer step of the spec's optimizer and precision, with memory filed by category.

States are created lazily by the first step (torch and bitsandbytes optimizers), so the traced
step is the first one. Mixed precision follows DeepSpeed's ZeRO-1/2 optimizer (on one GPU):
fp32 master weights exist from start-up (OPT); at the step the 16-bit gradients are copied to
fp32 (GRAD, "4 fp32 grads" of DeepSpeed's 18 B/param), AdamW updates the masters, the masters
are copied back into the 16-bit weights, and both gradients are dropped
(`zero_grad(set_to_none=True)`). Source: deepspeed/runtime/zero/stage_1_and_2.py (`step`),
`memory/states.py`. Pure bf16 steps AdamW on the bf16 weights (states in bf16).

- adamw: `torch.optim.AdamW` run as the setup's `optimizer_implementation` says: the per-tensor
  loop (also for DeepSpeed's FusedAdam, which keeps no step-wide temporaries), `foreach` (one
  temporary per stepped parameter, all alive at once: the plan's `optimizer.step_temporaries`)
  or `fused`.
- adamw_8bit: bitsandbytes' states are allocated as bitsandbytes allocates them (uint8 m and v,
  one fp32 absmax per 2048 values; tensors under 4096 values keep fp32 states,
  `min_8bit_size`); the quantised update itself is not run.
- adafactor: transformers' default (beta1=None) factored second moment: fp32 row and column
  vectors per matrix, a full vector otherwise; the update is not run.
- sgd: no state.

Known limitations: the scalar `step` tensors of torch's AdamW live on the host and are not
counted; temporaries of the emulated optimizers' updates are not traced.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..memory.components import Category
from ..memory.constants import ADAM_8BIT_BLOCK_SIZE
from ..spec.run import Optimizer, Precision
from .tracker import StorageTracker

BNB_MIN_8BIT_SIZE = 4096
"""bitsandbytes `Optimizer8bit`: tensors with fewer values keep 32-bit states."""
LEARNING_RATE = 1e-6


def _emulated_states(params: list[torch.Tensor], optimizer: Optimizer) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []
    for p in params:
        n = p.numel()
        if optimizer == Optimizer.adamw_8bit and n >= BNB_MIN_8BIT_SIZE:
            blocks = math.ceil(n / ADAM_8BIT_BLOCK_SIZE)
            out += [torch.zeros_like(p, dtype=torch.uint8) for _ in range(2)]
            out += [torch.zeros(blocks, dtype=torch.float32, device=p.device) for _ in range(2)]
        elif optimizer == Optimizer.adamw_8bit:
            out += [torch.zeros_like(p, dtype=torch.float32) for _ in range(2)]
        elif optimizer == Optimizer.adafactor and p.dim() >= 2:
            out.append(torch.zeros(p.shape[:-1], dtype=torch.float32, device=p.device))
            out.append(torch.zeros(p.shape[:-2] + p.shape[-1:], dtype=torch.float32, device=p.device))
        elif optimizer == Optimizer.adafactor:
            out.append(torch.zeros_like(p, dtype=torch.float32))
    return out


class OptimizerStep:
    """Call `setup()` before the traced step (master weights) and `step()` after backward."""

    def __init__(self, model: torch.nn.Module, optimizer: Optimizer, precision: Precision, tracker: StorageTracker,
                 implementation: str = "for_loop") -> None:
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer, self.precision, self.tracker = optimizer, precision, tracker
        self.implementation = implementation
        self.masters: list[torch.Tensor] = []
        self.states: list[torch.Tensor] = []

    @property
    def mixed(self) -> bool:
        return self.precision != Precision.bf16

    def setup(self) -> None:
        if self.mixed:
            self.masters = [p.detach().float() for p in self.params]
            for m in self.masters:
                self.tracker.register(m, Category.OPT, "master_weights")

    def step(self) -> None:
        targets = self.masters if self.mixed else self.params
        if self.mixed:
            for p, m in zip(self.params, self.masters):
                m.grad = p.grad.float() if p.grad is not None else None
                if m.grad is not None:
                    self.tracker.register(m.grad, Category.GRAD, "fp32_grads")
        if self.optimizer == Optimizer.adamw:
            foreach, fused = self.implementation == "foreach", self.implementation == "fused"
            self._torch_step(targets, lambda ps: torch.optim.AdamW(ps, lr=LEARNING_RATE, foreach=foreach, fused=fused))
        elif self.optimizer == Optimizer.sgd:
            self._torch_step(targets, lambda ps: torch.optim.SGD(ps, lr=LEARNING_RATE))
        else:
            self.states = _emulated_states(targets, self.optimizer)
            for s in self.states:
                self.tracker.register(s, Category.OPT, "optimizer_states")
        if self.mixed:
            with torch.no_grad():
                for p, m in zip(self.params, self.masters):
                    p.copy_(m)
                    m.grad = None
        for p in self.params:
            p.grad = None

    def _torch_step(self, targets: list[torch.Tensor], make: Callable[[list[torch.Tensor]], torch.optim.Optimizer]) -> None:
        opt = make(targets)
        opt.step()
        for state in opt.state.values():
            for name, value in state.items():
                if not isinstance(value, torch.Tensor):
                    continue
                if name == "step" and value.dim() == 0:
                    self.tracker.forget(value)
                else:
                    self.tracker.register(value, Category.OPT, "optimizer_states")
                    self.states.append(value)
