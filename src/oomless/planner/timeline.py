"""A run's host RAM per step: the plan's steady peak, what grows per step, and the checkpoint
saves; the first step at which the node's limit (Ray's kill threshold, else RAM) is crossed.

A step here is one rollout round with its updates (verl/EasyR1's training step; TRL's optimizer
step unless ``steps_per_generation`` reuses a round): leaks grow per round.

Pure: a ``Plan`` in, a ``Timeline`` out (``make_plan`` adds its crossing as a constraint). Each growth term comes from ``memory.growth`` with
its source; the horizon is ``schedule.max_steps`` (without it one step is planned and growth
is reported per step but not judged).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..memory import growth as G
from . import vision_terms as VTR
from ..spec.run import Role, RolloutEngine, RunSpec

if TYPE_CHECKING:
    from .plan import Plan


@dataclass(frozen=True)
class Growth:
    name: str
    bytes_per_step: int
    source: str
    remedy: str = ""
    """What removes the term (a release with the fix), when one is known."""


@dataclass(frozen=True)
class Timeline:
    horizon_steps: int | None
    base_bytes: int
    """The plan's steady host peak of one node (its largest phase)."""
    limit_bytes: int | None
    growth: tuple[Growth, ...]
    save_every: int | None
    save_bytes: int
    """Host bytes a checkpoint save adds on the node while it runs."""
    crossing_step: int | None
    """First step whose host peak crosses the limit within the horizon; None if none does."""

    @property
    def growth_bytes_per_step(self) -> int:
        return sum(g.bytes_per_step for g in self.growth)

    def host_bytes_at(self, step: int) -> int:
        saving = self.save_every is not None and step % self.save_every == 0
        return self.base_bytes + self.growth_bytes_per_step * (step - 1) + (self.save_bytes if saving else 0)

    def extras_over_base(self) -> tuple[int, ...]:
        """What growth and saves add to a steady host phase at the horizon's candidate peaks
        (its last step; the last save before it when that is another step): each is a sum of
        terms, so fit can predict it additively per host phase; () without a horizon."""
        if self.horizon_steps is None:
            return ()
        last = self.host_bytes_at(self.horizon_steps) - self.base_bytes
        if not self.save_every or self.save_every > self.horizon_steps or self.horizon_steps % self.save_every == 0:
            return (last,)
        return (last, self.host_bytes_at(self.horizon_steps - self.horizon_steps % self.save_every) - self.base_bytes)

    def peak_bytes(self) -> int | None:
        """The node's largest host bytes over the horizon (the last step, or the last save
        before it when a save spike is larger); None without a horizon."""
        extras = self.extras_over_base()
        return self.base_bytes + max(extras) if extras else None

    def terms(self) -> str:
        """Each growth term and the save spike, with its rate (and remedy where one is known)."""
        parts = [f"{g.name} +{g.bytes_per_step / 2**30:.2f} GiB/step" + (f" ({g.remedy})" if g.remedy else "")
                 for g in self.growth]
        if self.save_bytes:
            parts.append(f"checkpoint save +{self.save_bytes / 2**30:.2f} GiB every {self.save_every} steps")
        return "; ".join(parts) or "no growth term applies"

    def message(self) -> str:
        what = self.terms()
        if self.crossing_step is None:
            horizon = f"over {self.horizon_steps} steps" if self.horizon_steps else "(no schedule.max_steps: not judged)"
            return f"host RAM stays under the limit {horizon}: {what}"
        at = self.host_bytes_at(self.crossing_step) / 2**30
        limit = (self.limit_bytes or 0) / 2**30
        return f"host RAM crosses the limit at step ~{self.crossing_step} ({at:.1f} of {limit:.1f} GiB): {what}"


def train_gpus_per_node(spec: RunSpec) -> int:
    """Training ranks on one node (vLLM's own GPUs excluded)."""
    own = spec.rollout.num_gpus if spec.rollout.engine == RolloutEngine.vllm_separate else 0
    return max(spec.hardware.gpus_per_node - own, 1)


def prompts_per_node_per_round(plan: Plan) -> int:
    """Prompts one node generates for in one rollout round: the sequences each training rank
    generates per round (micro-batch × steps per generation × oversampling) × ranks / group size."""
    generated = plan.shape.generation_sequences_per_gpu * train_gpus_per_node(plan.spec)
    return max(1, generated // plan.spec.batch.num_generations)


def rounds_in(spec: RunSpec, optimizer_steps: int) -> int:
    """Rollout rounds in ``optimizer_steps`` optimizer steps (TRL reuses one round for
    steps_per_generation / gradient_accumulation_steps optimizer steps)."""
    per_round = max(1, spec.steps_per_generation // spec.batch.gradient_accumulation_steps)
    return -(-optimizer_steps // per_round)


def pixel_bytes_per_prompt(plan: Plan) -> int:
    """``pixel_values`` of one prompt's images at the typical size when given, else the limit."""
    spec, vision = plan.spec, plan.arch.vision
    if vision is None or spec.vision.images_per_prompt == 0:
        return 0
    images = spec.vision.typical_images_per_prompt if spec.vision.typical_images_per_prompt is not None else spec.vision.images_per_prompt
    patches = VTR.patches_per_image(spec, plan.arch, spec.vision.typical_pixels)
    return images * G.pixel_value_bytes_per_image(patches, vision.patch_size, vision.temporal_patch_size, vision.in_chans)


def spmd_engine_copies(spec: RunSpec) -> int:
    """Processes holding one prompt's request: every TP rank of a colocated SPMD engine
    (EasyR1, verl before its async server rollout, TRL and ms-swift colocate run vLLM with the
    external launcher), one for a server engine, vLLM's own worker processes
    (`engine_in_trainer_process` false) or Ray engine actors (OpenRLHF/ORZ `process_per_role`)."""
    ro = spec.rollout
    if ro.engine == RolloutEngine.vllm_colocate and ro.engine_in_trainer_process and not spec.placement.process_per_role:
        return ro.tensor_parallel_size
    return 1


def vllm_leak(plan: Plan) -> Growth | None:
    spec = plan.spec
    version = getattr(spec.rollout, "vllm_version", None)
    n = getattr(spec.rollout, "samples_per_request", None) or spec.batch.num_generations
    if spec.rollout.engine == RolloutEngine.hf or n <= 1 or not G.is_leaking_vllm(version):
        return None
    lengths = spec.lengths
    tokens_prompt = VTR.prompt_tokens_with_images(spec, lengths.typical_prompt, plan.shape.image_tokens_per_prompt)
    per_prompt = G.retained_request_bytes(tokens_prompt, lengths.typical_completion, n, pixel_bytes_per_prompt(plan))
    copies = spmd_engine_copies(spec)
    leak = G.vllm_v0_parallel_sampling_leak_bytes_per_step(prompts_per_node_per_round(plan), per_prompt, copies)
    held = f", held by each of {copies} TP ranks" if copies > 1 else ""
    return Growth(f"vLLM {version} V0 engine keeps finished n={n} requests{held}", leak,
                  "vllm#14353/#15597, fixed by vllm PR #14326/#16472",
                  "gone with vLLM >= 0.8.0's default V1 engine; or resume from a checkpoint before the crossing")


def checkpoint_bytes(plan: Plan) -> int:
    actor = plan.models.get(Role.actor)
    if actor is None:
        return 0
    return G.checkpoint_save_host_bytes(actor.weights_full, actor.optimizer, train_gpus_per_node(plan.spec),
                                        rank0_on_node=True, save_only_model=plan.spec.schedule.save_only_model)


def host_timeline(plan: Plan) -> Timeline:
    schedule = plan.spec.schedule
    base = plan.host.peak_phase.peak_bytes
    growth = tuple(g for g in (vllm_leak(plan),) if g is not None)
    save_every = rounds_in(plan.spec, schedule.save_steps) if schedule.save_steps else None
    save_bytes = checkpoint_bytes(plan) if save_every else 0
    crossing = None
    horizon = rounds_in(plan.spec, schedule.max_steps) if schedule.max_steps is not None else None
    if plan.host.limit_bytes is not None and horizon is not None:
        crossing = G.first_step_over(base, sum(g.bytes_per_step for g in growth), plan.host.limit_bytes,
                                     horizon, save_bytes, save_every)
    return Timeline(horizon, base, plan.host.limit_bytes, growth, save_every, save_bytes, crossing)
