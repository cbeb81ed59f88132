"""A dispatch-level tracker of live tensor storages, by category, module and moment.

Every tensor an operator returns is looked up by its untyped storage: a storage is counted once
(views, tied weights and in-place results share it) with the bytes the CUDA caching allocator
would hand out for it (rounded up to 512 B, `constants.CUDA_MIN_BLOCK_BYTES`), and it is
uncounted when Python frees it (a weak reference on the storage). Each storage gets one
category of the planner's vocabulary (`memory.components.Category`) from *when* it was made:

- PARAM / BUFFER: the model's parameters and buffers, registered before the step.
- OTHER: the step's inputs (token ids, masks, reference log-probs, advantages).
- ACT: made in a forward (also a checkpointed layer recomputed during backward).
- TEMP: made in backward outside a recomputation, the LM head's output (the logits) and
  everything the loss makes from them (the planner files logits under TEMP).
- GRAD: a parameter's ``.grad``, re-filed when autograd accumulates it.
- OPT: master weights and optimizer states, re-filed by the optimizer driver.

Source: the design of PyTorch's `torch/distributed/_tools/mem_tracker.py` (2.13): one
`TorchDispatchMode`, per-storage accounting, `ModTracker` for the module hierarchy in
forward, backward and recomputation. It is not used directly because it rounds only storages
whose device is CUDA (ours are fake CPU tensors), files recomputed activations in backward
partly as temporaries, and refuses a second forward of the root module (the log-prob pass).

Known limitations: storages made under `no_dispatch` or resized in place through
`UntypedStorage.resize_` are not seen; reserved-but-free allocator memory (fragmentation),
CUDA context, cuBLAS workspaces and NCCL buffers are not tensors and are not counted.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import torch
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.weak import WeakIdKeyDictionary

from ..memory.components import Category
from ..memory.constants import CUDA_MIN_BLOCK_BYTES

ACTIVATION_CATEGORIES = (Category.ACT, Category.TEMP)
"""What the planner's training-work terms (activations, logits, backward recompute) cover."""
LOGITS_MODULE_SUFFIX = "lm_head"
_CHECKPOINTED = threading.local()
"""How many checkpointed layer forwards are running in this thread (original or recomputed)."""


def _checkpointed_depth() -> int:
    return getattr(_CHECKPOINTED, "depth", 0)


def mark_checkpointed_layers(model: torch.nn.Module) -> None:
    """Wrap the function each checkpointed layer hands to `torch.utils.checkpoint` so the
    tracker knows a recomputation is a forward. transformers >= 5 checkpoints a layer's
    `forward` (not `__call__`), so the layer's own module hooks do not run when it is
    recomputed; the checkpoint call itself is unchanged."""
    for module in model.modules():
        original = getattr(module, "_gradient_checkpointing_func", None)
        if original is None or getattr(original, "_oomless_marked", False):
            continue

        def marked(fn: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            def forward(*a: Any, **k: Any) -> Any:
                _CHECKPOINTED.depth = _checkpointed_depth() + 1
                try:
                    return fn(*a, **k)
                finally:
                    _CHECKPOINTED.depth -= 1
            return _original(forward, *args, **kwargs)

        marked._oomless_marked = True  # type: ignore[attr-defined]
        module._gradient_checkpointing_func = marked


def allocated_bytes(num_bytes: int, block: int = CUDA_MIN_BLOCK_BYTES) -> int:
    """Bytes the CUDA caching allocator hands out for a request (c10 `round_size`)."""
    return math.ceil(num_bytes / block) * block if num_bytes > 0 else 0


@dataclass
class StorageRecord:
    num_bytes: int
    category: Category
    module: str
    region: str
    op: str
    shape: tuple[int, ...]
    dtype: str
    born: int
    died: int | None = None

    def alive_at(self, clock: int) -> bool:
        return self.born <= clock and (self.died is None or self.died > clock)


@dataclass
class Moment:
    """The state of memory at one instant of the traced step."""

    clock: int
    region: str
    module: str
    op: str
    by_category: dict[Category, int]

    @property
    def total_bytes(self) -> int:
        return sum(self.by_category.values())

    @property
    def activation_bytes(self) -> int:
        return sum(self.by_category.get(c, 0) for c in ACTIVATION_CATEGORIES)


@dataclass
class RegionPeaks:
    """Peaks seen while one region of the step ran."""

    total: Moment | None = None
    activation: Moment | None = None


class StorageTracker(TorchDispatchMode):
    """Records every storage the step makes; use as a context manager after `register_*`.

    A storage's category is its final filing, applied from its birth: a parameter's gradient
    is GRAD from the instant the backward operator makes it (before autograd accumulates it
    into ``.grad``), an optimizer state is OPT from the instant the step allocates it. Peaks are
    computed afterwards from the records (`peaks`), so re-filing never leaves a stale count.
    """

    def __init__(self) -> None:
        super().__init__()
        self.records: list[StorageRecord] = []
        self.region = "setup"
        self.clock = 0
        self.marks: dict[str, int] = {}
        self.model: torch.nn.Module | None = None
        self._by_storage: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self._names: dict[int, str] = {}
        self._stack: list[str] = []
        self._module_hooks: list[Any] = []
        self._grad_hooks: list[Any] = []

    # --- registration ---------------------------------------------------------------------

    def register(self, tensor: torch.Tensor, category: Category, name: str = "") -> None:
        """File ``tensor``'s storage under ``category`` (re-filing it if already known)."""
        st = tensor.untyped_storage()
        rec = self._by_storage.get(st)
        if rec is None:
            self._add(st, tensor, category, name or self._context(), op=name or "register")
        else:
            rec.category = category

    def forget(self, tensor: torch.Tensor) -> None:
        """Stop counting ``tensor``'s storage (it lives in host memory on a real GPU run)."""
        rec = self._by_storage.get(tensor.untyped_storage())
        if rec is not None:
            rec.num_bytes = 0

    def register_model(self, model: torch.nn.Module) -> None:
        self._names.update({id(m): name or type(m).__name__ for name, m in model.named_modules()})
        for name, p in model.named_parameters(remove_duplicate=True):
            self.register(p, Category.PARAM, name)
            if p.requires_grad:
                self._grad_hooks.append(p.register_post_accumulate_grad_hook(self._on_grad))
        for name, b in model.named_buffers(remove_duplicate=True):
            self.register(b, Category.BUFFER, name)

    def _on_grad(self, param: torch.Tensor) -> None:
        if param.grad is not None:
            self.register(param.grad, Category.GRAD, "grad")

    def remove_hooks(self) -> None:
        for h in self._grad_hooks:
            h.remove()
        self._grad_hooks.clear()

    # --- regions ----------------------------------------------------------------------------

    def set_region(self, region: str) -> None:
        self.region = region

    def mark(self, name: str) -> None:
        """Remember this instant (e.g. the end of the training forward) by name."""
        self.marks[name] = self.clock

    # --- dispatch ----------------------------------------------------------------------------

    def __enter__(self) -> StorageTracker:
        self._module_hooks = [
            register_module_forward_pre_hook(self._pre_fw),
            register_module_forward_hook(self._post_fw, always_call=True),
        ]
        super().__enter__()
        return self

    def __exit__(self, *args: Any) -> None:
        super().__exit__(*args)
        for h in self._module_hooks:
            h.remove()
        self.remove_hooks()

    def _pre_fw(self, module: torch.nn.Module, args: Any) -> None:
        self._stack.append(self._names.get(id(module), type(module).__name__))

    def _post_fw(self, module: torch.nn.Module, args: Any, out: Any) -> None:
        if self._stack:
            name = self._stack.pop()
            if name.endswith(LOGITS_MODULE_SUFFIX) and isinstance(out, torch.Tensor):
                self.register(out, Category.TEMP)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        op = str(getattr(func, "overloadpacket", func).__name__)
        flat, _ = tree_flatten(out)
        category, context = self._category_now(), self._context()
        for t in flat:
            if isinstance(t, torch.Tensor):
                st = t.untyped_storage()
                if st not in self._by_storage:
                    self._add(st, t, category, context, op)
        return out

    def _in_backward(self) -> bool:
        """Inside an autograd node and not in a forward: a checkpoint recomputation runs the
        layer's forward inside the backward of the node that needs its tensors."""
        return torch._C._current_autograd_node() is not None and not self._stack and not _checkpointed_depth()

    def _category_now(self) -> Category:
        if self.region == "optimizer" or self._in_backward():
            return Category.TEMP
        return Category.TEMP if self.region == "loss" else Category.ACT

    def _context(self) -> str:
        """The innermost running module; in backward, the autograd node being run."""
        if self._in_backward():
            node = torch._C._current_autograd_node()
            return f"backward:{node.name()}" if node is not None else "backward"
        return self._stack[-1] if self._stack else ""

    # --- bookkeeping --------------------------------------------------------------------------

    def _add(self, st: torch.UntypedStorage, t: torch.Tensor, category: Category, module: str, op: str) -> None:
        self.clock += 1
        rec = StorageRecord(
            num_bytes=allocated_bytes(st.nbytes()), category=category, module=module, region=self.region,
            op=op, shape=tuple(t.shape), dtype=str(t.dtype).replace("torch.", ""), born=self.clock,
        )
        self.records.append(rec)
        self._by_storage[st] = rec
        weakref.finalize(st, self._free, rec)

    def _free(self, rec: StorageRecord) -> None:
        self.clock += 1
        rec.died = self.clock

    # --- results ---------------------------------------------------------------------------------

    def timeline(self) -> list[tuple[int, int, StorageRecord]]:
        """Births (+1) and deaths (−1) of every storage, in clock order."""
        events: list[tuple[int, int, StorageRecord]] = []
        for r in self.records:
            events.append((r.born, 1, r))
            if r.died is not None:
                events.append((r.died, -1, r))
        events.sort(key=lambda e: e[0])
        return events

    def peaks(self) -> dict[str, RegionPeaks]:
        """Per region (of the allocation that set it), the moments of the largest live total
        and of the largest ACT + TEMP, replaying births and deaths in clock order."""
        live: dict[Category, int] = dict.fromkeys(Category, 0)
        out: dict[str, RegionPeaks] = defaultdict(RegionPeaks)
        for clock, sign, r in self.timeline():
            live[r.category] += sign * r.num_bytes
            if sign < 0:
                continue
            peaks = out[r.region]
            moment = Moment(clock, r.region, r.module, r.op, live)
            if peaks.total is None or moment.total_bytes > peaks.total.total_bytes:
                peaks.total = Moment(clock, r.region, r.module, r.op, dict(live))
            if peaks.activation is None or moment.activation_bytes > peaks.activation.activation_bytes:
                peaks.activation = Moment(clock, r.region, r.module, r.op, dict(live))
        return dict(out)

    def alive_at(self, clock: int) -> list[StorageRecord]:
        return [r for r in self.records if r.alive_at(clock)]

    def by_module_at(self, clock: int, categories: tuple[Category, ...] = ACTIVATION_CATEGORIES) -> dict[str, int]:
        """Bytes alive at ``clock`` in ``categories``, by the module (or backward node) that made them."""
        out: dict[str, int] = defaultdict(int)
        for r in self.alive_at(clock):
            if r.category in categories and r.num_bytes:
                out[r.module or "<outside modules>"] += r.num_bytes
        return dict(out)
