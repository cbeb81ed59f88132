"""`oomless fit` may switch a torch AdamW whose step holds temporaries (foreach by default under
DDP/FSDP) to the fused kernel: same maths, one copy of the parameters less in the step."""

from __future__ import annotations

from oomless.fit.layouts import Layout
from oomless.fit.space import states_factor
from oomless.spec.load import parse_spec

BASE = {"model": "Qwen/Qwen2.5-0.5B-Instruct", "hardware": {"gpu": "H100", "gpus_per_node": 2},
        "rollout": {"engine": "hf"}, "distribution": {"strategy": "ddp"}}


def _fused_strategies(data: dict) -> set[str]:
    factor = states_factor(parse_spec(data), Layout("trainer", {}, ()), sleeping=False)
    return {o.overrides["distribution.strategy"].value for o in factor.options
            if o.overrides.get("optimizer_implementation") is not None}


def test_fused_is_offered_where_the_step_holds_temporaries() -> None:
    assert _fused_strategies(BASE) == {"ddp", "fsdp"}  # unset: foreach under DDP/FSDP, DeepSpeed's own under ZeRO
    assert _fused_strategies({**BASE, "optimizer_implementation": "foreach"}) == {"ddp", "fsdp", "zero1", "zero2", "zero3"}
    assert _fused_strategies({**BASE, "optimizer_implementation": "fused"}) == set()
    assert _fused_strategies({**BASE, "optimizer": "adamw_8bit"}) == set()
