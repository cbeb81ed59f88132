"""Calibrate the activation model against traced steps; write the shipped calibration table.

For every architecture family (Qwen2/2.5 and the Qwen2.5-VL text decoder, Qwen3 dense and
MoE, Llama 3, Mistral, Gemma 2, Gemma 3 text) this script

1. measures the family's coefficients (`FamilyCoefficients`) on a traced step of a small
   config of the family (`oomless.trace.calibrate.PROBE_CONFIGS`): bytes a module keeps, or holds
   at its backward peak, per element — each must be an exact integer;
2. writes them to `src/oomless/memory/data/activation_calibration.json`, which the planner
   reads (no torch at planning time);
3. traces the family's real catalog model at several lengths and micro-batch sizes, with and
   without gradient checkpointing, and records the traced training activation peak (ACT + TEMP)
   next to the plan's train-phase prediction (`activations` + `logits`/`backward_recompute`).

The table records machine, versions and every config. The script exits 1 when a point disagrees
by more than the tolerance (2 %). No coefficient is fitted to a point: coefficients come from the
probe configs only, and every point is a prediction.

Usage (from the repository root, with the trace extra installed):
    .venv/bin/python scripts/calibrate_activations.py            # all families, ~10 min on 2 cores
    .venv/bin/python scripts/calibrate_activations.py --quick    # one shape per family
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import warnings
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "oomless" / "memory" / "data" / "activation_calibration.json"
TOLERANCE = 0.02

MODELS: dict[str, list[str]] = {
    "qwen2": ["Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-VL-3B-Instruct"],
    "llama": ["meta-llama/Llama-3.2-1B-Instruct"],
    "mistral": ["mistralai/Mistral-7B-Instruct-v0.3"],
    "qwen3": ["Qwen/Qwen3-0.6B"],
    "qwen3_moe": ["Qwen/Qwen3-30B-A3B"],
    "gemma2": ["google/gemma-2-9b-it"],
    "gemma3_text": ["google/gemma-3-4b-it"],
}
"""Real models traced per family (catalog ids; their config.json ships with oomless)."""
PROBE_ONLY: dict[str, dict[str, Any]] = {
    "phi": {"model_type": "phi", "hidden_size": 128, "intermediate_size": 512, "num_hidden_layers": 3,
            "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 4096, "partial_rotary_factor": 0.5,
            "tie_word_embeddings": False, "max_position_embeddings": 4096, "pad_token_id": None},
    "olmo": {"model_type": "olmo", "hidden_size": 128, "intermediate_size": 384, "num_hidden_layers": 3,
             "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 4096, "pad_token_id": None,
             "eos_token_id": None, "tie_word_embeddings": False, "max_position_embeddings": 4096},
}
"""Families whose real models (Phi-2, OLMo-1) have no config in the catalog: their coefficients
are measured on these probe configs (the family's modeling code and config defaults:
hidden_act, norms) and their points traced at the probe size, at every SHAPES-like step below.
`oomless.trace.calibrate.PROBE_CONFIGS` holds the other families' probes."""
PROBE_ONLY_SHAPES = [(2, 96, 32), (1, 180, 60)]
COEFFICIENTS_ONLY = ["olmo2"]
"""Families whose coefficients the table carries without traced points here (OLMo2's agreement
is traced in tests/trace/test_agreement.py)."""
SHAPES = [(1, 512, 512), (4, 256, 256), (2, 1536, 512)]
"""(micro-batch, prompt tokens, completion tokens) of the traced points."""
EXTRA = [("Qwen/Qwen2.5-0.5B-Instruct", "flash_attention_2"), ("Qwen/Qwen2.5-0.5B-Instruct", "eager")]
LOGITS_MODES = ["full_fp32", "chunked"]
"""Also traced on the first Qwen2 model at the first shape."""


def _environment() -> dict[str, Any]:
    import torch

    versions = {name: metadata.version(name) for name in ("oomless", "transformers")}
    return {
        "machine": {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
                    "python": platform.python_version()},
        "versions": {**versions, "torch": torch.__version__},
    }


def _probe_config(family: str) -> dict[str, Any]:
    from oomless.trace.calibrate import PROBE_CONFIGS

    return PROBE_ONLY.get(family) or PROBE_CONFIGS[family]


def _activation_function_coefficients(config: dict[str, Any]) -> dict[str, int]:
    """The dense MLP's activation function (``config.hidden_act``, transformers `ACT2FN`) traced
    alone on a bf16 [tokens, I] input: bytes per element it keeps besides its input and output
    (`mlp_activation_saved_bytes_per_element`), and the most its backward holds besides those,
    the incoming gradient included (`mlp_activation_backward_peak_bytes_per_element`)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from transformers import AutoConfig
    from transformers.activations import ACT2FN

    from oomless.memory.components import Category
    from oomless.trace.calibrate import NORM_PROBE_TOKENS, _exact
    from oomless.trace.tracker import StorageTracker

    hf = AutoConfig.for_model(**config)
    act, width = ACT2FN[getattr(hf, "hidden_act", None) or hf.hidden_activation], hf.intermediate_size
    with FakeTensorMode():
        tracker = StorageTracker()
        x = torch.randn(NORM_PROBE_TOKENS, width, dtype=torch.bfloat16, requires_grad=True)
        tracker.register(x, Category.OTHER)
        with tracker:
            tracker.set_region("forward")
            y = act(x)
            end_of_forward = tracker.clock
            # y's gradient is made by the graph (like fc2's backward in the layer), so it is
            # counted and freed when its consumer is done; `sum`'s gradient is a free expand
            loss = (y * torch.ones((), dtype=torch.bfloat16)).sum()
            tracker.set_region("backward")
            torch.autograd.grad(loss, x)
        peak_clock = tracker.peaks()["backward"].activation.clock

    def full_size_bytes(clock: int) -> int:  # [tokens, I] tensors only: not the scalars around them
        return sum(r.num_bytes for r in tracker.alive_at(clock)
                   if r.category in (Category.ACT, Category.TEMP) and r.shape == (NORM_PROBE_TOKENS, width))

    elements = NORM_PROBE_TOKENS * width
    alive, peak = full_size_bytes(end_of_forward), full_size_bytes(peak_clock)
    return {"mlp_activation_saved_bytes_per_element": _exact(alive, elements, "activation kept") - 2,
            "mlp_activation_backward_peak_bytes_per_element": _exact(peak - alive, elements, "activation backward")}


def _name_phi_final_norm() -> None:
    """`measure_coefficients` finds the final norm as ``norm`` or ``final_layer_norm``; Phi
    names it ``final_layernorm`` (phi/modeling_phi.py, PhiModel). Give PhiModel the alias."""
    from transformers.models.phi import modeling_phi

    if not hasattr(modeling_phi.PhiModel, "final_layer_norm"):
        modeling_phi.PhiModel.final_layer_norm = property(lambda self: self.final_layernorm)


def measure(families: list[str]) -> dict[str, Any]:
    from oomless.catalog.models import arch_from_config
    from oomless.memory.activation_norms import is_layer_norm
    from oomless.trace.calibrate import PROBE, measure_coefficients

    _name_phi_final_norm()
    out = {}
    for family in families:
        started = time.perf_counter()
        config = _probe_config(family)
        coefficients = measure_coefficients(config)
        # a LayerNorm module's own [.., h] tensors besides its output: the copy it normalises (OLMo-1)
        layer_norm = is_layer_norm(arch_from_config(config, "probe"))
        coefficients["layer_norm_input_copy_bytes_per_element"] = (
            coefficients["norm_saved_bytes_per_element"] if layer_norm else 0)
        coefficients.update(_activation_function_coefficients(config))
        out[family] = {"probe_config": config, "probe_step": PROBE, "coefficients": coefficients}
        print(f"{family:12s} {coefficients} ({time.perf_counter() - started:.1f} s)", flush=True)
    return out


def points(families: list[str], quick: bool) -> list[dict[str, Any]]:
    from oomless.catalog.models import arch_from_config
    from oomless.catalog.resolve import load_model
    from oomless.spec.run import AttentionImpl
    from oomless.trace.calibrate import agreement, attention_for
    from oomless.trace.model import raw_config
    from oomless.trace.result import TraceSetup

    shapes = SHAPES[:1] if quick else SHAPES
    runs: list[tuple[str, str, str, bool, str, tuple[int, int, int]]] = []
    for family in families:
        if family in PROBE_ONLY:
            runs += [(family, f"probe:{family}", att, gc, "full_bf16", shape) for shape in PROBE_ONLY_SHAPES
                     for att in ("sdpa", "flash_attention_2", "eager") for gc in (True, False)]
        for model in MODELS.get(family, []):
            arch = load_model(model)
            attention = attention_for(arch, AttentionImpl.sdpa).value
            runs += [(family, model, attention, gc, "full_bf16", shape) for shape in shapes for gc in (True, False)]
    if "qwen2" in families:
        first = MODELS["qwen2"][0]
        runs += [("qwen2", m, att, gc, "full_bf16", SHAPES[0]) for m, att in EXTRA for gc in (True, False)]
        runs += [("qwen2", first, "sdpa", gc, mode, SHAPES[0]) for mode in LOGITS_MODES for gc in (True, False)]
    out = []
    for family, model, attention, gc, mode, (b, p, c) in runs:
        probe = PROBE_ONLY.get(family) if model.startswith("probe:") else None
        arch = arch_from_config(probe, model) if probe else load_model(model)
        setup = TraceSetup(model=model, model_type=arch.text_model_type, num_sequences=b, logprob_sequences=b,
                           prompt_len=p, completion_len=c, attention=attention, checkpointing=gc, logits=mode,
                           optimizer="adamw", precision="bf16_mixed", kl_beta=0.04)
        point = agreement(probe or raw_config(arch), setup, arch)
        out.append({"family": family, **point.to_dict()})
        print(f"{model:38s} {attention:17s} {'gc' if gc else 'no':2s} {mode:9s} b={b} p={p:5d} c={c:4d} "
              f"traced {point.traced_bytes / 2**20:9.1f} MiB  plan {point.predicted_bytes / 2**20:9.1f} MiB  "
              f"{100 * point.relative_difference:+6.2f} %  ({point.trace.seconds:.1f} s)", flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="one shape per family")
    parser.add_argument("--families", default=",".join([*MODELS, *PROBE_ONLY, *COEFFICIENTS_ONLY]), help="comma-separated families")
    args = parser.parse_args()
    families = args.families.split(",")
    warnings.filterwarnings("ignore", category=FutureWarning)
    from oomless.memory import activation_calibration as AC

    document: dict[str, Any] = {
        "generated_by": "scripts/calibrate_activations.py",
        "generated_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        **_environment(),
        "tolerance": TOLERANCE,
        "quantity": "training activation peak: largest ACT + TEMP of the traced forward/loss/backward vs the "
                    "plan's train-phase activations + max(logits, backward_recompute)",
        "families": measure(families),
    }
    OUT.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    AC.calibration_table.cache_clear()
    AC.family_coefficients.cache_clear()
    document["points"] = points(families, args.quick)
    worst = max(document["points"], key=lambda pt: abs(pt["relative_difference"]))
    document["worst_relative_difference"] = worst["relative_difference"]
    OUT.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    print(f"\nwrote {OUT.relative_to(ROOT)}; worst disagreement {100 * worst['relative_difference']:+.2f} % "
          f"({worst['setup']['model']}, {worst['setup']['attention']}, checkpointing {worst['setup']['checkpointing']})")
    return 0 if abs(worst["relative_difference"]) <= TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())
