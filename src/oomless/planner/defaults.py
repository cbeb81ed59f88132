"""Defaults the planner chooses for the run instead of taking a fixed value.

`rollout.gpu_memory_utilization` left unset with vLLM colocated: vLLM's own default (0.9 of the
GPU) leaves a trainer on the same GPU almost nothing, so a spec that does not say is planned at
the largest utilization with which the run fits beside the trainer, keeping the margin `fit`
keeps (`DEFAULT_MARGIN_FRACTION`), and the plan says which (`Plan.notes`). Framework adapters
always set the field (each framework's own default), so only hand-written specs are affected.

Search: utilization in steps of `UTILIZATION_STEP` up to vLLM's default. Raising it never
lowers a phase peak or the start-up requirement and never shrinks the KV cache, so "everything
but the KV-cache check fits" is true up to some value and false above, and "the KV cache holds
one sequence" is false up to some value and true above; each boundary is found by bisection.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..spec.run import RolloutEngine, RunSpec

if TYPE_CHECKING:
    from .plan import Constraint, Plan

VLLM_DEFAULT_UTILIZATION = 0.9
"""vLLM's default `gpu_memory_utilization` (vllm/engine/arg_utils.py `EngineArgs`, 0.9 since v0.2)."""
DEFAULT_MARGIN_FRACTION = 0.05
"""Headroom kept on every constraint by a chosen default, as a fraction of the device's capacity
(the same margin `oomless fit` keeps by default)."""
UTILIZATION_STEP = 0.01
"""Resolution of a chosen utilization (vLLM takes any float in (0, 1])."""
NUM_STEPS = round(VLLM_DEFAULT_UTILIZATION / UTILIZATION_STEP)


def utilization_unset(spec: RunSpec) -> bool:
    """vLLM shares the trainer's GPUs and the spec does not say how much of them it takes."""
    return spec.rollout.engine == RolloutEngine.vllm_colocate and not spec.rollout.utilization_given


def _is_kv_check(c: Constraint) -> bool:
    return c.component == "vllm.kv_cache" and c.message.startswith("vLLM KV cache must hold")


def room_for_trainer(plan: Plan, fraction: float) -> bool:
    """Every constraint but the KV-cache check keeps ``fraction`` of its device free."""
    for c in plan.constraints:
        if _is_kv_check(c):
            continue
        capacity = plan.shape.capacity_bytes if c.device == "gpu" else (plan.host.limit_bytes or c.available_bytes)
        if c.margin_bytes < int(fraction * capacity):
            return False
    return True


def kv_holds_a_sequence(plan: Plan) -> bool:
    return all(c.ok for c in plan.constraints if _is_kv_check(c))


def last_true(test: Callable[[int], bool], low: int, high: int) -> int | None:
    """Largest k in [low, high] with test(k), for a test true up to some k and false above."""
    if not test(low):
        return None
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if test(mid) else (low, mid - 1)
    return low


def _first_true(test: Callable[[int], bool], low: int, high: int) -> int | None:
    """Smallest k in [low, high] with test(k), for a test false up to some k and true above."""
    if not test(high):
        return None
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if test(mid) else (mid + 1, high)
    return low


def choose_utilization(spec: RunSpec, plan_of: Callable[[RunSpec], Plan],
                       typical_of: Callable[[RunSpec], Plan | None] = lambda s: None) -> tuple[RunSpec, str]:
    """The spec with a utilization set, and the note that says how it was chosen: the largest
    with which the worst batch fits (with the margin, else without); when none does, the
    largest with which a typical batch does (the plan then weighs the chance of the worst);
    else the smallest whose KV cache holds one sequence, leaving the trainer the most room."""
    cache: dict[int, Plan] = {}
    typical: dict[int, Plan | None] = {}

    def plan_at(k: int) -> Plan:
        if k not in cache:
            cache[k] = plan_of(_with(spec, k))
        return cache[k]

    def typical_fits(k: int) -> bool:
        if k not in typical:
            typical[k] = typical_of(_with(spec, k))
        plan = typical[k]
        return plan is not None and room_for_trainer(plan, DEFAULT_MARGIN_FRACTION)

    field = "rollout.gpu_memory_utilization not set"
    for fraction, how in ((DEFAULT_MARGIN_FRACTION, f"with a {DEFAULT_MARGIN_FRACTION:.0%} margin"),
                          (0.0, f"without the {DEFAULT_MARGIN_FRACTION:.0%} margin")):
        k = last_true(lambda k, f=fraction: room_for_trainer(plan_at(k), f), 1, NUM_STEPS)
        if k is not None and kv_holds_a_sequence(plan_at(k)):
            return _with(spec, k), f"{field}: chose {_u(k)}, the largest that fits beside the trainer {how}"
    k = last_true(typical_fits, 1, NUM_STEPS)
    if k is not None and kv_holds_a_sequence(plan_at(k)):
        return _with(spec, k), (f"{field}: chose {_u(k)}, the largest with which a typical batch fits beside the trainer "
                                f"with a {DEFAULT_MARGIN_FRACTION:.0%} margin (the longest batch fits at none)")
    k = _first_true(lambda k: kv_holds_a_sequence(plan_at(k)), 1, NUM_STEPS)
    if k is None:
        return _with(spec, NUM_STEPS), (f"{field}: even vLLM's default {VLLM_DEFAULT_UTILIZATION} leaves no KV cache "
                                        "for one sequence; planned at the default")
    return _with(spec, k), (f"{field}: no utilization fits beside the trainer; planned at {_u(k)}, the smallest "
                            "whose KV cache holds one sequence")


def _u(k: int) -> float:
    return round(k * UTILIZATION_STEP, 2)


def _with(spec: RunSpec, k: int) -> RunSpec:
    return spec.model_copy(update={"rollout": spec.rollout.model_copy(update={"gpu_memory_utilization": _u(k)})})


def resolve_defaults(spec: RunSpec, plan_of: Callable[[RunSpec], Plan],
                     typical_of: Callable[[RunSpec], Plan | None] = lambda s: None) -> tuple[RunSpec, tuple[str, ...]]:
    """The spec with every planner-chosen default set, and one note per choice. ``plan_of``
    plans a spec's worst batch, ``typical_of`` its typical batch (None when the same)."""
    if not utilization_unset(spec):
        return spec, ()
    spec, note = choose_utilization(spec, plan_of, typical_of)
    return spec, (note,)
