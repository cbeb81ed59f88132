"""transformers >= 5.0 gradient checkpointing hooks a frozen vision tower's patch embedding to
require grad (`planner/vision_terms.py` `frozen_tower_keeps_activations`): the tower that does
not train then keeps what a trained, checkpointed tower keeps. Before 5.0 (and when the spec
names no release) it is a no-grad forward, and the spec loader warns."""

from __future__ import annotations

import pytest

from oomless.errors import InputError
from oomless.memory import vision as VZ
from oomless.planner import vision_terms as VT
from oomless.spec.load import parse_spec, resolve
from tests.helpers import plan_of

BASE = {"model": "Qwen/Qwen2.5-VL-3B-Instruct", "hardware": {"gpu": "H100", "gpus_per_node": 8},
        "batch": {"micro_batch_size": 2, "num_generations": 8}, "rollout": {"engine": "hf"},
        "lengths": {"max_prompt_tokens": 1024, "max_completion_tokens": 1024},
        "vision": {"images_per_prompt": 1, "max_pixels": 1_003_520, "freeze_tower": True}}


def vision_train_bytes(**update) -> int:
    plan = plan_of({**BASE, **update})
    train = next(p for g in plan.devices if g.role == "train" for p in g.phases if p.name == "train")
    return next(c.num_bytes for c in train.components if c.name == "vision.activations")


def test_before_5_0_and_unknown_plan_a_no_grad_tower() -> None:
    assert vision_train_bytes() == vision_train_bytes(transformers_version="4.57.1") == vision_train_bytes(
        transformers_version="4.49")


@pytest.mark.parametrize("version", ["5.0.0", "5.2", "5.24.0"])
def test_from_5_0_a_frozen_checkpointed_tower_keeps_block_inputs(version: str) -> None:
    frozen = vision_train_bytes(transformers_version=version)
    assert frozen > vision_train_bytes(transformers_version="4.57.1")
    spec = parse_spec({**BASE, "transformers_version": version})
    arch = resolve(spec).arch
    patches = VT.patches_per_image(spec, arch)
    images = 2  # the micro-batch's sequences, one image each
    saved = (VZ.vision_training_saved_bytes(arch.vision, patches, images, spec.attention, True)
             + VZ.merger_saved_bytes(arch.vision, patches, images))
    assert frozen == max(saved, vision_train_bytes(transformers_version="4.57.1"))
    # the same activations a trained tower keeps (its weights' gradients and states come on top)
    trained = {**BASE["vision"], "freeze_tower": False}
    assert frozen == vision_train_bytes(transformers_version=version, vision=trained)


def test_without_checkpointing_or_with_a_trained_tower_the_release_changes_nothing() -> None:
    assert vision_train_bytes(gradient_checkpointing=False, transformers_version="5.2") == vision_train_bytes(
        gradient_checkpointing=False, transformers_version="4.49")
    trained = {**BASE["vision"], "freeze_tower": False}
    assert vision_train_bytes(vision=trained, transformers_version="5.2") == vision_train_bytes(
        vision=trained, transformers_version="4.49")


def test_lora_keeps_the_tower_hooked_as_well() -> None:
    lora = {"method": "lora", "lora_rank": 16}
    assert vision_train_bytes(finetune=lora, transformers_version="5.2") > vision_train_bytes(
        finetune=lora, transformers_version="4.49")


def test_the_loader_warns_only_where_the_release_decides() -> None:
    def warned(**update) -> bool:
        run = resolve(parse_spec({**BASE, **update}))
        return any("transformers_version unset" in w for w in run.warnings)

    assert warned()
    assert not warned(transformers_version="5.2")
    assert not warned(vision={**BASE["vision"], "freeze_tower": False})
    assert not warned(gradient_checkpointing=False)
    assert not warned(vision={**BASE["vision"], "images_per_prompt": 0})


@pytest.mark.parametrize("bad", ["five", "5.x", "", "1" * 41])
def test_a_bad_version_is_refused_naming_the_field(bad: str) -> None:
    with pytest.raises(InputError, match="transformers_version"):
        parse_spec({**BASE, "transformers_version": bad})
