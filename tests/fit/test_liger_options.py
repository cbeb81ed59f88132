"""`fit` proposes Liger's fused loss only with Liger's model kernels (`fit.space.logits_kernels`):
the pair that ms-swift's and TRL's `use_liger_kernel` switch, so the answer plans what its written
file reads back as (the write-back itself: tests/adapters/test_liger_writeback.py)."""

from __future__ import annotations

import pytest

from oomless.fit.layouts import batch_splits
from oomless.fit.overrides import apply, changed
from oomless.fit.space import logits_kernels, work_factor
from oomless.planner.plan import make_plan
from oomless.spec.load import parse_spec, resolve
from oomless.spec.run import LogitsMode
from tests.helpers import BASE_SPEC, merged

INPUTS = [
    {},                                                   # full bf16 logits, no Liger
    {"liger_kernels": True, "logits": "chunked_head"},    # TRL >= 1.15 use_liger_kernel
    {"logits": "fused", "liger_kernels": True},           # ms-swift / TRL 0.25-1.14 use_liger_kernel
    {"logits": "fused"},                                  # verl use_fused_kernels without use_liger
    {"logits": "full_fp32"},
]


def _spec(**overrides: object):
    return parse_spec(merged(BASE_SPEC, **overrides))


@pytest.mark.parametrize("given", INPUTS, ids=lambda g: "-".join(f"{k}={v}" for k, v in g.items()) or "plain")
def test_the_fused_loss_is_offered_only_with_the_model_kernels(given: dict) -> None:
    spec = _spec(**given)
    options = logits_kernels(spec)
    assert not changed(spec, options[0])  # the input first, as it is
    assert all(set(o) == {"logits", "liger_kernels"} for o in options)  # one field set per factor (fit.probe)
    assert len({tuple(sorted((k, str(v)) for k, v in o.items())) for o in options}) == len(options)
    for o in options[1:]:
        if o["logits"] == LogitsMode.fused:
            assert o["liger_kernels"] is True
    assert any(o["logits"] == LogitsMode.fused for o in options)
    assert (LogitsMode.full_fp32 in {o["logits"] for o in options}) is (spec.logits == LogitsMode.full_fp32)


def test_leaving_a_fused_pair_offers_the_kernels_kept_and_dropped() -> None:
    spec = _spec(logits="fused", liger_kernels=True)
    for mode in (LogitsMode.full_bf16, LogitsMode.chunked):
        assert {o["liger_kernels"] for o in logits_kernels(spec) if o["logits"] == mode} == {True, False}
    verl = _spec(logits="fused")  # fused without Liger's kernels: nothing to drop
    assert all(o["liger_kernels"] is False for o in logits_kernels(verl))


def test_the_work_factor_never_holds_the_fused_loss_alone_unless_the_input_does() -> None:
    spec = _spec()
    work = work_factor(spec, batch_splits(spec, 4, 4), 1024)
    fused = [o.overrides for o in work.options if o.overrides["logits"] == LogitsMode.fused]
    assert fused and all(o["liger_kernels"] is True for o in fused)
    assert all(len(changed(spec, o)) >= 2 for o in fused)  # the pair is two changes, each counted


def test_the_pair_plans_no_more_than_the_fused_loss_alone_and_less_on_a_family_liger_patches() -> None:
    """Why the pair matters: on Qwen2.5 (Liger's default RMSNorm/SwiGLU) the model kernels keep
    less for backward, so planning the fused loss alone would overstate what use_liger_kernel runs."""
    base = _spec(gradient_checkpointing=False)
    run = resolve(base)
    alone = apply(base, {"logits": LogitsMode.fused})
    pair = apply(base, {"logits": LogitsMode.fused, "liger_kernels": True})
    train = {name: [p.peak_bytes for d in make_plan(s, run.arch, run.gpu, run.archs).devices for p in d.phases
                    if p.name == "train"] for name, s in (("alone", alone), ("pair", pair))}
    assert train["alone"] and all(p < a for p, a in zip(train["pair"], train["alone"]))
