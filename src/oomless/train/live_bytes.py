"""Live tensor bytes of a CPU run: a minimal dispatch-level tracker.

Every tensor an operator returns is counted once per untyped storage (views and in-place
results share it) with its `nbytes`, per device type, until Python frees the storage (a weak
reference). Tensors that exist before the tracker starts (the loaded model) are registered
explicitly. The peak since the last `reset_peak` is what a phase reports.

Source: the accounting of PyTorch's `torch/distributed/_tools/mem_tracker.py` (2.13), without
its module hooks and categories (the trainer only needs per-phase totals, cheaply).
`oomless.trace.tracker` is the full tracker (categories, modules, allocator rounding).

Known limitations: storages made outside the dispatcher (`torch.from_numpy`, `torch.load`,
`set_` onto a foreign buffer) are not seen until an operator returns them; bytes are exact
storage sizes with no allocator rounding; the caching allocator's free blocks and the Python
heap are not tensors (process RSS covers them).
"""

from __future__ import annotations

import threading
import weakref
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.weak import WeakIdKeyDictionary


class LiveTensorBytes(TorchDispatchMode):
    """Counts live storage bytes per device type (``"cpu"``, ``"cuda"``) and their peak."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._seen: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self.live: dict[str, int] = defaultdict(int)
        self.peak: dict[str, int] = defaultdict(int)

    def track(self, tensors: Iterable[Any]) -> None:
        """Count tensors made before the tracker started (parameters, buffers, inputs)."""
        for t in tensors:
            if isinstance(t, torch.Tensor):
                self._track(t)

    def _track(self, t: torch.Tensor) -> None:
        try:
            storage = t.untyped_storage()
        except (RuntimeError, NotImplementedError):  # sparse, nested, or storage-less tensors
            return
        if storage in self._seen:
            return
        num_bytes, device = storage.nbytes(), storage.device.type
        if device == "meta":
            return
        with self._lock:
            self._seen[storage] = num_bytes
            self.live[device] += num_bytes
            if self.live[device] > self.peak[device]:
                self.peak[device] = self.live[device]
        weakref.finalize(storage, self._free, device, num_bytes)

    def _free(self, device: str, num_bytes: int) -> None:
        with self._lock:
            self.live[device] -= num_bytes

    def reset_peak(self) -> None:
        with self._lock:
            for device, num_bytes in self.live.items():
                self.peak[device] = num_bytes

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self._track(t)
        return out
