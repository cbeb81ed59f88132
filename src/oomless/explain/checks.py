"""Formulas of a plan's checks (`Plan.constraints`): what each requires and what is available.

A phase's peak is the sum of its components (each explained in `explain_plan`); a GPU has its
catalog capacity (or the spec's `gpu_capacity_gib`); the host its RAM, under Ray's kill
threshold when Ray runs; vLLM's start-up checks compare its request with the memory free
when it starts, and its KV cache with one `max_model_len` sequence; the step timeline adds
host growth per rollout round and checkpoint saves.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..memory import constants as C
from ..memory import vllm as V
from ..planner import gpu_phases as GP
from ..planner import host_phases as HP
from ..planner import timeline as T
from ..planner.plan import Constraint, Plan
from .context import gpu_contexts
from .formula import Formula, Input, code_ref, constant, doc_source, fn_input


@dataclass(frozen=True)
class CheckExplained:
    constraint: Constraint
    required: Formula
    available: Formula

    @property
    def agrees(self) -> bool:
        return self.required.value == self.constraint.required_bytes and self.available.value == self.constraint.available_bytes


def _symbol(name: str) -> str:
    return name.replace(".", "_").replace("-", "_")


def _peak(components: tuple, where: str) -> Formula:
    inputs = tuple(Input(_symbol(c.name), c.num_bytes, c.name) for c in components)
    return Formula(" + ".join(i.symbol for i in inputs) or "0", inputs,
                   f"the sum of the components resident at the {where} peak (each explained above)", code_ref(Plan))


def _capacity(plan: Plan) -> Formula:
    spec = plan.spec
    if spec.hardware.gpu_capacity_gib is not None or plan.gpu is None:
        return Formula("capacity", (Input("capacity", plan.shape.capacity_bytes, "hardware.gpu_capacity_gib in bytes"),),
                       "the spec (hardware.gpu_capacity_gib)", code_ref(GP.GroupPlanner))
    gpu = plan.gpu
    source = (f"oomless GPU catalog, {gpu.capacity_source} (measured: torch's total memory; reported: quoted once; "
              f"derived: nvidia-smi MiB × the smallest verified torch/nvidia-smi ratio) for {gpu.name}")
    return Formula("capacity", (Input("capacity", gpu.capacity_bytes, f"usable memory of one {gpu.id}"),), source,
                   "oomless/catalog/data/gpus.json")


def _host_limit(plan: Plan) -> Formula:
    spec = plan.spec
    ram = Input("ram", plan.host.capacity_bytes or 0, "hardware.host_ram_gib in bytes")
    if spec.ray.enabled:
        return Formula("floor(ram * threshold)", (ram, Input("threshold", spec.ray.memory_usage_threshold, "ray.memory_usage_threshold")),
                       "Ray's memory monitor kills workers above memory_usage_threshold × RAM (default 0.95)", code_ref(HP.host_limit_bytes))
    return Formula("ram", (ram,), "the kernel's OOM killer acts at the node's RAM", code_ref(HP.host_limit_bytes))


def _engine_checks(plan: Plan, c: Constraint) -> tuple[Formula, Formula]:
    ctx = next(ctx for group, phase, ctx in gpu_contexts(plan) if group == c.device_role and phase == "load")
    planner, budget, shape = ctx.planner, ctx.budget, plan.shape
    assert planner is not None
    tp = plan.spec.rollout.tensor_parallel_size
    if c.component == "vllm.kv_cache":
        required = Formula("ceil(max_model_len / VLLM_BLOCK_SIZE) * VLLM_BLOCK_SIZE * kv_per_token", (
            Input("max_model_len", shape.vllm_max_model_len, "vLLM max_model_len (default: the longest prompt + completion)"),
            constant(C, "VLLM_BLOCK_SIZE"), fn_input("kv_per_token", V.kv_bytes_per_token(plan.arch, tp), V.kv_bytes_per_token),
        ), "vllm/v1/core/kv_cache_utils.py (check_enough_kv_cache_memory: one max_model_len request must fit)",
            code_ref(V.kv_bytes_for_sequence))
        graphs = " - graphs" if budget.graphs_in_budget else ""
        available = Formula(f"requested - weights - profile - non_torch{graphs}", (
            Input("requested", budget.requested_bytes, "ceil(capacity × gpu_memory_utilization)"), Input("weights", budget.weight_bytes, "vllm.weights"),
            Input("profile", budget.activation_bytes, "vllm.profile_activations"), Input("non_torch", budget.non_torch_bytes, "vllm.non_torch"),
            Input("graphs", budget.cuda_graph_bytes, "vllm.cuda_graphs"),
        ), "vllm/v1/worker/gpu_worker.py (determine_available_memory)", code_ref(V.EngineBudget))
        return required, available
    required = Formula("ceil(capacity * utilization)", (Input("capacity", shape.capacity_bytes, "GPU memory"),
                                                         Input("utilization", plan.spec.rollout.gpu_memory_utilization, "rollout.gpu_memory_utilization")),
                       "vllm/v1/worker/gpu_worker.py (init_device: free memory must cover the request)", code_ref(V.requested_bytes))
    resident = planner.engine_start_resident_bytes() if planner.models else C.CUDA_CONTEXT_BYTES
    available = Formula("capacity - resident", (
        Input("capacity", shape.capacity_bytes, "GPU memory"),
        fn_input("resident", resident, GP.GroupPlanner.engine_start_resident_bytes, "in use on the GPU when the engine starts"),
    ), doc_source(GP.GroupPlanner.engine_start_resident_bytes) or "ms-swift and TRL build the engine in the trainer's __init__",
        code_ref(GP.GroupPlanner.engine_start_resident_bytes))
    return required, available


def _steps(plan: Plan, c: Constraint) -> tuple[Formula, Formula]:
    t = plan.timeline
    assert t is not None and t.limit_bytes is not None
    saving = t.save_every is not None and c.first_step % t.save_every == 0
    required = Formula("base + growth * (step - 1) + save", (
        Input("base", t.base_bytes, "the plan's steady host peak (its largest phase)"),
        Input("growth", t.growth_bytes_per_step, "host bytes added per rollout round: " + ("; ".join(f"{g.name} ({g.source})" for g in t.growth) or "none")),
        Input("step", c.first_step, "the first step over the limit"),
        Input("save", t.save_bytes if saving else 0, "a checkpoint save's host bytes when that step saves"),
    ), doc_source(T.host_timeline) or "memory/growth.py (vllm#14353/#15597; checkpoint saves)", code_ref(T.host_timeline))
    return required, _host_limit(plan)


def explain_checks(plan: Plan) -> list[CheckExplained]:
    out = []
    devices = {d.role: d for d in plan.devices}
    for c in plan.constraints:
        if c.phase == "steps":
            required, available = _steps(plan, c)
        elif c.device == "host":
            phase = next(p for p in plan.host.phases if p.name == c.phase)
            required, available = _peak(phase.components, f"host {c.phase}"), _host_limit(plan)
        elif c.component in ("vllm.gpu_memory_utilization", "vllm.kv_cache") and c.phase == "load" and c.message.startswith("vLLM"):
            required, available = _engine_checks(plan, c)
        else:
            phase = next(p for p in devices[c.device_role].phases if p.name == c.phase)
            required, available = _peak(phase.components, f"{c.device_role} GPU {c.phase}"), _capacity(plan)
        out.append(CheckExplained(c, required, available))
    return out

