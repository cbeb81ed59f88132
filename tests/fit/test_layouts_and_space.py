"""Layouts keep the GPU count, batch splits keep the maths, math moves exist only when allowed."""

from __future__ import annotations

from fractions import Fraction

from oomless.catalog.resolve import load_model
from oomless.fit.layouts import batch_splits, layouts
from oomless.fit.overrides import apply, changed
from oomless.fit.space import math_levels
from oomless.spec.load import load_run, parse_spec
from oomless.spec.run import Role, RolloutEngine
from tests.helpers import BASE_SPEC, EXAMPLES, merged


def _spec(**overrides: object):
    return parse_spec(merged(BASE_SPEC, **overrides))


def test_batch_splits_keep_completions_per_step_and_per_rollout() -> None:
    spec = _spec(**{"batch.micro_batch_size": 2, "batch.gradient_accumulation_steps": 8, "batch.steps_per_generation": 16})
    splits = batch_splits(spec, ranks_in=4, ranks_out=2)
    assert splits, "2 ranks divide 64 completions"
    for s in splits:
        assert 2 * s["batch.micro_batch_size"] * s["batch.gradient_accumulation_steps"] == 4 * 2 * 8
        assert s["batch.steps_per_generation"] == 2 * s["batch.gradient_accumulation_steps"]
    assert [s["batch.micro_batch_size"] for s in splits] == sorted((s["batch.micro_batch_size"] for s in splits), reverse=True)


def test_a_rank_count_that_does_not_divide_the_batch_is_refused() -> None:
    spec = _spec(**{"batch.micro_batch_size": 2, "batch.gradient_accumulation_steps": 8})
    assert batch_splits(spec, ranks_in=4, ranks_out=3) == []  # 64 completions over 3 ranks


def test_num_generations_scale_keeps_the_prompts_per_step() -> None:
    spec = _spec(**{"batch.micro_batch_size": 2, "batch.gradient_accumulation_steps": 8, "batch.num_generations": 8})
    splits = batch_splits(spec, 4, 4, Fraction(4, 8))
    assert {s["batch.micro_batch_size"] * s["batch.gradient_accumulation_steps"] for s in splits} == {8}


def test_layouts_keep_the_total_gpu_count_and_start_with_the_input() -> None:
    run = load_run(EXAMPLES / "seeds" / "s1-before.yaml")
    found = layouts(run.spec)
    assert found[0].overrides == {}
    for layout in found:
        assert sum(g.gpus_per_node for g in layout.groups) == run.spec.hardware.gpus_per_node
    assert len({layout.groups for layout in found}) == len(found)
    engines = {apply(run.spec, layout.overrides).rollout.engine for layout in found}
    assert engines == {RolloutEngine.hf, RolloutEngine.vllm_colocate, RolloutEngine.vllm_separate}


def test_hf_generate_runs_may_move_to_vllm_and_generate_layouts_hold_no_engine() -> None:
    run = load_run(EXAMPLES / "seeds" / "s3-before.yaml")
    found = layouts(run.spec)
    assert found[0].label == "as given" and not any(Role.vllm in g.roles for g in found[0].groups)
    assert any(Role.vllm in g.roles for layout in found[1:] for g in layout.groups)
    for layout in found:
        spec = apply(run.spec, layout.overrides)
        assert (spec.rollout.engine == RolloutEngine.hf) == (layout.vllm_gpus_per_node == 0)


def test_math_moves_only_with_allow() -> None:
    spec = _spec(**{"finetune.method": "lora", "finetune.lora_rank": 16, "kl_beta": 0.04})
    arch = load_model(spec.model)
    assert len(math_levels(spec, arch, frozenset())) == 1
    levels = math_levels(spec, arch, frozenset({"lora_rank"}))
    moved = {path for level in levels[1:] for setting in level for path in setting.overrides}
    assert moved == {"finetune.lora_rank"}
    beta = math_levels(spec, arch, frozenset({"beta"}))
    assert beta[1][0].overrides == {"kl_beta": 0.0}


def test_apply_copies_and_changed_lists_only_differences() -> None:
    spec = _spec()
    new = apply(spec, {"distribution.strategy": "zero2", "gradient_checkpointing": spec.gradient_checkpointing})
    assert spec.distribution.strategy.value == "zero3"  # the input is untouched
    assert changed(spec, {"distribution.strategy": "zero2", "gradient_checkpointing": spec.gradient_checkpointing}) == {
        "distribution.strategy": ("zero3", "zero2")}
    assert new.distribution.strategy == "zero2"


def test_hf_generate_is_a_fallback_for_vllm_runs_only() -> None:
    vllm_run = load_run(EXAMPLES / "seeds" / "s1-before.yaml")
    assert [layout.fallback for layout in layouts(vllm_run.spec)].count(True) == 1
    assert all(apply(vllm_run.spec, layout.overrides).rollout.engine == RolloutEngine.hf
               for layout in layouts(vllm_run.spec) if layout.fallback)
    hf_run = load_run(EXAMPLES / "seeds" / "s3-before.yaml")
    assert not any(layout.fallback for layout in layouts(hf_run.spec))


def test_token_budgets_are_tried_only_where_the_run_has_one_and_never_below_a_sequence() -> None:
    from oomless.fit.space import token_budgets, work_factor

    plain = _spec()
    assert token_budgets(plain, 1024) == [None]
    budgeted = _spec(**{"batch.max_tokens_per_gpu": 16384})
    budgets = token_budgets(budgeted, 3000)
    assert budgets[0] == 16384 and budgets == [16384, 8192, 4096, 3000]
    splits = batch_splits(budgeted, 4, 4)
    work = work_factor(budgeted, splits, 3000)
    products = {o.overrides["batch.micro_batch_size"] * o.overrides["batch.gradient_accumulation_steps"] for o in work.options}
    assert products == {budgeted.batch.micro_batch_size * budgeted.batch.gradient_accumulation_steps}
    assert {o.overrides["batch.max_tokens_per_gpu"] for o in work.options} == set(budgets)
    # a smaller budget carries the micro-batch size it derives (budget // sequence), where the step allows it
    for o in work.options:
        if o.overrides["batch.max_tokens_per_gpu"] != 16384 and o.overrides["batch.max_tokens_per_gpu"] // 3000 in \
                {x["batch.micro_batch_size"] for x in splits}:
            assert o.overrides["batch.micro_batch_size"] == o.overrides["batch.max_tokens_per_gpu"] // 3000


def test_length_cuts_keep_budgets_of_whole_padded_rows() -> None:
    from oomless.fit.space import math_levels

    budgeted = _spec(**{"lengths.max_prompt_tokens": 1000, "lengths.max_completion_tokens": 3000,
                        "batch.max_tokens_per_gpu": 8000, "batch.logprob_max_tokens_per_gpu": 10000})
    cuts = [s.overrides for level in math_levels(budgeted, load_model(budgeted.model), frozenset({"lengths"})) for s in level
            if "lengths.max_completion_tokens" in s.overrides]
    first = cuts[0]
    new = 1000 + first["lengths.max_completion_tokens"]
    assert first["batch.max_tokens_per_gpu"] == 2 * new  # two rows of 4,000 → two rows of the new length
    assert "batch.logprob_max_tokens_per_gpu" not in first  # 10,000 is not whole rows: kept as written
