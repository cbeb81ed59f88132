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


def measure(families: list[str]) -> dict[str, Any]:
    from oomless.trace.calibrate import PROBE, PROBE_CONFIGS, measure_coefficients

    out = {}
    for family in families:
        started = time.perf_counter()
        coefficients = measure_coefficients(PROBE_CONFIGS[family])
        out[family] = {"probe_config": PROBE_CONFIGS[family], "probe_step": PROBE, "coefficients": coefficients}
        print(f"{family:12s} {coefficients} ({time.perf_counter() - started:.1f} s)", flush=True)
    return out


def points(families: list[str], quick: bool) -> list[dict[str, Any]]:
    from oomless.catalog.models import load_model
    from oomless.spec.run import AttentionImpl
    from oomless.trace.calibrate import agreement, attention_for
    from oomless.trace.model import raw_config
    from oomless.trace.result import TraceSetup

    shapes = SHAPES[:1] if quick else SHAPES
    runs: list[tuple[str, str, str, bool, str, tuple[int, int, int]]] = []
    for family in families:
        for model in MODELS[family]:
            arch = load_model(model)
            attention = attention_for(arch, AttentionImpl.sdpa).value
            runs += [(family, model, attention, gc, "full_bf16", shape) for shape in shapes for gc in (True, False)]
    if "qwen2" in families:
        first = MODELS["qwen2"][0]
        runs += [("qwen2", m, att, gc, "full_bf16", SHAPES[0]) for m, att in EXTRA for gc in (True, False)]
        runs += [("qwen2", first, "sdpa", gc, mode, SHAPES[0]) for mode in LOGITS_MODES for gc in (True, False)]
    out = []
    for family, model, attention, gc, mode, (b, p, c) in runs:
        arch = load_model(model)
        setup = TraceSetup(model=model, model_type=arch.text_model_type, num_sequences=b, logprob_sequences=b,
                           prompt_len=p, completion_len=c, attention=attention, checkpointing=gc, logits=mode,
                           optimizer="adamw", precision="bf16_mixed", kl_beta=0.04)
        point = agreement(raw_config(arch), setup, arch)
        out.append({"family": family, **point.to_dict()})
        print(f"{model:38s} {attention:17s} {'gc' if gc else 'no':2s} {mode:9s} b={b} p={p:5d} c={c:4d} "
              f"traced {point.traced_bytes / 2**20:9.1f} MiB  plan {point.predicted_bytes / 2**20:9.1f} MiB  "
              f"{100 * point.relative_difference:+6.2f} %  ({point.trace.seconds:.1f} s)", flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="one shape per family")
    parser.add_argument("--families", default=",".join(MODELS), help="comma-separated families")
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
