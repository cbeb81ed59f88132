"""`oomless.trace`: the exact memory of a real training step, on fake tensors.

A Hugging Face model is built from its config.json with fake tensors (no weights, no GPU), one
GRPO step runs through it (log-prob forward, training forward, loss, backward, optimizer step)
and a dispatch-level tracker counts every live tensor storage by category, module and moment.
Attention runs as the GPU kernels allocate it (`attention.py`).

This is the only package besides the trainer that imports torch, and it does so lazily:
importing `oomless` (or this package) does not import torch or transformers. Use
`require_torch()` before importing the submodules.

Modules: `tracker` (the storage tracker), `attention` (GPU-faithful attention), `model`
(config → fake model), `logprobs` (per-token log-prob paths), `optim` (first optimizer step),
`step` (the traced GRPO step), `vision` (a VLM's vision tower in the step), `compare` and
`vision_plan` (the plan's prediction; torch-free), `calibrate` (family coefficients and
agreement), `result` (torch-free result types).
"""

from __future__ import annotations

import importlib.util

from ..errors import InputError

INSTALL_HINT = "pip install 'oomless[trace]'"


class TraceUnavailable(InputError):
    """torch or transformers is missing."""


def require_torch() -> None:
    """Raise `TraceUnavailable` (one line, with the install command) without torch/transformers."""
    missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
    if missing:
        raise TraceUnavailable("", f"oomless trace needs {' and '.join(missing)}: {INSTALL_HINT}")
