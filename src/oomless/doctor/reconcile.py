"""Compare a diagnosed log with the plan of the same run: what the plan predicts for the phase
and device that failed, against what the log shows (capacity, bytes in use, the request).

The comparison is one of three verdicts: the plan predicted the failure (consistent), the plan
predicted a fit but the log shows more in use (the plan misses bytes: other processes, allocator
fragmentation, or a term the model lacks), or the log gives no numbers to compare.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..units import format_bytes
from .diagnose import Diagnosis
from .findings import Finding, Kind

if TYPE_CHECKING:
    from ..planner.plan import Constraint, DeviceGroup, Plan, PhaseMemory

CAPACITY_TOLERANCE = 0.03
"""Logged and planned GPU capacities further apart than this are different hardware."""


@dataclass(frozen=True)
class Reconciliation:
    device: str
    """"gpu" or "host"."""
    device_role: str | None
    phase: str | None
    predicted_bytes: int | None
    """The plan's peak of that phase on that device (host: RAM per node)."""
    predicted_limit_bytes: int | None
    predicted_fits: bool | None
    logged_capacity_bytes: int | None
    logged_used_bytes: int | None
    """In use when it failed (GPU: capacity − free; host: node RAM used)."""
    logged_demand_bytes: int | None
    """In use plus what was being asked for."""
    top_components: tuple[tuple[str, int], ...]
    verdict: str
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def gap_bytes(self) -> int:
        """What the run used beyond the plan's peak when the plan predicted a fit and the log
        gives the demand (GPU: in use + the request; host: RAM in use); 0 otherwise. Doctor
        hands it to fit as the margin a fix must keep free."""
        if not self.predicted_fits or self.predicted_bytes is None or self.logged_demand_bytes is None:
            return 0
        if self.device == "gpu" and self.logged_capacity_bytes is not None and self.predicted_limit_bytes is not None \
                and abs(self.logged_capacity_bytes - self.predicted_limit_bytes) > CAPACITY_TOLERANCE * self.predicted_limit_bytes:
            return 0
        return max(0, self.logged_demand_bytes - self.predicted_bytes)


def _b(num_bytes: int | None) -> str:
    return "?" if num_bytes is None else format_bytes(num_bytes)


def _group(plan: Plan, phase: str | None) -> DeviceGroup:
    if phase == "rollout":
        for g in plan.devices:
            if g.role == "rollout":
                return g
    return next((g for g in plan.devices if g.role == "train"), plan.devices[0])


def _phase(group: DeviceGroup, name: str | None) -> PhaseMemory | None:
    return next((p for p in group.phases if p.name == name), None)


def _logged_gpu(f: Finding) -> tuple[int | None, int | None, int | None]:
    n = f.numbers
    cap = n.get("capacity_bytes", n.get("total_bytes"))
    free = n.get("free_bytes")
    used = cap - free if cap is not None and free is not None else None
    demand = used + n["requested_bytes"] if used is not None and "requested_bytes" in n and f.kind == Kind.torch_gpu_oom else None
    return cap, used, demand


def _constraint(plan: Plan, component: str) -> Constraint | None:
    return next((c for c in plan.constraints if c.component == component), None)


def reconcile(diagnosis: Diagnosis, plan: Plan) -> Reconciliation | None:
    f = diagnosis.primary
    if f is None:
        return None
    if f.device == "host":
        return _host(f, diagnosis, plan)
    if f.kind == Kind.vllm_startup_free_memory:
        return _engine_check(f, plan, "vllm.gpu_memory_utilization", f.numbers.get("requested_bytes"), f.numbers.get("free_bytes"))
    if f.kind in (Kind.vllm_no_cache_blocks, Kind.vllm_max_seq_len):
        available = f.numbers.get("kv_available_bytes", f.numbers.get("kv_cache_bytes"))
        return _engine_check(f, plan, "vllm.kv_cache", f.numbers.get("kv_needed_bytes"), available)
    return _gpu(f, diagnosis, plan)


def _gpu(f: Finding, diagnosis: Diagnosis, plan: Plan) -> Reconciliation:
    notes = []
    group = _group(plan, diagnosis.phase.phase)
    phase = _phase(group, diagnosis.phase.phase)
    if phase is None:
        phase = max(group.phases, key=lambda p: p.peak_bytes)
        what = "the log does not tell the phase" if diagnosis.phase.phase is None else f"the plan has no {diagnosis.phase.phase} phase"
        notes.append(f"{what}; compared with the plan's largest phase, {phase.name}")
    cap, used, demand = _logged_gpu(f)
    notes += _binding_note(plan, phase.name)
    other_hardware = cap is not None and abs(cap - group.capacity_bytes) > CAPACITY_TOLERANCE * group.capacity_bytes
    fits = phase.peak_bytes <= group.capacity_bytes
    top = tuple(sorted(((c.name, c.num_bytes) for c in phase.components), key=lambda x: -x[1])[:3])
    if other_hardware:
        verdict = (f"Not comparable: the log's GPU has {_b(cap)}, the spec plans for {_b(group.capacity_bytes)} "
                   f"(plan: {phase.name} peaks at {_b(phase.peak_bytes)}); plan a spec of the hardware that crashed.")
    elif not fits:
        verdict = (f"Consistent: the plan predicts {phase.name} needs {_b(phase.peak_bytes)} on a {group.role} GPU, "
                   f"more than its {_b(group.capacity_bytes)}.")
    elif demand is not None:
        verdict = (f"The plan predicts {phase.name} fits ({_b(phase.peak_bytes)} of {_b(group.capacity_bytes)}), but the log "
                   f"shows {_b(demand)} wanted at the failure: the plan misses about {_b(demand - phase.peak_bytes)} "
                   "(other processes on the GPU, fragmentation, or a term the model lacks).")
    else:
        verdict = (f"The plan predicts {phase.name} fits ({_b(phase.peak_bytes)} of {_b(group.capacity_bytes)}); the log "
                   "says it did not, without numbers to say by how much.")
    return Reconciliation("gpu", group.role, phase.name, phase.peak_bytes, group.capacity_bytes, fits, cap, used, demand,
                          top, verdict, tuple(notes))


def _binding_note(plan: Plan, phase: str) -> list[str]:
    """The plan's first failure, when it comes before the phase the log failed in."""
    from ..planner.plan import PHASE_ORDER

    if plan.fits:
        return []
    b = plan.binding
    if phase in PHASE_ORDER and b.phase in PHASE_ORDER and PHASE_ORDER.index(b.phase) < PHASE_ORDER.index(phase):
        return [f"the plan expects the run to fail earlier, at {b.phase} on the {b.device_role} {b.device} ({b.message})"]
    return []


def _engine_check(f: Finding, plan: Plan, component: str, logged_required: int | None, logged_available: int | None) -> Reconciliation:
    c = _constraint(plan, component)
    cap = f.numbers.get("total_bytes", f.numbers.get("total_gpu_memory_bytes"))
    if c is None:
        return Reconciliation("gpu", None, "load", None, None, None, cap, None, logged_required,
                              (), "The plan has no vLLM engine to compare with (rollout.engine is hf).")
    if c.ok:
        verdict = (f"The plan predicts vLLM's check passes ({_b(c.required_bytes)} needed, {_b(c.available_bytes)} available); "
                   f"the log shows {_b(logged_required)} needed and {_b(logged_available)} available.")
    else:
        verdict = (f"Consistent: the plan predicts vLLM's check fails ({_b(c.required_bytes)} needed, "
                   f"{_b(c.available_bytes)} available); the log shows {_b(logged_required)} and {_b(logged_available)}.")
    used = cap - logged_available if cap is not None and logged_available is not None and component.endswith("utilization") else None
    return Reconciliation("gpu", c.device_role, "load", c.required_bytes, c.available_bytes, c.ok, cap, used,
                          logged_required, ((component, c.required_bytes),), verdict)


def _host(f: Finding, diagnosis: Diagnosis, plan: Plan) -> Reconciliation:
    n = f.numbers
    name = diagnosis.phase.phase
    phase = next((p for p in plan.host.phases if p.name == name), None) or plan.host.peak_phase
    limit = plan.host.limit_bytes
    fits = None if limit is None else phase.peak_bytes <= limit
    total, used = n.get("node_total_bytes"), n.get("node_used_bytes", n.get("anon_rss_bytes"))
    demand = used if f.kind != Kind.host_alloc_oom else n.get("requested_bytes")
    notes = []
    if total is not None and plan.host.capacity_bytes is not None and abs(total - plan.host.capacity_bytes) > CAPACITY_TOLERANCE * plan.host.capacity_bytes:
        notes.append(f"the log's node has {_b(total)} of RAM, the spec says {_b(plan.host.capacity_bytes)}")
    timeline = plan.timeline
    top = tuple(sorted(((c.name, c.num_bytes) for c in phase.components), key=lambda x: -x[1])[:3])
    if limit is not None and fits and timeline is not None and timeline.crossing_step is not None:
        step = timeline.crossing_step
        at = timeline.host_bytes_at(step)
        verdict = (f"Consistent: the plan's phases fit ({_b(phase.peak_bytes)} per node in {phase.name}), but host RAM grows "
                   f"over the steps and crosses the {_b(limit)} limit at step ~{step} ({_b(at)}): {timeline.terms()}; the log "
                   f"shows {_b(used)} in use.")
        return Reconciliation("host", "node", "steps", at, limit, False, total, used, demand,
                              ((timeline.growth[0].name, timeline.growth_bytes_per_step),) if timeline.growth else top,
                              verdict, tuple(notes))
    if limit is None:
        verdict = f"The plan predicts {_b(phase.peak_bytes)} of host RAM per node ({phase.name}); give hardware.host_ram_gib to judge it."
    elif not fits:
        verdict = f"Consistent: the plan predicts {_b(phase.peak_bytes)} of host RAM per node in {phase.name}, above the {_b(limit)} limit."
    else:
        verdict = (f"The plan predicts {_b(phase.peak_bytes)} of host RAM per node in {phase.name}, within {_b(limit)}; the log "
                   f"shows {_b(used)} in use: the plan misses host memory (dataloaders, caches, leaks) the model does not count.")
    return Reconciliation("host", "node", phase.name, phase.peak_bytes, limit, fits, total, used, demand, top, verdict, tuple(notes))
