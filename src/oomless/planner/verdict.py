"""The verdict in words: what breaks first, and each broken constraint as what it compares.

A phase constraint compares a phase's *total* on one GPU with the GPU's capacity, so its
sentence names the total, the capacity and the largest parts, never one component as if it
alone needed the total. No sentence shows a negative quantity: a budget already spent reads
"0 left, short by X" (vLLM's free memory at start-up when what loads first exceeds the GPU).

Pure functions of a `Plan` and its constraints: plain strings, no markup, no printing.
"""

from __future__ import annotations

from .plan import Constraint, PhaseMemory, Plan, _phase_rank
from ..units import format_bytes

NUM_LARGEST_PARTS = 3


def _amount(num_bytes: int) -> str:
    """A size that is never negative on screen: what is not there is 0."""
    return format_bytes(num_bytes) if num_bytes > 0 else "0"


def where(c: Constraint) -> str:
    """`one train GPU`, `one actor+vllm GPU`, `the host (per node)`."""
    return f"one {c.device_role} GPU" if c.device == "gpu" else "the host (per node)"


def outcome(c: Constraint) -> str:
    """`short by X` for a broken constraint, `X to spare` for one that holds."""
    return f"short by {format_bytes(-c.margin_bytes)}" if not c.ok else f"{format_bytes(c.margin_bytes)} to spare"


def phase_of(plan: Plan, c: Constraint) -> PhaseMemory | None:
    """The phase whose total a `phase_peak`/`host_peak` constraint compares."""
    if c.device == "host":
        phases = plan.host.phases
    else:
        phases = next((g.phases for g in plan.devices if g.role == c.device_role), ())
    return next((p for p in phases if p.name == c.phase), None)


def largest_parts(phase: PhaseMemory | None, num: int = NUM_LARGEST_PARTS) -> str:
    if phase is None:
        return ""
    parts = sorted((x for x in phase.components if x.num_bytes > 0), key=lambda x: x.num_bytes, reverse=True)[:num]
    return ", ".join(f"{x.name} {format_bytes(x.num_bytes)}" for x in parts)


def constraint_sentence(plan: Plan, c: Constraint) -> str:
    """One constraint as what it compares, e.g. "train on one train GPU: total 110.91 GiB over
    capacity 94.99 GiB, short by 15.92 GiB; largest parts: vllm.kv_cache 60.21 GiB, ..."."""
    if c.kind == "vllm_startup":
        return (f"{c.phase} on {where(c)}: vLLM start-up asks for {format_bytes(c.required_bytes)} "
                f"(gpu_memory_utilization × total), {_amount(c.available_bytes)} left after what loads "
                f"before it; {outcome(c)}")
    if c.kind == "vllm_kv":
        return (f"{c.phase} on {where(c)}: vLLM KV cache {_amount(c.available_bytes)}, one max_model_len "
                f"sequence needs {format_bytes(c.required_bytes)}; {outcome(c)}")
    if c.kind == "host_steps":
        grows = plan.timeline.terms() if plan.timeline is not None else c.message
        return (f"steps on {where(c)}: at step ~{c.first_step:,} total {format_bytes(c.required_bytes)} over limit "
                f"{format_bytes(c.available_bytes)}, {outcome(c)}; growing: {grows}")
    limit = "limit" if c.device == "host" else "capacity"
    relation = "over" if not c.ok else "within"
    parts = largest_parts(phase_of(plan, c))
    step = f" (from step {c.first_step})" if c.first_step > 1 else ""
    return (f"{c.phase}{step} on {where(c)}: total {format_bytes(c.required_bytes)} {relation} {limit} "
            f"{format_bytes(c.available_bytes)}, {outcome(c)}" + (f"; largest parts: {parts}" if parts else ""))


def in_time_order(plan: Plan, constraints: tuple[Constraint, ...]) -> list[Constraint]:
    """Constraints in the order a run meets them: step, phase, then the plan's own order (vLLM's
    start-up checks before the load peak), as `Plan.binding` orders them."""
    order = {id(c): i for i, c in enumerate(plan.constraints)}
    return sorted(constraints, key=lambda c: (c.first_step, _phase_rank(c.phase), order.get(id(c), 0)))


def headline(plan: Plan) -> str:
    """The verdict's first line, without its label (FITS / DOES NOT FIT): for a plan that does
    not fit, what breaks first in time and by how much; else the tightest constraint."""
    b = plan.binding
    if plan.worst_fits:
        return f"tightest: {constraint_sentence(plan, b)}"
    return f"breaks first: {constraint_sentence(plan, b)}"
