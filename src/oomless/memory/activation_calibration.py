"""Per-family activation coefficients measured by tracing, shipped as data. Pure: no torch.

The activation formulas (`activations.py`, `logits.py`) are derived tensor by tensor from the
Hugging Face Llama/Qwen2 decoder. Some families keep structurally different tensors, which the
formulas take from this table instead of branching on family names:

- Gemma's RMSNorm multiplies in fp32 by ``1 + weight`` before casting back, so it saves the
  fp32 normalised value (4 B/element) where Llama's saves a bf16 cast (2 B/element), plus the
  fp32 ``1 + weight`` vector; its backward keeps other fp32 temporaries.
- Gemma 2 soft-caps attention scores (eager keeps the `tanh` output as well) and the final logits.
- Gemma 3 keeps two rotary tables (local and global layers).
- OLMo-1's LayerNorm normalises an fp32 copy of its input and keeps it.
- Phi-2's MLP activation (`gelu_new`) is a chain of elementwise ops that keeps three tensors.

`scripts/calibrate_activations.py` measures each coefficient on a traced step (bytes a module
keeps, divided by its element count; the script checks each is an exact integer) and writes
`data/activation_calibration.json` with machine, versions and configs, together with every
traced point and the analytic model's agreement with it. A family missing from the table uses
the Llama/Qwen2 derivation below (`LLAMA_STYLE`).

Source: the measurements in `data/activation_calibration.json`; the defaults from
transformers 5.23 `models/llama/modeling_llama.py` (LlamaRMSNorm, eager_attention_forward).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, fields
from importlib import resources
from typing import Any

CALIBRATION_FILE = "activation_calibration.json"


@dataclass(frozen=True)
class FamilyCoefficients:
    norm_saved_bytes_per_element: int = 6
    """What one RMSNorm saves per hidden element besides its output and its per-token inverse
    RMS. Llama: fp32 upcast (4) + bf16 cast of the normalised value (2)."""
    norm_weight_copy_bytes_per_element: int = 0
    """Per norm and per hidden element, once per forward (not per token): Gemma's fp32 ``1 + w``."""
    norm_backward_peak_bytes_per_element: int = 24
    """Bytes per hidden element alive at the peak of one RMSNorm's backward: Llama's fp32
    upcast input, still kept for `pow`'s backward (4), and the five fp32 [.., h] temporaries
    of the autograd chain (mul → to → mul → rsqrt → mean → pow) alive together (20)."""
    eager_score_saved_bytes: int = 6
    """Eager attention, per score: fp32 softmax output (4) + its bf16 cast (2)."""
    final_logit_softcap_bytes_per_logit: int = 0
    """Extra bytes per logit a final-logit soft-cap keeps for backward (Gemma 2: its `tanh`)."""
    rotary_tables: int = 1
    """(cos, sin) pairs the model computes per forward (Gemma 3: local and global)."""
    layer_norm_input_copy_bytes_per_element: int = 0
    """A LayerNorm that normalises a copy of its input keeps that copy (per hidden element)
    instead of the residual-stream input: OLMo-1's ``OlmoLayerNorm`` upcasts to fp32 (4).
    0 for ``native_layer_norm`` on the bf16 input (GPT-NeoX, Phi-2, StarCoder2) and RMSNorm."""
    mlp_activation_saved_bytes_per_element: int = 0
    """Bytes per intermediate element the dense MLP's activation function keeps besides its
    input and output: 0 for one aten op (SiLU, GELU, GELU-tanh); Phi-2's ``gelu_new``, a chain
    of elementwise ops, keeps 0.5·x, the ``tanh`` and 1 + tanh (3 × 2)."""
    mlp_activation_backward_peak_bytes_per_element: int = 4
    """Bytes per intermediate element the activation's backward holds at its peak besides its
    saved tensors: for one aten op its incoming gradient and its input gradient (2 + 2)."""


LLAMA_STYLE = FamilyCoefficients()


@functools.lru_cache(maxsize=1)
def calibration_table() -> dict[str, Any]:
    """The shipped calibration document (empty when the package has none)."""
    path = resources.files("oomless.memory") / "data" / CALIBRATION_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}


@functools.lru_cache(maxsize=None)
def family_coefficients(text_model_type: str) -> FamilyCoefficients:
    """The measured coefficients of ``text_model_type``, or the Llama/Qwen2 derivation."""
    measured = calibration_table().get("families", {}).get(text_model_type, {}).get("coefficients", {})
    known = {f.name for f in fields(FamilyCoefficients)}
    return FamilyCoefficients(**{k: int(v) for k, v in measured.items() if k in known})
