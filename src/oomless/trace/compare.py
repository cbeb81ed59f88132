"""The plan's prediction for a traced step, for comparison key by key. Pure: no torch here.

The planner's train phase (`planner/gpu_phases.py::GroupPlanner.training_work`) puts the
activations of one micro-batch in ACT and the larger of the logits peak and the backward
transient in TEMP; the tracer's training activation peak is the largest ACT + TEMP it sees
in the training forward, loss and backward. Both leave out weights, gradients, optimizer
states and the allocator's slack (OTHER), which the tracer does not model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..catalog.gpus import GpuSpec
from ..catalog.models import ModelArch
from ..errors import InputError
from ..memory.components import Category
from ..planner.plan import Plan, make_plan
from ..planner.roles import optimizer_implementation, placement_groups
from ..spec.enums import Algorithm, OptimizerImplementation, Role, Strategy
from ..spec.load import parse_spec
from ..spec.run import RunSpec
from .result import TraceScope, TraceSetup
from .vision_plan import VisionPrediction, predict_vision, vision_setup_fields

SHARDED_BY_STRATEGY = {
    Strategy.ddp: (),
    Strategy.zero1: (Category.OPT.value,),
    Strategy.zero2: (Category.GRAD.value, Category.OPT.value),
    Strategy.zero3: (Category.PARAM.value, Category.GRAD.value, Category.OPT.value),
    Strategy.fsdp: (Category.PARAM.value, Category.GRAD.value, Category.OPT.value),
}
"""What each rank holds 1/N of. Source: Rajbhandari et al., ZeRO (SC'20) §5 (stage 1 optimizer
states, 2 + gradients, 3 + parameters); FSDP FULL_SHARD shards like stage 3 (PyTorch FSDP docs)."""
ALGORITHM_STEPS = {
    Algorithm.grpo: "GRPO step",
    Algorithm.dapo: "DAPO step (GRPO's clipped loss)",
    Algorithm.rloo: "RLOO step (GRPO's clipped loss)",
    Algorithm.ppo: "PPO actor step (clipped policy loss; the critic's step is not traced)",
}
"""What the traced step is for each algorithm: the policy's clipped-ratio update, which every
one of them runs (PPO's advantages come from a critic, whose own forward/backward is not traced)."""

TRACE_CAPACITY_GIB = 1024
"""The capacity given to the plan made for a trace-only setup: large, since only the train
phase's terms are compared, never the verdict."""


@dataclass(frozen=True)
class Prediction:
    components: dict[str, int]
    """The train phase's ACT and TEMP components of the plan, by name."""
    vision: VisionPrediction | None = None
    """The plan's vision-tower terms, when its prompts carry images."""

    @property
    def activation_bytes(self) -> int:
        return sum(self.components.values())


def spec_for_setup(setup: TraceSetup, chunk_rows: int = 2048) -> RunSpec:
    """A single-GPU, full fine-tuning spec with exactly the traced step's settings (text only:
    a setup with images comes from its spec, `setup_from_spec`)."""
    if setup.images_per_sequence:
        raise InputError("vision", "spec_for_setup rebuilds text-only steps; plan the spec the images came from")
    data: dict[str, Any] = {
        "model": setup.model,
        "hardware": {"gpu_capacity_gib": TRACE_CAPACITY_GIB, "gpus_per_node": 1},
        "finetune": {"method": setup.finetune, "lora_rank": setup.lora_rank, "lora_alpha": setup.lora_alpha,
                     "lora_dropout": setup.lora_dropout,
                     "lora_targets": setup.lora_targets if isinstance(setup.lora_targets, str) else list(setup.lora_targets)},
        "precision": setup.precision,
        "optimizer": setup.optimizer,
        "distribution": {"strategy": "ddp"},
        "gradient_checkpointing": setup.checkpointing,
        "attention": setup.attention,
        "batch": {"micro_batch_size": setup.num_sequences, "logprob_micro_batch_size": setup.logprob_sequences},
        "lengths": {"max_prompt_tokens": setup.prompt_len, "max_completion_tokens": setup.completion_len},
        "logits": setup.logits,
        "logits_temperature": setup.logits_temperature,
        "logits_chunk_rows": chunk_rows,
        "kl_beta": setup.kl_beta,
        "rollout": {"engine": "hf"},
        "vision": {"images_per_prompt": 0},
    }
    return parse_spec(data)


def setup_from_spec(spec: RunSpec, arch: ModelArch) -> TraceSetup:
    """The step a spec describes, on one GPU: its micro-batches, lengths, images (when the
    tower is traced: `vision_plan.vision_setup_fields`), attention, checkpointing, logits mode
    and optimizer."""
    ft = spec.finetune
    fields = {"prompt_len": spec.lengths.max_prompt_tokens, **vision_setup_fields(spec, arch)}
    return TraceSetup(
        model=spec.model, model_type=arch.text_model_type, algorithm=spec.algorithm.value, num_sequences=spec.batch.micro_batch_size,
        logprob_sequences=spec.logprob_micro_batch_size,
        completion_len=spec.lengths.max_completion_tokens, attention=spec.attention.value,
        checkpointing=spec.gradient_checkpointing, logits=spec.logits.value, logits_temperature=spec.logits_temperature.value,
        optimizer=spec.optimizer.value,
        precision=spec.precision.value, kl_beta=spec.kl_beta, finetune=ft.method.value, lora_rank=ft.lora_rank,
        lora_alpha=ft.lora_alpha, lora_dropout=ft.lora_dropout,
        lora_targets=ft.lora_targets if isinstance(ft.lora_targets, str) else tuple(ft.lora_targets),
        optimizer_implementation=(optimizer_implementation(spec) or OptimizerImplementation.for_loop).value,
        **fields,
    )


def trace_scope(spec: RunSpec) -> TraceScope:
    """What the trace stands for: always one process holding one whole (unsharded) replica; the
    spec's strategy and actor GPUs say which categories each real rank would hold 1/N of."""
    group = next(g for g in placement_groups(spec) if Role.actor in g.roles)
    num_gpus = group.gpus_per_node * spec.hardware.num_nodes
    strategy = spec.distribution.strategy
    return TraceScope(strategy=strategy.value, num_training_gpus=num_gpus,
                      sharded_categories=SHARDED_BY_STRATEGY[strategy] if num_gpus > 1 else ())


def train_phase_prediction(plan: Plan) -> Prediction:
    """ACT + TEMP components of the train phase on the actor's GPU."""
    group = next(g for g in plan.devices if g.role == "train")
    phase = next(p for p in group.phases if p.name == "train")
    comps = {c.name: c.num_bytes for c in phase.components if c.category in (Category.ACT, Category.TEMP)}
    return Prediction(comps, predict_vision(plan))


def predict(spec: RunSpec, arch: ModelArch, gpu: GpuSpec | None = None) -> Prediction:
    return train_phase_prediction(make_plan(spec, arch, gpu))


def relative_difference(predicted: int, traced: int) -> float:
    """(predicted − traced) / traced: positive when the plan is conservative."""
    return (predicted - traced) / traced if traced else 0.0
