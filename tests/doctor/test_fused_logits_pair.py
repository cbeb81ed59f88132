"""The doctor's fused-loss fix sets Liger's model kernels with it (`FUSED_LOGITS.also`): ms-swift's
and TRL's `use_liger_kernel` switch both, so the fix is planned (and shown) as the run it makes
(its write-back: tests/adapters/test_liger_writeback.py)."""

from __future__ import annotations

from oomless.doctor.fix_check import _candidates, check_fixes
from oomless.doctor.fixes import FUSED_LOGITS, phase_fixes, realise
from oomless.fit.overrides import apply
from oomless.planner.plan import make_plan
from oomless.spec.load import parse_spec, resolve
from oomless.spec.run import LogitsMode

BASE = {"model": "Qwen/Qwen2.5-1.5B-Instruct", "hardware": {"gpu": "A100-40GB", "gpus_per_node": 1},
        "distribution": {"strategy": "ddp"}, "finetune": {"method": "lora"}, "gradient_checkpointing": False,
        "batch": {"micro_batch_size": 8}, "lengths": {"max_prompt_tokens": 1024, "max_completion_tokens": 2048},
        "rollout": {"engine": "hf"}}


def test_the_train_phase_offers_the_fused_loss_with_the_model_kernels() -> None:
    assert FUSED_LOGITS in phase_fixes("train", None)
    assert FUSED_LOGITS.keeps_maths and ("liger_kernels", True) in FUSED_LOGITS.also
    assert "liger_kernels true" in FUSED_LOGITS.change


def test_realised_against_a_spec_the_change_names_each_field_that_moves() -> None:
    fix = realise(FUSED_LOGITS, parse_spec(BASE))
    assert fix is not None and fix.change == "full_bf16 → fused, liger_kernels false → true"
    kernels = realise(FUSED_LOGITS, parse_spec({**BASE, "liger_kernels": True}))  # TRL >= 1.15 use_liger_kernel
    assert kernels is not None and kernels.change == "full_bf16 → fused"
    assert _candidates(kernels, parse_spec({**BASE, "liger_kernels": True})) == [{"logits": "fused"}]
    assert realise(FUSED_LOGITS, parse_spec({**BASE, "logits": "fused"})) is None  # has the loss (verl)


def test_the_checked_fix_is_planned_as_the_pair() -> None:
    run = resolve(parse_spec(BASE))
    (checked,) = check_fixes((realise(FUSED_LOGITS, run.spec),), run, 0)
    assert checked.overrides == {"logits": "fused", "liger_kernels": True}
    assert checked.spec.logits == LogitsMode.fused and checked.spec.liger_kernels
    pair = make_plan(checked.spec, run.arch, run.gpu, run.archs)
    assert checked.peak_bytes == max(d.peak_bytes for d in pair.devices)
    alone = make_plan(apply(run.spec, {"logits": LogitsMode.fused}), run.arch, run.gpu, run.archs)
    assert checked.peak_bytes < max(d.peak_bytes for d in alone.devices)  # Qwen2.5: Liger's kernels keep less
    assert "liger_kernels false → true" in checked.fix.change
