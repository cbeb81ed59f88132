"""A plan as a stable JSON-ready document (`oomless plan --json`).

Stable keys: `fits`, `binding` {`phase`, `device`, `component`, ...}, `margin_bytes`,
`gpu` {`capacity_bytes`, `peak_bytes`, `phases`: [{`name`, `peak_bytes`, `components`}],
`devices`}, `host` {`capacity_bytes`, `limit_bytes`, `peak_bytes`, `components`, `phases`},
`vllm`, `constraints`. All sizes are integer bytes. `gpu`, `host`, `binding` and `constraints`
describe the worst batch the limits allow; `verdict`, `worst_case`, `typical` and `batch_risk`
say how that compares with the batches the run typically sees (`Plan.verdict`).
"""

from __future__ import annotations

from typing import Any

from .. import __version__
from ..memory import params as P
from ..memory import vllm as V
from ..memory.components import Category
from ..spec.run import Role
from .batches import DataLengths, MicroBatch
from .plan import PHASE_ORDER, Constraint, Plan, PhaseMemory
from .risk import ACCEPTED_RUN_FAILURE_PROBABILITY

SCHEMA_VERSION = 1


def _phase(phase: PhaseMemory, role: str | None = None) -> dict[str, Any]:
    by_category: dict[str, int] = {c.value: 0 for c in Category}
    for comp in phase.components:
        by_category[comp.category.value] += comp.num_bytes
    doc: dict[str, Any] = {"name": phase.name}
    if role is not None:
        doc["device_role"] = role
    doc.update(
        peak_bytes=phase.peak_bytes,
        components={c.name: c.num_bytes for c in phase.components},
        categories={k: v for k, v in by_category.items() if v},
    )
    return doc


def _constraint(c: Constraint) -> dict[str, Any]:
    return {
        "phase": c.phase, "device": c.device, "device_role": c.device_role, "component": c.component,
        "required_bytes": c.required_bytes, "available_bytes": c.available_bytes,
        "margin_bytes": c.margin_bytes, "ok": c.ok, "message": c.message, "first_step": c.first_step,
        "kind": c.kind,
    }


def _lengths(x: DataLengths) -> dict[str, Any]:
    return {"prompt_tokens": x.prompt_tokens, "completion_tokens": x.completion_tokens,
            "image_pixels": x.image_pixels, "images_per_prompt": x.images_per_prompt}


def _micro_batch(mb: MicroBatch) -> dict[str, Any]:
    return {"num_rows": mb.num_rows, "row_tokens": mb.row_len, "tokens": mb.num_tokens, "num_sequences": mb.num_sequences,
            "packed": mb.packed, "sequence_parallel_size": mb.sequence_parallel_size}


def _batch(plan: Plan) -> dict[str, Any]:
    """The batch a plan is made for: its lengths and its micro-batches on one GPU."""
    return {
        "fits": plan.worst_fits,
        "lengths": _lengths(plan.shape.lengths),
        "sequence_tokens": plan.shape.seq_len,
        "train_micro_batch": _micro_batch(plan.shape.train_batch),
        "logprob_micro_batch": _micro_batch(plan.shape.logprob_batch),
    }


def _typical(plan: Plan) -> dict[str, Any] | None:
    t = plan.typical
    if t is None:
        return None
    return {
        **_batch(t), "binding": _constraint(t.binding), "gpu_peak_bytes": max(g.peak_bytes for g in t.devices),
        "phases": _worst_phases(t), "violations": [_constraint(c) for c in t.violations],
    }


def _risk(plan: Plan) -> dict[str, Any] | None:
    r = plan.risk
    if r is None:
        return None
    return {
        "sequences_per_step": r.sequences_per_step, "per_step": r.per_step, "steps": r.steps, "per_run": r.per_run,
        "expected_first_failing_step": r.expected_first_failing_step, "accepted": r.accepted,
        "accepted_run_failure_probability": ACCEPTED_RUN_FAILURE_PROBABILITY,
        "fitting_lengths": _lengths(r.fitting_lengths) if r.fitting_lengths else None, "note": r.note,
        "packed_mean_tokens": r.packed_mean_tokens,
    }


def _worst_phases(plan: Plan) -> list[dict[str, Any]]:
    """Per phase name, the device role where it peaks highest."""
    out = []
    for name in PHASE_ORDER:
        candidates = [(p, g.role) for g in plan.devices for p in g.phases if p.name == name]
        if candidates:
            phase, role = max(candidates, key=lambda pr: pr[0].peak_bytes)
            out.append(_phase(phase, role))
    return out


def _vllm(plan: Plan) -> dict[str, Any] | None:
    b = plan.engine
    if b is None:
        return None
    tp = plan.spec.rollout.tensor_parallel_size
    per_token = V.kv_bytes_per_token(plan.arch, tp)
    kv_tokens = max(b.kv_cache_bytes, 0) // per_token
    return {
        "requested_bytes": b.requested_bytes, "weight_bytes": b.weight_bytes,
        "profile_activation_bytes": b.activation_bytes, "non_torch_bytes": b.non_torch_bytes,
        "cuda_graph_bytes": b.cuda_graph_bytes, "kv_cache_bytes": b.kv_cache_bytes,
        "kv_bytes_per_token": per_token, "kv_cache_tokens": kv_tokens,
        "max_model_len": plan.shape.vllm_max_model_len,
        "max_concurrency": round(kv_tokens / plan.shape.vllm_max_model_len, 2),
        "max_num_batched_tokens": plan.shape.vllm_max_num_batched_tokens,
        "max_num_seqs": plan.shape.vllm_max_num_seqs,
    }


def _timeline(plan: Plan) -> dict[str, Any] | None:
    t = plan.timeline
    if t is None:
        return None
    return {
        "horizon_steps": t.horizon_steps, "base_bytes": t.base_bytes, "limit_bytes": t.limit_bytes,
        "growth": [{"name": g.name, "bytes_per_step": g.bytes_per_step, "source": g.source} for g in t.growth],
        "save_every_steps": t.save_every, "save_bytes": t.save_bytes, "crossing_step": t.crossing_step,
        "message": t.message(),
    }


def plan_to_dict(plan: Plan, warnings: tuple[str, ...] = ()) -> dict[str, Any]:
    binding = plan.binding
    host_peak = plan.host.peak_phase
    gpu = plan.gpu
    return {
        "schema_version": SCHEMA_VERSION,
        "oomless_version": __version__,
        "fits": plan.fits,
        "verdict": plan.verdict,
        "worst_case": _batch(plan),
        "typical": _typical(plan),
        "batch_risk": _risk(plan),
        "timeline": _timeline(plan),
        "longest_fitting_prompt_tokens": plan.longest_fitting_prompt_tokens,
        "binding": _constraint(binding),
        "margin_bytes": binding.margin_bytes,
        "violations": [_constraint(c) for c in plan.violations],
        "warnings": list(warnings),
        "notes": list(plan.notes),
        "algorithm": plan.spec.algorithm.value,
        "model": {
            "id": plan.arch.name,
            "num_parameters": P.num_parameters(plan.arch),
            "num_parameters_from_config": P.num_config_parameters(plan.arch),
            "found": plan.arch.checkpoint.where if plan.arch.checkpoint is not None else plan.arch.source,
            "exact_parameter_count_source": (plan.arch.checkpoint.parameter_count_source or None)
            if plan.arch.checkpoint is not None else None,
            "num_trainable_parameters": plan.models[Role.actor].num_trainable,
        },
        "gpu": {
            "name": gpu.id if gpu else None,
            "capacity_bytes": plan.shape.capacity_bytes,
            "capacity_source": "spec" if plan.spec.hardware.gpu_capacity_gib is not None or gpu is None else gpu.capacity_source,
            "peak_bytes": max(g.peak_bytes for g in plan.devices),
            "phases": _worst_phases(plan),
            "devices": [
                {"role": g.role, "roles": [r.value for r in g.roles], "num_gpus_per_node": g.num_gpus_per_node,
                 "peak_bytes": g.peak_bytes,
                 "phases": [_phase(p) for p in g.phases]}
                for g in plan.devices
            ],
        },
        "host": {
            "capacity_bytes": plan.host.capacity_bytes,
            "limit_bytes": plan.host.limit_bytes,
            "peak_bytes": host_peak.peak_bytes,
            "peak_phase": host_peak.name,
            "components": {c.name: c.num_bytes for c in host_peak.components},
            "phases": [_phase(p) for p in plan.host.phases],
        },
        "vllm": _vllm(plan),
        "image_tokens_per_prompt": plan.shape.image_tokens_per_prompt,
        "constraints": [_constraint(c) for c in plan.constraints],
    }
