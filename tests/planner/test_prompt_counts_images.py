"""`lengths.max_prompt_counts_images`: a prompt bound that holds the image tokens (verl, EasyR1)
caps the largest image a prompt can carry and the sequence at the bound."""

from __future__ import annotations

import pytest

from oomless.planner import vision_terms as VT
from tests.helpers import BASE_SPEC, merged, plan_of

VLM = merged(BASE_SPEC, model="Qwen/Qwen2.5-VL-3B-Instruct", **{
    "vision.images_per_prompt": 1, "vision.max_pixels": 4194304, "lengths.max_prompt_tokens": 2048,
})


def _plans(**overrides):
    return plan_of(merged(VLM, **overrides)), plan_of(merged(VLM, **{**overrides, "lengths.max_prompt_counts_images": True}))


@pytest.mark.parametrize("images, bound", [(1, 2048), (2, 2048), (1, 300), (3, 9000)])
def test_images_fit_inside_the_bound(images: int, bound: int) -> None:
    on_top, inside = _plans(**{"vision.images_per_prompt": images, "lengths.max_prompt_tokens": bound})
    assert on_top.shape.prompt_len == bound + on_top.shape.image_tokens_per_prompt
    assert inside.shape.prompt_len == bound  # images and text together
    assert 0 < inside.shape.image_tokens_per_prompt <= bound - 1
    assert inside.shape.image_tokens_per_prompt <= on_top.shape.image_tokens_per_prompt
    assert inside.shape.seq_len == bound + inside.shape.completion_len


def test_a_bound_larger_than_the_images_changes_nothing_but_the_sum() -> None:
    on_top, inside = _plans(**{"lengths.max_prompt_tokens": 60000})  # 4 MP is 5,346 tokens < 60,000
    assert inside.shape.image_tokens_per_prompt == on_top.shape.image_tokens_per_prompt


def test_the_tower_sees_the_capped_image_and_vllms_profile_does_not() -> None:
    on_top, inside = _plans()
    def part(plan, phase: str, prefix: str) -> int:
        group = next(g for g in plan.devices if g.role == "train")
        p = next(p for p in group.phases if p.name == phase)
        return sum(c.num_bytes for c in p.components if c.name.startswith(prefix))
    assert 0 < part(inside, "train", "vision") < part(on_top, "train", "vision")
    assert part(inside, "rollout", "vllm.profile") == part(on_top, "rollout", "vllm.profile")
    cap = VT.prompt_image_area_cap(inside.spec, inside.arch)
    assert cap is not None and cap < 4194304 and VT.prompt_image_area_cap(on_top.spec, on_top.arch) is None
