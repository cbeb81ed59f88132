"""A fit result as a stable JSON-ready document (`oomless fit --json`).

Keys: `found`, `spec`, `margin`, `allowed`, `input` {`fits`, `fits_with_margin`, `binding`,
`predicted_step_seconds`, `gpu_peak_bytes`, `host_peak_bytes`}, `best` and `alternatives`
(configurations: `changes` [{`field`, `from`, `to`}], `num_changes`, `predicted_step_seconds`,
`step_terms`, `min_margin_bytes`, `binding`, `gpu_peak_bytes`, `host_peak_bytes`, `region`,
`lowers_safety`, `changes_training`, `phase_peaks` [{`device`, `phase`, `peak_bytes`,
`capacity_bytes`}], `warnings`, `spec`), `search` {`regions`, `plans`, `configurations`, `evaluated`, `rechecked`,
`math_level`, `seconds`}, `notes`, `estimates`. Sizes are integer bytes; seconds are the cost
model's estimates (null when a configuration cannot generate at all).
"""

from __future__ import annotations

import math
from typing import Any

from .. import __version__
from ..perf.step import StepEstimate
from ..planner.plan import Plan
from ..planner.report import plan_to_dict
from .probe import Margin, slack_vector
from .search import Choice, FitResult

SCHEMA_VERSION = 1
ESTIMATES_NOTE = (
    "predicted_step_seconds are estimates of the throughput cost model (oomless.perf): peak rates "
    "times assumed efficiencies, easily off by a factor of two. fit ranks configurations by them; "
    "every configuration listed was re-planned by make_plan and fits with the margin."
)


def seconds(estimate: StepEstimate) -> float | None:
    total = estimate.total_s
    return None if math.isinf(total) else round(total, 3)


def _peaks(plan: Plan) -> dict[str, Any]:
    doc = plan_to_dict(plan)
    return {"binding": doc["binding"], "gpu_peak_bytes": doc["gpu"]["peak_bytes"], "host_peak_bytes": doc["host"]["peak_bytes"]}


def choice_to_dict(choice: Choice) -> dict[str, Any]:
    return {
        "changes": [{"field": k, "from": old, "to": new} for k, (old, new) in choice.changes.items()],
        "num_changes": len(choice.changes),
        "predicted_step_seconds": seconds(choice.estimate),
        "step_terms": {k: (None if math.isinf(v) else round(v, 3)) for k, v in choice.estimate.terms.items()},
        "min_margin_bytes": choice.min_slack_bytes,
        **_peaks(choice.plan),
        "region": choice.region,
        "lowers_safety": list(choice.lowers_safety),
        "changes_training": list(choice.changes_training),
        "phase_peaks": [{"device": d, "phase": ph, "peak_bytes": peak, "capacity_bytes": cap or None}
                        for d, ph, peak, cap in choice.phase_peaks],
        "warnings": list(choice.run.warnings),
        "spec": choice.data,
    }


def fit_to_dict(result: FitResult, spec_path: str) -> dict[str, Any]:
    stats, margin = result.stats, result.margin
    return {
        "schema_version": SCHEMA_VERSION,
        "oomless_version": __version__,
        "found": result.best is not None,
        "spec": spec_path,
        "margin": _margin(margin),
        "allowed": sorted(result.allowed),
        "input": {
            "fits": result.input_plan.fits,
            "fits_with_margin": min(slack_vector(result.input_plan, margin)) >= 0,
            "predicted_step_seconds": seconds(result.input_estimate),
            **_peaks(result.input_plan),
        },
        "best": choice_to_dict(result.best) if result.best else None,
        "alternatives": [choice_to_dict(c) for c in result.alternatives],
        "search": {
            "regions": stats.regions, "plans": stats.plans, "configurations": stats.counts.space,
            "evaluated": stats.counts.evaluated, "rechecked": stats.rechecked,
            "math_level": stats.math_level, "seconds": round(stats.seconds, 3),
        },
        "notes": list(result.notes),
        "estimates": ESTIMATES_NOTE,
    }


def _margin(margin: Margin) -> dict[str, Any]:
    return {"bytes": max(margin.num_bytes, margin.gap_bytes) or None, "fraction": margin.fraction or None}
