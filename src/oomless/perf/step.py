"""Predicted wall time of one optimizer step of a planned run, as named terms.

A GRPO/PPO step is synchronous (TRL, ms-swift, verl and OpenRLHF without async rollout): the
engines generate the rollout batch, weights are synced, the experience passes run (old/reference
log-probs, values), then `steps_per_generation / gradient_accumulation_steps` optimizer steps
train on it. Terms are summed per rollout batch and divided by the optimizer steps it feeds.
Every term depends on either the training knobs or the engine knobs, never both, so `fit` can
add them across knob groups (`oomless.fit.probe`).

The numbers are estimates built from peak rates and the efficiencies in `perf.constants`;
absolute seconds may be off by a factor of two. Rankings between configurations of one run are
what `oomless fit` relies on.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

from ..catalog.models import ModelArch
from ..memory import constants as MC
from ..planner.plan import Plan
from ..planner.roles import Group, RoleModel, placement_groups
from ..planner.shape import RunShape
from ..spec.run import Algorithm, FinetuneMethod, Role, RolloutEngine, RunSpec, Strategy
from . import comm, rollout, training
from . import flops as F
from .hardware import GpuPerf


@dataclass(frozen=True)
class StepEstimate:
    """Seconds per optimizer step, by term (`rollout.generate`, `train.compute`, ...)."""

    terms: dict[str, float] = field(default_factory=dict)

    @property
    def total_s(self) -> float:
        return sum(self.terms.values())


@dataclass(frozen=True)
class _Run:
    """What every term needs, computed once."""

    spec: RunSpec
    arch: ModelArch
    perf: GpuPerf
    shape: RunShape
    models: dict[Role, RoleModel]
    groups: tuple[Group, ...]

    @property
    def nodes(self) -> int:
        return self.spec.hardware.num_nodes

    def ranks(self, role: Role) -> int:
        return sum(g.gpus_per_node for g in self.groups if role in g.roles) * self.nodes

    @functools.cached_property
    def vision_flops_per_prompt(self) -> float:
        patches = F.vision_patches_per_prompt(self.arch, self.shape.image_tokens_per_prompt)
        return patches * F.vision_forward_flops_per_patch(self.arch)


def _bf16_bytes(m: RoleModel) -> float:
    return F.num_parameters(m.arch) * MC.BF16_BYTES


def generation_s(run: _Run, kv_cache_bytes: int) -> float:
    """Per rollout: vLLM engines in parallel, each on its share; or HF generate per rank."""
    spec, shape, arch = run.spec, run.shape, run.arch
    if spec.rollout.engine == RolloutEngine.hf:
        return rollout.hf_generation_s(
            arch, run.perf, num_sequences=shape.generation_sequences_per_gpu, prompt_len=shape.prompt_len,
            completion_len=shape.completion_len, vision_flops_per_prompt=run.vision_flops_per_prompt,
        )
    tp = spec.rollout.tensor_parallel_size
    engines = max(run.ranks(Role.vllm) // tp, 1)
    total = run.ranks(Role.actor) * shape.generation_sequences_per_gpu
    return rollout.vllm_generation_s(
        arch, run.perf, tp=tp, num_sequences=math.ceil(total / engines), prompt_len=shape.prompt_len,
        completion_len=shape.completion_len, kv_cache_bytes=kv_cache_bytes, max_num_seqs=shape.vllm_max_num_seqs,
        enforce_eager=spec.rollout.enforce_eager, vision_flops_per_prompt=run.vision_flops_per_prompt,
    )


def generation_gather_s(run: _Run) -> float:
    """Training-side part of a rollout: ZeRO-3/FSDP gather the actor whole, for HF generate
    (TRL `unwrap_model_for_generation`) or to push it into vLLM."""
    m = run.models[Role.actor]
    if run.spec.distribution.strategy not in training.SHARDED:
        return 0.0
    return comm.all_gather_s(_bf16_bytes(m), m.num_shards, run.perf, run.nodes)


def weight_load_s(run: _Run) -> float:
    """Engine-side part of the sync: a colocated in-process engine copies its weights on the
    GPU; any other engine receives them by NCCL broadcast."""
    spec = run.spec
    if spec.rollout.engine == RolloutEngine.hf:
        return 0.0
    tp, weights = spec.rollout.tensor_parallel_size, F.num_parameters(run.arch) * MC.BF16_BYTES
    in_process = spec.rollout.engine == RolloutEngine.vllm_colocate and spec.rollout.engine_in_trainer_process
    if in_process:
        return 2 * weights / tp / run.perf.memory_bytes_per_s
    return comm.broadcast_s(weights, run.perf, run.nodes)


def sleep_wake_s(run: _Run) -> float:
    """Level-1 sleep copies the engine's weights to pinned host memory and back each rollout;
    level 2 discards them (the sync reloads them)."""
    ro = run.spec.rollout
    if ro.engine != RolloutEngine.vllm_colocate or ro.sleep_level != 1:
        return 0.0
    return 2 * comm.host_copy_s(rollout.engine_weight_bytes(run.arch, ro.tensor_parallel_size), run.perf)


def rollout_offload_s(run: _Run) -> float:
    """ms-swift/EasyR1 offload during rollout (with a sleeping engine): actor and reference
    weights and the actor's optimizer states go to the host and come back."""
    ro, out = run.spec.rollout, 0.0
    if ro.engine != RolloutEngine.vllm_colocate or ro.sleep_level == 0:
        return 0.0
    for role in (Role.actor, Role.reference):
        m = run.models.get(role)
        if m is not None and ro.offload_model:
            out += 2 * comm.host_copy_s(m.weights + m.persistent, run.perf)
    actor = run.models[Role.actor]
    if ro.offload_optimizer:
        out += 2 * comm.host_copy_s(actor.optimizer_states, run.perf)
    return out


def idle_offload_s(run: _Run) -> float:
    """`offload_idle_models` (ORZ, OpenRLHF sleep): every model leaves the GPU and returns once
    per step."""
    if not run.spec.placement.offload_idle_models:
        return 0.0
    resident = sum(m.weights + m.persistent + m.master + m.optimizer_states for m in run.models.values())
    return 2 * comm.host_copy_s(resident, run.perf)


def forward_roles(run: _Run) -> tuple[Role, ...]:
    """Models that run a no-grad pass over the rollout batch (as planner.gpu_phases does)."""
    spec, out = run.spec, []
    lora_ref = spec.kl_beta > 0 and spec.finetune.method != FinetuneMethod.full and spec.algorithm != Algorithm.dapo
    if run.shape.reuses_rollout or spec.algorithm == Algorithm.ppo or lora_ref:
        out.append(Role.actor)
    return tuple(out) + tuple(r for r in (Role.reference, Role.critic, Role.reward) if r in run.models)


def experience_s(run: _Run) -> float:
    """Per rollout: each forward role over this rank's rollout sequences; sharded models gather
    their weights once per log-prob micro-batch."""
    shape, strategy, total = run.shape, run.spec.distribution.strategy, 0.0
    seqs = shape.generation_sequences_per_gpu
    for role in forward_roles(run):
        m = run.models[role]
        vision = run.vision_flops_per_prompt if role in (Role.actor, Role.reference) else 0.0
        flops = seqs * (shape.seq_len * F.forward_flops_per_token(m.arch, shape.seq_len) + vision)
        compute = training.compute_s(flops, run.perf)
        gathers = 0.0
        if strategy in training.SHARDED:
            passes = math.ceil(seqs / shape.logprob_sequences)
            gathers = passes * comm.all_gather_s(_bf16_bytes(m), m.num_shards, run.perf, run.nodes)
        total += compute + comm.exposed_s(gathers, compute)
    return total


def train_terms(run: _Run, role: Role) -> dict[str, float]:
    """One optimizer step of a trainable model: micro-steps, step collectives, update."""
    spec, shape, m = run.spec, run.shape, run.models[role]
    dist, perf, n = spec.distribution, run.perf, m.num_shards
    method = spec.finetune.method if role == Role.actor else FinetuneMethod.full
    forwards = F.training_forwards(method, spec.gradient_checkpointing)
    vision = run.vision_flops_per_prompt if role == Role.actor else 0.0
    flops = shape.train_sequences * (forwards * shape.seq_len * F.forward_flops_per_token(m.arch, shape.seq_len) + vision * forwards)
    micro_compute = training.compute_s(flops, perf)
    param_bytes, grad_bytes = _bf16_bytes(m), m.num_trainable * MC.BF16_BYTES
    micro_comm = training.micro_step_comm_s(dist.strategy, param_bytes, grad_bytes, n, perf, run.nodes)
    if dist.offload_params:
        micro_comm += training.param_offload_micro_step_s(param_bytes / n, perf)
    trainable_bytes = m.num_trainable * MC.BF16_BYTES
    step_comm = training.optimizer_step_comm_s(dist.strategy, trainable_bytes, grad_bytes, n, perf, run.nodes)
    micro_steps = spec.batch.gradient_accumulation_steps
    shard = m.num_trainable / (1 if dist.strategy == Strategy.ddp else n)
    update = training.cpu_optimizer_s(shard, micro_steps, perf) if dist.offload_optimizer else training.gpu_optimizer_s(shard, perf)
    prefix = "train" if role == Role.actor else "critic_train"
    return {
        f"{prefix}.compute": micro_steps * micro_compute,
        f"{prefix}.collectives": micro_steps * comm.exposed_s(micro_comm, micro_compute) + comm.exposed_s(step_comm, micro_compute),
        f"{prefix}.optimizer": update,
    }


ENGINE_TERMS = ("rollout.generate", "rollout.load_weights", "rollout.sleep_wake")
"""Terms that depend on the engine knobs (TP, max_num_seqs, enforce_eager, utilization through
the KV cache, sleep level); every other term depends on the training knobs only."""


def _per_optimizer_step(spec: RunSpec, per_rollout: dict[str, float]) -> dict[str, float]:
    steps_per_rollout = spec.steps_per_generation / spec.batch.gradient_accumulation_steps
    return {k: v / steps_per_rollout for k, v in per_rollout.items()}


def engine_side_terms(spec: RunSpec, arch: ModelArch, perf: GpuPerf, shape: RunShape, kv_cache_bytes: int,
                      groups: tuple[Group, ...] | None = None) -> dict[str, float]:
    """Seconds per optimizer step of the ENGINE_TERMS. ``groups``: `placement_groups(spec)`,
    when the caller has them (`fit` asks for thousands of variants of one placement)."""
    run = _Run(spec, arch, perf, shape, {}, placement_groups(spec) if groups is None else groups)
    return _per_optimizer_step(spec, {
        "rollout.generate": generation_s(run, kv_cache_bytes),
        "rollout.load_weights": weight_load_s(run),
        "rollout.sleep_wake": sleep_wake_s(run),
    })


def training_side_terms(spec: RunSpec, arch: ModelArch, perf: GpuPerf, shape: RunShape, models: dict[Role, RoleModel],
                        groups: tuple[Group, ...] | None = None) -> dict[str, float]:
    """Seconds per optimizer step of every other term (``groups`` as in `engine_side_terms`)."""
    run = _Run(spec, arch, perf, shape, models, placement_groups(spec) if groups is None else groups)
    terms = _per_optimizer_step(spec, {
        "rollout.gather_weights": generation_gather_s(run),
        "rollout.offload": rollout_offload_s(run),
        "experience.forwards": experience_s(run),
        "idle_offload": idle_offload_s(run),
    })
    for role in (Role.critic, Role.actor):
        if role in models and models[role].trainable:
            terms.update(train_terms(run, role))
    return terms


def estimate_step(
    spec: RunSpec, arch: ModelArch, perf: GpuPerf, shape: RunShape, models: dict[Role, RoleModel], kv_cache_bytes: int,
) -> StepEstimate:
    """Seconds per optimizer step by term; `rollout.generate` is inf when an engine cannot
    hold one full-length sequence."""
    terms = engine_side_terms(spec, arch, perf, shape, kv_cache_bytes)
    terms.update(training_side_terms(spec, arch, perf, shape, models))
    return StepEstimate({k: v for k, v in terms.items() if v})


def estimate_plan(plan: Plan, perf: GpuPerf) -> StepEstimate:
    """The step time of a planned run (its own KV-cache capacity bounds rollout concurrency)."""
    kv = plan.engine.kv_cache_bytes if plan.engine is not None else 0
    return estimate_step(plan.spec, plan.arch, perf, plan.shape, plan.models, kv)
