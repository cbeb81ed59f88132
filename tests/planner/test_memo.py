"""The planner's memos (`oomless.planner.memo`) never change a plan: a spec planned after
another one, with the memos holding that one's steps, gives the plan it gives with every memo
empty. A step whose key misses a field it reads would hand the earlier spec's answer on."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oomless.planner import memo
from tests.helpers import BASE_SPEC, merged, plan_of
from tests.planner.test_properties import specs

PROFILE = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


TARGETS = st.sampled_from(["all-linear", ["q_proj", "v_proj"], ["q_proj", "k_proj", "v_proj", "o_proj"]])


@st.composite
def specs_with_targets(draw: st.DrawFn) -> dict:
    """`specs()` with LoRA targets by name as well (a list: a section that cannot be hashed)."""
    return merged(draw(specs()), **{"finetune.lora_targets": draw(TARGETS)})


@PROFILE
@given(specs_with_targets(), specs_with_targets())
def test_a_plan_is_the_same_with_warm_and_empty_memos(first: dict, second: dict) -> None:
    plan_of(first)
    warm = plan_of(second)
    memo.clear_all()
    cold = plan_of(second)
    assert warm == cold


def test_clear_all_empties_every_memo() -> None:
    from oomless.planner.roles import _ROLE_MODELS

    plan_of(BASE_SPEC)
    assert _ROLE_MODELS._table
    memo.clear_all()
    assert not _ROLE_MODELS._table


def test_a_section_holding_a_list_is_planned_uncached() -> None:
    """Frozen pydantic sections hash by value; a list field (LoRA targets by name) cannot be
    hashed, and the step is then computed without its memo."""
    data = merged(BASE_SPEC, **{"finetune.method": "lora", "finetune.lora_targets": ["q_proj", "v_proj"]})
    assert plan_of(data) == plan_of(data)
    everything = plan_of(merged(data, **{"finetune.lora_targets": "all-linear"}))
    assert plan_of(data).devices[0].peak_bytes < everything.devices[0].peak_bytes
