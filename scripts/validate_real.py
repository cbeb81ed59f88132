"""Measure real CPU training steps and compare them with `oomless plan`; write the results.

For a Qwen2-shaped and a Llama-shaped model (random weights, 20–35 M parameters, bf16,
eager attention) this script runs, with and without gradient checkpointing,

- a plain GRPO step (the step `oomless trace` traces, on real tensors), and
- a real `trl.GRPOTrainer` step (`use_vllm=False`, `use_cpu=True`),

each with two micro-batches per optimizer step, measures the largest live tensor bytes of the
second step's forward/loss/backward with the tracer's `StorageTracker` (PARAM + BUFFER + GRAD +
OPT + ACT + TEMP), and compares it with the plan's train phase for the same settings (PARAM +
GRAD + OPT + ACT + TEMP; see `oomless.trace.real_compare`). Tolerances: 3 % for the plain
step, 5 % for the TRL step. Writes `docs/validation/real_steps.json` and the same file to
`benchmarks/results/real-steps.json`; exits 1 when a case is out of tolerance.

Usage (from the repository root, with the train extra installed; ~1 min on 2 cores):
    .venv/bin/python scripts/validate_real.py
    .venv/bin/python scripts/make_validation_doc.py     # then re-render docs/validation.md
"""

from __future__ import annotations

import json
import platform
import sys
from dataclasses import asdict
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "validation" / "real_steps.json"
BENCHMARK_OUT = ROOT / "benchmarks" / "results" / "real-steps.json"
TOLERANCES = {"plain": 0.03, "trl": 0.05}


def compare(setup: Any) -> dict[str, Any]:
    from oomless.trace.real_compare import planned_train_phase, relative_difference
    from oomless.trace.real_steps import measure

    measured = measure(setup)
    planned = planned_train_phase(setup)
    diff = relative_difference(planned.total_bytes, measured.peak_bytes)
    return {
        "setup": asdict(setup),
        "num_parameters": measured.num_parameters,
        "measured_bytes": measured.peak_bytes,
        "measured_by_category": measured.peak_by_category,
        "planned_bytes": planned.total_bytes,
        "planned_by_category": planned.by_category,
        "planned_components": planned.components,
        "relative_difference": round(diff, 5),
        "tolerance": TOLERANCES[setup.kind],
        "seconds": round(measured.seconds, 1),
        "versions": measured.versions,
    }


def main() -> int:
    from oomless.trace.real_steps import NUM_MICRO_BATCHES, validation_cases

    cases = []
    for setup in validation_cases():
        row = compare(setup)
        cases.append(row)
        print(f"{setup.kind:5} {setup.family:6} gc={setup.checkpointing!s:5} planned {row['planned_bytes']:>11,} "
              f"measured {row['measured_bytes']:>11,} ({row['relative_difference']:+.2%})", file=sys.stderr)
    worst = {kind: max((c for c in cases if c["setup"]["kind"] == kind), key=lambda c: abs(c["relative_difference"]))
             ["relative_difference"] for kind in TOLERANCES}
    doc = {
        "generated_by": "scripts/validate_real.py",
        "generated_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
                    "python": platform.python_version()},
        "versions": {"oomless": metadata.version("oomless"), **cases[0]["versions"]},
        "quantity": ("largest live PARAM + BUFFER + GRAD + OPT + ACT + TEMP during forward/loss/backward of the "
                     "second optimizer step vs the plan's train phase PARAM + GRAD + OPT + ACT + TEMP"),
        "step": {"micro_batches_per_step": NUM_MICRO_BATCHES, "precision": "bf16 (pure: bf16 AdamW states)",
                 "attention": "eager", "device": "cpu"},
        "tolerances": TOLERANCES,
        "cases": cases,
        "worst_relative_difference": worst,
    }
    text = json.dumps(doc, indent=2) + "\n"
    for path in (OUT, BENCHMARK_OUT):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    bad = [c for c in cases if abs(c["relative_difference"]) > c["tolerance"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
