"""The plan's prediction for a measured real step (`trace/real_steps.py`). Pure: no torch here.

The plan's train phase on the actor's GPU holds the model states (PARAM weights, GRAD
gradients, OPT optimizer states) and one micro-batch's training work (ACT activations, TEMP
logits or backward recompute). The measured step is one process with no vLLM engine; CUDA
context and the allocator's slack (OTHER) are not tensors and are left out of both sides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..catalog.models import arch_from_config
from ..memory.components import Category
from ..planner.plan import make_plan
from ..spec.load import parse_spec
from ..spec.run import RunSpec

PLAN_CATEGORIES = (Category.PARAM, Category.GRAD, Category.OPT, Category.ACT, Category.TEMP)
GPU_CAPACITY_GIB = 80
"""Only the train phase's tensor components are compared, never the verdict."""


@dataclass(frozen=True)
class PlannedTrainPhase:
    components: dict[str, int]
    """The train phase's PARAM, GRAD, OPT, ACT and TEMP components, by name."""
    by_category: dict[str, int]

    @property
    def total_bytes(self) -> int:
        return sum(self.by_category.values())


def spec_for_real_step(setup: Any) -> RunSpec:
    """One GPU, full fine-tuning, HF rollout (no vLLM), exactly the measured step's settings."""
    return parse_spec({
        "model": setup.family,
        "hardware": {"gpu_capacity_gib": GPU_CAPACITY_GIB, "gpus_per_node": 1},
        "precision": setup.precision,
        "optimizer": setup.optimizer,
        "distribution": {"strategy": "ddp"},
        "gradient_checkpointing": setup.checkpointing,
        "attention": setup.attention,
        "batch": {"micro_batch_size": setup.num_sequences, "logprob_micro_batch_size": setup.num_sequences},
        "lengths": {"max_prompt_tokens": setup.prompt_len, "max_completion_tokens": setup.completion_len},
        "logits": setup.logits,
        "kl_beta": setup.kl_beta,
        "rollout": {"engine": "hf"},
        "vision": {"images_per_prompt": 0},
    })


def planned_train_phase(setup: Any) -> PlannedTrainPhase:
    """``setup`` is a `real_steps.RealSetup` (family name, config dict, step settings)."""
    arch = arch_from_config(setup.config, setup.family)
    plan = make_plan(spec_for_real_step(setup), arch, None)
    group = next(g for g in plan.devices if g.role == "train")
    phase = next(p for p in group.phases if p.name == "train")
    comps = {c.name: c.num_bytes for c in phase.components if c.category in PLAN_CATEGORIES}
    by_cat = {cat.value: sum(c.num_bytes for c in phase.components if c.category == cat) for cat in PLAN_CATEGORIES}
    return PlannedTrainPhase(comps, by_cat)


def relative_difference(planned: int, measured: int) -> float:
    """(planned − measured) / measured: positive when the plan is conservative."""
    return (planned - measured) / measured if measured else 0.0
