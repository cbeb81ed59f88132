"""Formulas of what no model owns: CUDA contexts, NCCL communicators, the caching allocator's
slack, and the blocks a trainer leaves cached when a sleeping engine wakes."""

from __future__ import annotations

from ..memory import constants as C
from ..memory.components import Category
from ..planner import gpu_phases as GP
from .context import Ctx
from .formula import Formula, Input, code_ref, constant, constant_doc, constant_formula, doc_source
from .registry import gpu


@gpu(r"(?:(?:policy|reference|critic|reward|vllm)\.)?cuda_context")
def cuda_context(ctx: Ctx, name: str) -> Formula:
    return constant_formula(C, "CUDA_CONTEXT_BYTES")


@gpu(r"(?:(?:policy|reference|critic|reward)\.)?nccl")
def nccl(ctx: Ctx, name: str) -> Formula:
    return constant_formula(C, "NCCL_COMMUNICATOR_BYTES")


def _symbol(name: str) -> str:
    return name.replace(".", "_")


def _sum_of(components: list, what: str) -> tuple[str, tuple[Input, ...]]:
    inputs = tuple(Input(_symbol(c.name), c.num_bytes, f"{c.name} ({c.category.value}) {what}") for c in components)
    return " + ".join(i.symbol for i in inputs) or "0", inputs


@gpu(r"allocator_fragmentation")
def allocator_fragmentation(ctx: Ctx, name: str) -> Formula:
    churn = [c for c in ctx.components if c.category in (Category.ACT, Category.TEMP)]
    total, inputs = _sum_of(churn, "in this phase")
    return Formula(f"floor(ALLOCATOR_FRAGMENTATION_FRACTION * ({total}))",
                   (constant(C, "ALLOCATOR_FRAGMENTATION_FRACTION"), *inputs),
                   "charged on activations and temporaries (ACT + TEMP), the allocations that churn; "
                   + constant_doc(C, "ALLOCATOR_FRAGMENTATION_FRACTION")[0],
                   code_ref(GP._finish))


@gpu(r"trainer_cached_blocks")
def trainer_cached_blocks(ctx: Ctx, name: str) -> Formula:
    from ..spec.run import Role

    assert ctx.planner is not None
    work = [c for c in ctx.planner.training_work(Role.actor) if c.category in (Category.ACT, Category.TEMP) and c.num_bytes]
    total, inputs = _sum_of(work, "of the actor's last training micro-batch, freed but cached by PyTorch")
    return Formula(total, inputs, "verl #302, ms-swift #5099 (a sleeping engine wakes through cuMem, which cannot use "
                   "blocks the caching allocator holds); " + doc_source(GP.GroupPlanner.cached_blocks_at_wake_up),
                   code_ref(GP.GroupPlanner.cached_blocks_at_wake_up))


@gpu(r"model_loading\.allocator_warmup")
def allocator_warmup(ctx: Ctx, name: str) -> Formula:
    from ..memory import load_warmup as LW
    from ..spec.run import Role
    from .formula import fn_input

    m, spec = ctx.model(Role.actor), ctx.spec
    block = LW.quantized_load_warmup_bytes(m.arch, spec.finetune, spec.transformers_version)
    return Formula("max(0, B - W)", (
        fn_input("B", block, LW.quantized_load_warmup_bytes,
                 f"transformers {spec.transformers_version}'s warm-up block: one byte per parameter counted"),
        Input("W", m.weights, "the policy's weights on this GPU, loaded into that block"),
    ), doc_source(LW.quantized_load_warmup_bytes) or LW.QUANTIZED_HALF_WARMUP, code_ref(GP.GroupPlanner.load_warmup))
