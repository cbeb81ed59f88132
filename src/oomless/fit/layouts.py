"""Rollout layouts with the same total GPU count, and batch splits that keep the maths.

The training maths is fixed by the completions per optimizer step (effective batch = training
ranks × micro-batch × gradient accumulation) and per rollout (× steps_per_generation /
gradient_accumulation_steps). A layout that moves GPUs between training and vLLM changes the
training ranks, so micro-batch × accumulation is re-split to keep both numbers; a layout whose
rank count does not divide them is left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from ..planner.roles import Group, placement_groups
from ..spec.run import Role, RolloutEngine, RunSpec
from .overrides import Overrides, apply

SEPARATE_GPU_COUNTS = (1, 2, 4)
"""vLLM GPUs per node tried for a separate-GPU layout (plus the input's own count)."""


@dataclass(frozen=True)
class Layout:
    label: str
    overrides: Overrides
    groups: tuple[Group, ...]
    fallback: bool = False
    """Searched only when no other layout fits (HF generate for a vLLM run: far slower decoding)."""

    @property
    def train_ranks_per_node(self) -> int:
        return sum(g.gpus_per_node for g in self.groups if Role.actor in g.roles)

    @property
    def vllm_gpus_per_node(self) -> int:
        """GPUs of the group holding vLLM (bounds its tensor parallelism); 0 without vLLM."""
        return next((g.gpus_per_node for g in self.groups if Role.vllm in g.roles), 0)

    @property
    def colocated(self) -> bool:
        return any(Role.vllm in g.roles and len(g.roles) > 1 for g in self.groups)


def _separate(k: int) -> Overrides:
    return {
        "rollout.engine": RolloutEngine.vllm_separate, "rollout.num_gpus": k, "placement.groups": None,
        "rollout.sleep_level": 0, "rollout.offload_model": False, "rollout.offload_optimizer": False,
    }


HF_GENERATE: Overrides = {
    "rollout.engine": RolloutEngine.hf, "placement.groups": None, "rollout.sleep_level": 0,
    "rollout.offload_model": False, "rollout.offload_optimizer": False,
}
"""Rollouts by transformers `generate` inside the training processes (TRL/VLM-R1 `use_vllm`
false): no engine budget, slower generation."""


def layouts(spec: RunSpec) -> list[Layout]:
    """The input's layout first, then vLLM colocated on every GPU, vLLM on k GPUs of its own,
    and generation by the trainer itself (HF generate; for a vLLM run a fallback, searched
    when no vLLM layout fits). The rollout engine changes how completions are sampled, not
    what is trained on them."""
    out = [Layout("as given", {}, placement_groups(spec))]
    gpus = spec.hardware.gpus_per_node
    everywhere: Overrides = {"rollout.engine": RolloutEngine.vllm_colocate, "placement.groups": None}
    if spec.placement.groups is not None and not spec.rollout.engine_in_trainer_process and not spec.placement.process_per_role:
        # one engine in a process of its own on some trainer GPUs (ms-swift 3.2-3.4, one
        # `num_infer_workers` on `vllm_device`) becomes an engine inside each training process
        # on every GPU (`num_infer_workers` = NPROC_PER_NODE): the only way those write it
        everywhere["rollout.engine_in_trainer_process"] = True
    candidates = [("vLLM colocated on all GPUs", everywhere)]
    counts = sorted({k for k in (*SEPARATE_GPU_COUNTS, spec.rollout.num_gpus) if 1 <= k < gpus})
    candidates += [(f"vLLM on {k} GPU{'s' if k > 1 else ''} per node of its own", _separate(k)) for k in counts]
    candidates.append(("HF generate in the trainer (no vLLM)", HF_GENERATE))
    fallback = spec.rollout.engine != RolloutEngine.hf
    seen = {out[0].groups}
    for label, overrides in candidates:
        groups = placement_groups(apply(spec, overrides))
        if groups not in seen:
            seen.add(groups)
            out.append(Layout(label, overrides, groups, fallback and overrides is HF_GENERATE))
    return out


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def batch_splits(spec: RunSpec, ranks_in: int, ranks_out: int, scale: Fraction = Fraction(1),
                 group: int | None = None) -> list[Overrides]:
    """(micro-batch, accumulation[, steps_per_generation]) on ``ranks_out`` training ranks giving
    the input's completions per optimizer step × ``scale`` (num_generations changes), largest
    micro-batch first. Empty when the ranks do not divide the batch.

    ``group``: the framework generates a rollout every micro-step (VLM-R1's TRL 0.14-era
    trainer, `_prepare_inputs`), so steps_per_generation is 1 (unset with no accumulation, as
    its reader gives it) and each micro-batch must hold whole groups of ``group`` completions.
    The maths is kept: every rollout of an optimizer step comes from that step's policy, each
    group's advantages are taken within its own rollout, and equal micro-batches make the mean
    of the micro-steps' losses the mean over the step (Assumes: per-group advantage scaling,
    TRL 0.14 `compute_loss`)."""
    b = spec.batch
    per_step = b.micro_batch_size * b.gradient_accumulation_steps * ranks_in * scale
    if per_step.denominator != 1 or int(per_step) % ranks_out:
        return []
    per_rank = int(per_step) // ranks_out
    ratio = Fraction(spec.steps_per_generation, b.gradient_accumulation_steps)
    out = []
    for micro in reversed(_divisors(per_rank)):
        accumulation = per_rank // micro
        split: Overrides = {"batch.micro_batch_size": micro, "batch.gradient_accumulation_steps": accumulation}
        if group is not None:
            if micro % group:
                continue
            split["batch.steps_per_generation"] = 1 if accumulation > 1 else None
        elif b.steps_per_generation is not None:
            steps = accumulation * ratio
            if steps.denominator != 1:
                continue
            split["batch.steps_per_generation"] = int(steps)
        out.append(split)
    return out
