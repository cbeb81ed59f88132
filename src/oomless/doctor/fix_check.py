"""Each realised fix applied to the crashed run's spec and planned: its predicted GPU peak, the
room it keeps, and whether it fits with the margin (the usual 5 % of each device, or the gap
the crash measured if larger). A fix that lowers a safety setting the run had (`fit.safety`)
must keep the gap free on top of the margin. Uses `oomless.fit` (optional, imported lazily).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from .fixes import Fix, _get

UTILIZATION_STEP = 0.05
"""vLLM utilization is lowered or raised in steps of 0.05 (the grid `fit` searches)."""


@dataclass(frozen=True)
class CheckedFix:
    fix: Fix
    overrides: dict[str, Any]
    peak_bytes: int
    capacity_bytes: int
    free_bytes: int
    """Room of the tightest constraint beyond the required margin (negative: short by that)."""
    lowers: tuple[str, ...] = ()
    spec: Any = None
    """The run spec with the fix applied."""
    native: tuple[str, ...] = ()
    """The change in the framework's own keys (filled by the CLI for `--from` runs)."""

    @property
    def fits(self) -> bool:
        return self.free_bytes >= 0


def _candidates(fix: Fix, spec: Any) -> list[dict[str, Any]]:
    """Override sets realising ``fix``, mildest first; [] when it has no number to plan."""
    current = _get(spec, fix.knob)
    if fix.op == "set":
        return [{fix.knob: fix.target, **{k: v for k, v in fix.also if _get(spec, k) != v}}]
    if fix.op == "halve" and isinstance(current, int) and current > 1:
        out = {fix.knob: max(1, current // 2)}
        if fix.knob == "batch.micro_batch_size":
            out["batch.gradient_accumulation_steps"] = spec.batch.gradient_accumulation_steps * 2
        return [out]
    if fix.op == "double" and isinstance(current, int):
        return [{fix.knob: current * 2}]
    if fix.op in ("lower", "raise") and fix.target is not None:
        return [{fix.knob: fix.target}]
    if fix.knob == "rollout.gpu_memory_utilization" and isinstance(current, float):
        steps = round(current / UTILIZATION_STEP)
        values = ([round(UTILIZATION_STEP * k, 2) for k in range(steps - 1, 1, -1)] if fix.op == "lower"
                  else [round(UTILIZATION_STEP * k, 2) for k in range(steps + 1, 20)])
        return [{fix.knob: v} for v in values]
    return []


def check_fixes(fixes: tuple[Fix, ...], run: Any, gap_bytes: int) -> tuple[CheckedFix, ...] | None:
    """Every fix that can be planned, with its numbers (None when `oomless.fit` is missing).
    A utilization fix takes the first value of its direction that fits."""
    try:
        from ..fit.probe import slack_vector
        from ..fit.safety import lowered_settings
        from ..fit.search import FitOptions
        from ..planner.plan import make_plan
    except ImportError:
        return None
    options = FitOptions(margin_bytes=max(0, gap_bytes), keep_safety_of=run.spec)
    out = []
    for fix in fixes:
        best = None
        for overrides in _candidates(fix, run.spec):
            try:
                spec = _validated(run.spec, overrides)
                plan = make_plan(spec, run.arch, run.gpu, run.archs)
            except Exception:  # a combination the planner refuses is no fix
                continue
            lowers = lowered_settings(run.spec, spec)
            margin = options.lowering_margin if lowers else options.effective_margin
            checked = CheckedFix(fix, overrides, max(d.peak_bytes for d in plan.devices),
                                 max(d.capacity_bytes for d in plan.devices), min(slack_vector(plan, margin)), lowers, spec)
            best = checked if best is None or checked.free_bytes > best.free_bytes else best
            if checked.fits:
                best = checked
                break
        if best is not None:
            out.append(replace(best, fix=replace(fix, change=_change(fix, run.spec, best.overrides))))
    return tuple(out)


def _validated(spec: Any, overrides: dict[str, Any]) -> Any:
    """``spec`` with the overrides, validated like a spec file (a refused combination raises)."""
    data = spec.model_dump(mode="json", exclude_unset=True)  # fields the input left out stay left out
    for dotted, value in overrides.items():
        *parents, leaf = dotted.split(".")
        node = data
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = getattr(value, "value", value)
    return type(spec).model_validate(data)


def _change(fix: Fix, spec: Any, overrides: dict[str, Any]) -> str:
    def show(v: Any) -> str:
        return str(v).lower() if isinstance(v, bool) else str(getattr(v, "value", v))

    parts = [f"{k} {show(_get(spec, k))} → {show(v)}" for k, v in overrides.items()]
    return ", ".join(parts).removeprefix(f"{fix.knob} ")
