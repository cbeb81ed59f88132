"""`vision.data_max_pixels`: the data's own image filter caps the training side's images; vLLM's
profile keeps sizing them by the processor's max_pixels (planner/vision_terms.py `_limits`)."""

from __future__ import annotations

import pytest

from oomless.errors import InputError
from oomless.planner import vision_terms as VT
from oomless.spec.load import parse_spec, resolve
from tests.helpers import plan_of

BASE = {"model": "Qwen/Qwen2.5-VL-3B-Instruct", "hardware": {"gpu": "A100-80GB", "gpus_per_node": 8},
        "batch": {"micro_batch_size": 2, "num_generations": 8},
        "lengths": {"max_prompt_tokens": 1024, "max_completion_tokens": 1024},
        "rollout": {"engine": "vllm_colocate", "gpu_memory_utilization": 0.4}}


def test_training_images_are_capped_by_the_data_and_vllm_profile_is_not() -> None:
    capped = {**BASE, "vision": {"images_per_prompt": 1, "data_max_pixels": 511 * 511}}
    spec, plain = parse_spec(capped), parse_spec({**BASE, "vision": {"images_per_prompt": 1}})
    arch = resolve(spec).arch
    assert VT.image_tokens_per_prompt(spec, arch) < VT.image_tokens_per_prompt(plain, arch) / 40  # 12.8 MP → 0.26 MP
    assert VT.image_tokens_per_prompt(spec, arch) <= 511 * 511 // 28**2 + 1
    a, b = plan_of(capped), plan_of({**BASE, "vision": {"images_per_prompt": 1}})
    assert a.engine.activation_bytes == b.engine.activation_bytes  # the engine profiles the processor's limit
    train = {p.name: p.peak_bytes for g in a.devices for p in g.phases}["train"]
    assert train < {p.name: p.peak_bytes for g in b.devices for p in g.phases}["train"]


def test_typical_images_cannot_exceed_the_data_cap() -> None:
    with pytest.raises(InputError, match="data_max_pixels"):
        parse_spec({**BASE, "vision": {"data_max_pixels": 100_000, "typical_pixels": 200_000}})
