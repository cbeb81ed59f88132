"""vLLM caps every sequence at an explicit max_model_len (issue 14: plan the run that happens)."""

from __future__ import annotations

from oomless.planner.batches import DataLengths
from oomless.planner.plan import make_plan
from oomless.planner.shape import engine_capped
from oomless.spec.load import parse_spec, resolve

BASE = {"model": "Qwen/Qwen2.5-7B-Instruct", "hardware": {"gpu": "A100-80GB", "gpus_per_node": 8},
        "distribution": {"strategy": "zero3"}, "batch": {"micro_batch_size": 4, "num_generations": 8},
        "lengths": {"max_prompt_tokens": 28672, "max_completion_tokens": 4096}}


def _spec(**rollout: object):
    return parse_spec({**BASE, "rollout": {"engine": "vllm_colocate", **rollout}})


def test_cap_keeps_the_longest_completion_and_fills_the_prompt() -> None:
    spec = _spec(max_model_len=8192)
    capped = engine_capped(spec, DataLengths(28672, 4096, None, 0), image_tokens=0)
    assert (capped.prompt_tokens, capped.completion_tokens) == (4096, 4096)
    # images stay whole: 3,000 image tokens leave 5,192 tokens: one of prompt text, 5,191 of completion
    capped = engine_capped(spec, DataLengths(28672, 8000, None, 1), image_tokens=3000)
    assert (capped.prompt_tokens, capped.completion_tokens) == (1, 5191)


def test_no_cap_without_max_model_len_or_with_hf_generation() -> None:
    data = DataLengths(28672, 4096, None, 0)
    assert engine_capped(_spec(), data, 0) == data
    hf = parse_spec({**BASE, "rollout": {"engine": "hf"}})
    assert engine_capped(hf, data, 0) == data


def test_the_cap_shrinks_the_train_phase() -> None:
    def train_peak(spec):
        run = resolve(spec)
        plan = make_plan(run.spec, run.arch, run.gpu, run.archs)
        return max(p.peak_bytes for g in plan.devices for p in g.phases if p.name == "train"), plan.shape.seq_len

    capped, seq = train_peak(_spec(max_model_len=8192))
    uncapped, seq_uncapped = train_peak(_spec())
    assert seq == 8192 and seq_uncapped == 32768 and capped < uncapped


def test_longest_fitting_prompt_is_the_boundary() -> None:
    import dataclasses

    from oomless.planner.plan import longest_fitting_prompt, plan_batch
    from oomless.planner.shape import limit_lengths

    run = resolve(parse_spec({**BASE, "rollout": {"engine": "hf"}, "batch": {"micro_batch_size": 8, "num_generations": 8}}))
    plan = make_plan(run.spec, run.arch, run.gpu, run.archs, explain=True)
    assert not plan.worst_fits
    longest = plan.longest_fitting_prompt_tokens
    assert longest is not None and 1 <= longest < run.spec.lengths.max_prompt_tokens
    limit = limit_lengths(run.spec)

    def fits(prompt: int) -> bool:
        return plan_batch(run.spec, run.arch, run.gpu, run.archs, dataclasses.replace(limit, prompt_tokens=prompt)).worst_fits

    assert fits(longest) and not fits(longest + 1)
    assert make_plan(run.spec, run.arch, run.gpu, run.archs).longest_fitting_prompt_tokens is None  # only on request
    tiny_gpu = parse_spec({**BASE, "hardware": {"gpu_capacity_gib": 4, "gpus_per_node": 1}, "rollout": {"engine": "hf"}})
    run = resolve(tiny_gpu)
    assert longest_fitting_prompt(run.spec, run.arch, run.gpu, run.archs) is None  # the weights alone do not fit
