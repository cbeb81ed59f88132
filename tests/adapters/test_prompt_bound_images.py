"""verl and EasyR1 count the image tokens in max_prompt_length: their readers say so
(`lengths.max_prompt_counts_images`), and their writers turn a spec whose images come on top of
its text bound into the bound that plans the same prompt."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomless.planner.plan import make_plan
from oomless.spec.load import resolve
from tests.adapters.native_helpers import round_trip, seed_spec

HW = {"gpu": "A100-40GB", "host_ram_gib": 760}


@pytest.mark.parametrize("framework", ["easyr1", "verl"])
@pytest.mark.parametrize("text", [512, 2048])
def test_images_on_top_of_the_text_bound_read_back_as_the_same_prompt(tmp_path: Path, framework: str, text: int) -> None:
    data = seed_spec("s2-before.yaml").model_dump(mode="json")
    data["lengths"].update(max_prompt_counts_images=False, max_prompt_tokens=text)
    if framework == "verl":  # verl's async rollout: vLLM in its own processes, sleep level 2 (its writer's rules)
        data["rollout"].update(sleep_level=2, engine_in_trainer_process=False)
        data["distribution"]["offload_reference_params"] = data["kl_beta"] > 0  # verl keeps its reference on the CPU
        data["logits_temperature"] = "none"  # verl 0.9.1 at its default temperature 1 leaves the logits unscaled
    spec = type(seed_spec("s2-before.yaml")).model_validate(data)
    back = next(s for s in round_trip(framework, spec, tmp_path, **HW))
    plans = []
    for s in (spec, back):
        run = resolve(s)
        plans.append(make_plan(run.spec, run.arch, run.gpu, run.archs))
    images = plans[0].shape.image_tokens_per_prompt
    assert images > 0 and back.lengths.max_prompt_counts_images
    assert back.lengths.max_prompt_tokens == text + images
    assert (plans[1].shape.prompt_len, plans[1].shape.image_tokens_per_prompt) == (text + images, images)
