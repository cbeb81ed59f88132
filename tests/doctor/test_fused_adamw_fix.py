"""An out-of-memory in the optimizer step of a torch AdamW that runs foreach (DDP/FSDP default,
HF `adamw_torch`) is first offered the fused kernel, which keeps the maths and drops the step's
copy of the parameters; where the step has no such copy the fix is not offered."""

from __future__ import annotations

from oomless.doctor.fixes import FUSED_ADAMW, phase_fixes, realise
from oomless.spec.load import parse_spec

BASE = {"model": "Qwen/Qwen2.5-0.5B-Instruct", "hardware": {"gpu": "H100", "gpus_per_node": 1},
        "distribution": {"strategy": "ddp"}}


def test_the_optimizer_phase_offers_fused_adamw_first() -> None:
    assert phase_fixes("optimizer", None)[0] is FUSED_ADAMW
    assert FUSED_ADAMW.keeps_maths


def test_realised_only_where_the_step_holds_temporaries() -> None:
    fix = realise(FUSED_ADAMW, parse_spec(BASE))
    assert fix is not None and fix.change == "foreach → fused"
    loop = realise(FUSED_ADAMW, parse_spec({**BASE, "optimizer_implementation": "for_loop"}))
    assert loop is not None and loop.change == "for_loop → fused"
    assert realise(FUSED_ADAMW, parse_spec({**BASE, "optimizer_implementation": "fused"})) is None
    assert realise(FUSED_ADAMW, parse_spec({**BASE, "distribution": {"strategy": "zero3"}})) is None  # DeepSpeed's own
    assert realise(FUSED_ADAMW, parse_spec({**BASE, "optimizer": "adamw_8bit"})) is None
