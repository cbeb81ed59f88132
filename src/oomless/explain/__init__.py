"""Where every number of a plan comes from: each component's formula, its inputs filled in,
the result and the source it cites (`oomless explain`, `oomless plan --explain`, the HTML
report's "Where the numbers come from").

The planner keeps bytes per named component and nothing else, so planning stays as fast as it
was; an explanation rebuilds, from the plan, the planner objects of each phase
(`context.py`) and asks a registry keyed by component name (`registry.py`) for the formula.
Each formula is evaluated from its own text; `tests/explain` checks, over the shipped examples
and fuzzed specs, that every value equals the planned bytes and that every name the planner
can emit has an entry with a source.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .formula import Formula, Input

if TYPE_CHECKING:
    from ..planner.plan import Plan


@dataclass(frozen=True)
class Explained:
    device: str
    """"gpu" or "host"."""
    group: str
    """The GPU placement group (`train`, `rollout`, ...) or "node" for host RAM."""
    phase: str
    name: str
    category: str
    num_bytes: int
    formula: Formula | None
    error: str = ""

    @property
    def agrees(self) -> bool:
        """The formula's value is the planned number."""
        return self.formula is not None and self.formula.value == self.num_bytes


def _explain(table: list, ctx: Any, name: str) -> tuple[Formula | None, str]:
    from .registry import find

    fn = find(table, name)
    if fn is None:
        return None, f"no formula registered for {name!r} (a bug in oomless: report it)"
    try:
        return fn(ctx, name), ""
    except Exception as err:  # noqa: BLE001 - one component's explanation failing must not hide the others
        return None, f"{type(err).__name__}: {err}"


def explain_plan(plan: Plan) -> list[Explained]:
    """Every component of every phase of ``plan`` (GPU groups, then host RAM), explained."""
    from . import registry
    from .context import gpu_contexts, host_contexts

    registry.load()
    out = []
    for group, phase, ctx in gpu_contexts(plan):
        for c in ctx.components:
            formula, error = _explain(registry.GPU, ctx, c.name)
            out.append(Explained("gpu", group, phase, c.name, c.category.value, c.num_bytes, formula, error))
    for phase, ctx in host_contexts(plan):
        for c in ctx.components:
            formula, error = _explain(registry.HOST, ctx, c.name)
            out.append(Explained("host", "node", phase, c.name, c.category.value, c.num_bytes, formula, error))
    return out


def select(explained: list[Explained], component: str | None) -> list[Explained]:
    """Entries whose name is ``component`` or starts with it (``vllm`` or ``vllm.`` picks every
    vLLM term); all of them when ``component`` is None."""
    if not component:
        return explained
    return [e for e in explained if e.name.startswith(component)]


def input_to_dict(i: Input) -> dict[str, Any]:
    out: dict[str, Any] = {"symbol": i.symbol, "value": i.value, "meaning": i.meaning}
    if i.source:
        out["source"] = i.source
    if i.code:
        out["code"] = i.code
    if i.formula is not None:
        out["formula"] = formula_to_dict(i.formula)
    return out


def formula_to_dict(f: Formula) -> dict[str, Any]:
    return {"expression": f.expression, "filled": f.filled(), "value": f.value, "inputs": [input_to_dict(i) for i in f.inputs],
            "source": f.source, "code": f.code, **({"note": f.note} if f.note else {})}


def to_dicts(explained: list[Explained]) -> list[dict[str, Any]]:
    return [{"device": e.device, "group": e.group, "phase": e.phase, "name": e.name, "category": e.category,
             "num_bytes": e.num_bytes, "formula": formula_to_dict(e.formula) if e.formula else None,
             **({"error": e.error} if e.error else {})} for e in explained]


def title(plan: Plan) -> str:
    hw = plan.spec.hardware
    gpu = plan.gpu.id if plan.gpu else "custom GPU"
    return (f"Where the numbers come from: {plan.arch.name} on {hw.num_nodes} × {hw.gpus_per_node} {gpu}, "
            f"{plan.spec.algorithm.value}, the worst batch the limits allow (verdict: {plan.verdict})")


def explain_selected(plan: Plan, component: str | None = None) -> list[Explained]:
    """`explain_plan` narrowed to ``component`` (a name or a prefix); an unknown one is an
    `InputError` naming the plan's components."""
    from ..errors import InputError

    explained = explain_plan(plan)
    chosen = select(explained, component)
    if not chosen:
        names = sorted({e.name for e in explained})
        raise InputError("COMPONENT", f"{component!r} is no component (nor prefix of one) of this plan; its components: {', '.join(names)}")
    return chosen


def checks_to_dicts(plan: Plan) -> list[dict[str, Any]]:
    """Every check of ``plan`` with the formulas of what it needs and what it has."""
    from .checks import explain_checks

    return [{"phase": ch.constraint.phase, "device": ch.constraint.device, "device_role": ch.constraint.device_role,
             "message": ch.constraint.message, "required_bytes": ch.constraint.required_bytes,
             "available_bytes": ch.constraint.available_bytes, "required": formula_to_dict(ch.required),
             "available": formula_to_dict(ch.available)} for ch in explain_checks(plan)]
