"""The end of a run in words: plan against measurement per phase, and the reward curve. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..telemetry import is_over_plan
from ..units import format_bytes
from .telemetry import PhaseSummary

PHASE_ORDER = ("load", "rollout", "weight_sync", "logprob", "train", "optimizer")


def plan_vs_actual_rows(summaries: dict[str, PhaseSummary]) -> list[dict[str, Any]]:
    """One row per measured phase, in step order: planned and measured bytes, their ratio."""
    names = [n for n in PHASE_ORDER if n in summaries] + sorted(set(summaries) - set(PHASE_ORDER))
    rows = []
    for name in names:
        s = summaries[name]
        ratio = s.ratio
        rows.append({
            "phase": name,
            "planned_bytes": s.planned_bytes,
            "peak_bytes": s.peak_bytes,
            "ratio": None if ratio is None else round(ratio, 3),
            "over_plan": is_over_plan(s.peak_bytes, s.planned_bytes),
            "num_steps": s.num_steps,
            "num_steps_over_plan": s.num_over_plan,
            "seconds_per_step": round(s.seconds / s.num_steps, 4) if s.num_steps else None,
        })
    return rows


def plan_vs_actual_markdown(rows: Sequence[dict[str, Any]]) -> str:
    lines = [
        "| phase | planned | measured peak | measured / planned | steps over plan | s/step |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        planned = format_bytes(r["planned_bytes"]) if r["planned_bytes"] else "—"
        ratio = f"{r['ratio']:.2f}" if r["ratio"] is not None else "—"
        secs = f"{r['seconds_per_step']:.3f}" if r["seconds_per_step"] is not None else "—"
        lines.append(
            f"| {r['phase']} | {planned} | {format_bytes(r['peak_bytes'])} | {ratio} | "
            f"{r['num_steps_over_plan']}/{r['num_steps']} | {secs} |"
        )
    return "\n".join(lines)


def reward_curve(rewards: Sequence[dict[str, Any]], num_buckets: int = 10) -> list[dict[str, Any]]:
    """Mean reward per equal slice of the rollouts (first slice first)."""
    if not rewards:
        return []
    size = max(1, -(-len(rewards) // num_buckets))
    out = []
    for start in range(0, len(rewards), size):
        part = rewards[start:start + size]
        out.append({
            "steps": f"{part[0]['step']}-{part[-1]['step']}",
            "reward": round(sum(r["reward"] for r in part) / len(part), 4),
            **{f"{k}": round(sum(r["rewards"][k] for r in part) / len(part), 4) for k in part[0]["rewards"]},
        })
    return out


def reward_curve_markdown(curve: Sequence[dict[str, Any]]) -> str:
    if not curve:
        return "(no rollout)"
    keys = list(curve[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(row[k]) for k in keys) + " |" for row in curve]
    return "\n".join(lines)
