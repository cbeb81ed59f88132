"""Issue 14, planner side: micro-batches from token budgets, packing and sequence parallelism;
typical vs worst; AdamW states at the first step; the old log-prob pass; the chance per step."""

from __future__ import annotations

import math

import pytest

from oomless.catalog.resolve import load_model
from oomless.memory import activations as A
from oomless.memory import logits as L
from oomless.planner.batches import (
    DataLengths,
    max_budget_micro_batch_tokens,
    packed_micro_batch,
    padded_micro_batch,
    typical_budget_micro_batch_tokens,
)
from oomless.planner.plan import PhaseMemory, _first_step
from oomless.planner.risk import Knots, batch_risk, knots
from oomless.spec.load import parse_spec
from oomless.spec.run import AttentionImpl
from tests.helpers import BASE_SPEC, component, merged, phase_peak, plan_of

FLASH = {"attention": "flash_attention_2"}


# --- token budgets ---------------------------------------------------------------------------


def test_budget_bound_by_hand() -> None:
    # tokens: T + s; workload (verl >= 0.6): (T + s)(1 + s/24576)
    assert max_budget_micro_batch_tokens(16384, 4096, "tokens") == 20480
    assert max_budget_micro_batch_tokens(16384, 4096, "workload") == 20480 * 28672 // 24576


@pytest.mark.parametrize("budget", [1000, 4096])
def test_equal_sequences_never_pack_beyond_the_bound(budget: int) -> None:
    # n sequences of x tokens in k = ceil(n·x/T) balanced parts: the largest holds ceil(n/k).
    worst = 0
    for x in range(1, budget + 1, 7):
        for n in range(1, 60):
            k = math.ceil(n * x / budget)
            part = math.ceil(n / k) * x
            assert part <= max_budget_micro_batch_tokens(budget, x, "tokens")
            worst = max(worst, part - budget)
    assert worst > budget // 2  # the bound is approached: a part exceeds the budget by most of a sequence


def test_typical_budget_part_is_balanced() -> None:
    assert typical_budget_micro_batch_tokens(16384, 100_000) == math.ceil(100_000 / 7)
    assert typical_budget_micro_batch_tokens(16384, 5000) == 5000


def test_train_micro_batch_follows_the_budget() -> None:
    spec = merged(BASE_SPEC, **FLASH, **{"batch.padding_free": True, "batch.max_tokens_per_gpu": 4096})
    plan = plan_of(spec)
    s = plan.shape.seq_len  # 1024
    mb = plan.shape.train_batch
    assert mb.packed and mb.num_rows == 1 and mb.num_tokens == min(4096 + s, 2 * 4 * s)
    arch = plan.arch
    saved = A.training_saved_activation_bytes(arch, AttentionImpl.flash_attention_2, True, 1, mb.num_tokens)
    assert component(plan, "train", "activations") == saved
    bigger = plan_of(merged(spec, **{"batch.max_tokens_per_gpu": 6144}))
    assert phase_peak(bigger, "train") > phase_peak(plan, "train")
    assert plan.typical is not None and plan.typical.shape.train_batch.num_tokens == typical_budget_micro_batch_tokens(4096, 8 * s)


def test_logprob_budget_defaults_to_the_training_budget() -> None:
    plan = plan_of(merged(BASE_SPEC, **FLASH, **{"batch.padding_free": True, "batch.max_tokens_per_gpu": 2048}))
    assert plan.shape.logprob_batch.num_tokens == plan.shape.train_batch.num_tokens
    own = plan_of(merged(BASE_SPEC, **FLASH, **{"batch.padding_free": True, "batch.max_tokens_per_gpu": 2048,
                                                  "batch.logprob_max_tokens_per_gpu": 4096}))
    assert own.shape.logprob_batch.num_tokens == 4096 + own.shape.seq_len


def test_packed_rows_compute_logits_for_every_position() -> None:
    # The same tokens packed cost more logits than padded rows that keep only the completions (TRL).
    padded = plan_of(merged(BASE_SPEC, **FLASH))
    packed = plan_of(merged(BASE_SPEC, **FLASH, **{"batch.padding_free": True}))
    assert packed.shape.train_batch.num_tokens == padded.shape.train_batch.num_tokens
    assert component(packed, "train", "logits") > component(padded, "train", "logits")
    arch, mb = packed.arch, packed.shape.train_batch
    assert component(packed, "logprob", "logits") == L.logprob_logits_bytes(arch, packed.spec.logits, 1, mb.num_tokens - 1, 2048)


# --- sequence parallelism --------------------------------------------------------------------


def test_ulysses_halves_a_gpus_tokens_and_adds_all_to_all() -> None:
    one = plan_of(merged(BASE_SPEC, **FLASH))
    two = plan_of(merged(BASE_SPEC, **FLASH, **{"distribution.sequence_parallel_size": 2}))
    assert two.shape.train_batch.num_tokens * 2 == one.shape.train_batch.num_tokens
    assert component(two, "train", "activations") < component(one, "train", "activations")
    assert component(two, "train", "logits") < component(one, "train", "logits")


def test_ulysses_attention_sees_the_whole_sequence_for_its_heads() -> None:
    arch = load_model("Qwen/Qwen2.5-7B-Instruct")  # 28 heads, 4 KV heads
    s = 4096
    flash = AttentionImpl.flash_attention_2
    # flash is linear: 1/sp of the heads over s equals all heads over s/sp when KV heads split
    # evenly, but for the int64 unpad indices, which cover the whole sequence
    ulysses = A.attention_core_saved_bytes_per_sequence(arch, flash, s // 2, 2)
    assert ulysses - A.attention_core_saved_bytes_per_sequence(arch, flash, s // 2) == A.INDEX_BYTES * (s - s // 2)
    # 4 KV heads repeated to sp = 7... not a divisor; sp = 4 keeps one KV head per GPU
    heads, full = A.ulysses_attention_view(arch, s // 4, 4)
    assert (heads.num_attention_heads, heads.num_kv_heads, full) == (7, 1, s)
    # eager's s² scores: the whole sequence for 1/sp of the heads is sp× the naive local count
    eager = AttentionImpl.eager
    naive = A.attention_core_saved_bytes_per_sequence(arch, eager, s // 2)
    assert A.attention_core_saved_bytes_per_sequence(arch, eager, s // 2, 2) > 1.9 * naive
    assert A.ulysses_all_to_all_bytes(arch, 2, 1000, 1) == 0
    assert A.ulysses_all_to_all_bytes(arch, 2, 1000, 2) == A.ULYSSES_ALL_TO_ALL_COPIES * 2 * 28 * 128 * 2 * 1000


def test_micro_batch_constructors() -> None:
    assert padded_micro_batch(4, 1000, 300).num_tokens == 4000
    assert padded_micro_batch(4, 1000, 300, sp=4).row_len == 250
    assert packed_micro_batch(4001, 4, sp=2).row_len == 2001


# --- AdamW states at the first optimizer step ---------------------------------------------------


def test_torch_optimizer_states_come_at_the_first_step_deepspeed_at_init() -> None:
    fsdp = plan_of(merged(BASE_SPEC, **{"distribution.strategy": "fsdp"}))
    assert component(fsdp, "load", "policy.optimizer_states") == 0
    assert component(fsdp, "optimizer", "policy.optimizer_states") > 0
    zero3 = plan_of(BASE_SPEC)
    assert component(zero3, "load", "policy.optimizer_states") == component(zero3, "optimizer", "policy.optimizer_states") > 0


def test_a_phase_broken_only_by_lazy_states_first_breaks_in_step_two() -> None:
    from oomless.memory.components import Category, Component

    phase = PhaseMemory("rollout", (Component("policy.optimizer_states", Category.OPT, 60), Component("vllm.kv_cache", Category.OTHER, 50)))
    assert _first_step(phase, 100, ("policy.optimizer_states",)) == 2
    assert _first_step(phase, 40, ("policy.optimizer_states",)) == 1
    assert _first_step(phase, 100, ()) == 1


# --- the old log-prob pass ---------------------------------------------------------------------


def test_trl_importance_sampling_adds_a_logprob_pass_with_beta_zero() -> None:
    base = merged(BASE_SPEC, kl_beta=0.0)
    names = lambda plan: [p.name for p in plan.devices[0].phases]  # noqa: E731
    assert "logprob" not in names(plan_of(base))
    with_pass = plan_of(merged(base, **{"rollout.recompute_old_logprobs": True}))
    assert "logprob" in names(with_pass)
    assert component(with_pass, "logprob", "logits") > 0


# --- the chance per step -----------------------------------------------------------------------


def test_knots_give_a_step_lower_bound() -> None:
    k = knots(1000, 200, {90: 500, 99: 800})
    assert k.points == ((200, 0.5), (500, 0.9), (800, 0.99), (1000, 1.0))
    assert k.level(499) == 0.5 and k.level(500) == 0.9 and k.level(100) == 0.0
    # the longest of m draws is at most v with even odds once F̲(v)^m ≥ 1/2: 0.9⁴ = 0.66, 0.9⁷ = 0.48
    assert k.median_of_longest(1) == 200 and k.median_of_longest(4) == 500 and k.median_of_longest(7) == 800
    assert k.median_of_longest(100) == 1000
    assert Knots(((10, 1.0),)).median_of_longest(8) == 10


def test_batch_risk_formula() -> None:
    spec = parse_spec(merged(BASE_SPEC, **{"lengths.typical_completion_tokens": 100,
                                          "lengths.completion_percentiles": {99: 300}, "schedule.max_steps": 50}))
    arch = load_model(spec.model)
    risk = batch_risk(spec, arch, 16, lambda x: x.completion_tokens <= 300)
    assert risk.per_step == pytest.approx(1 - 0.99**16)
    assert risk.per_run == pytest.approx(1 - 0.99 ** (16 * 50))
    assert risk.fitting_lengths == DataLengths(512, 300, None, 1)
    nothing = batch_risk(spec, arch, 16, lambda x: False)
    assert nothing.per_step == 1.0 and nothing.fitting_lengths is None
    padded_budget = parse_spec(merged(BASE_SPEC, **{"batch.max_tokens_per_gpu": 4096}))
    assert batch_risk(padded_budget, arch, 16, lambda x: True).per_step is None
    packed_budget = parse_spec(merged(BASE_SPEC, **{"batch.padding_free": True, "batch.max_tokens_per_gpu": 4096}))
    assert batch_risk(packed_budget, arch, 16, lambda x: True).per_step == 0  # every length fits (tests/planner/test_packed_risk.py)


def test_typical_plan_uses_the_median_of_the_longest_member() -> None:
    plan = plan_of(merged(BASE_SPEC, **{"lengths.typical_completion_tokens": 100, "batch.micro_batch_size": 8,
                                        "lengths.completion_percentiles": {90: 200, 99: 300}}))
    # 8 sequences: 0.9⁸ = 0.43 < 1/2 ≤ 0.99⁸, so the longest of eight is at most p99 with even odds
    assert plan.typical is not None and plan.typical.shape.lengths.completion_tokens == 300
    assert plan_of(BASE_SPEC).typical is None  # no distribution, no budget: the worst is the typical


# --- reference-only offload ------------------------------------------------------------------


def test_reference_offload_moves_its_shards_to_pinned_host_memory() -> None:
    fsdp = merged(BASE_SPEC, **{"distribution.strategy": "fsdp"})
    on_gpu = plan_of(fsdp)
    on_cpu = plan_of(merged(fsdp, **{"distribution.offload_reference_params": True}))
    assert component(on_gpu, "load", "reference.weights") > 0
    assert component(on_cpu, "load", "reference.weights") == 0
    assert phase_peak(on_cpu, "logprob") < phase_peak(on_gpu, "logprob")
    host = {c.name: c.num_bytes for p in on_cpu.host.phases if p.name == "train" for c in p.components}
    from oomless.spec.run import Role

    # every one of the 4 ranks pins at least its shard of the bf16 reference
    assert host["offload.reference.params_pinned"] >= 4 * on_gpu.models[Role.reference].weights


def test_reference_offload_needs_sharded_weights() -> None:
    from oomless.errors import InputError

    with pytest.raises(InputError, match="offload_reference_params needs strategy zero3 or fsdp"):
        parse_spec(merged(BASE_SPEC, **{"distribution.strategy": "zero2", "distribution.offload_reference_params": True}))
