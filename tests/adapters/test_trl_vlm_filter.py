"""TRL's VLM example scripts drop images of 512 px or more a side (`filter_big_images`): the
reader caps the training images there (`vision.data_max_pixels`), only for those scripts."""

from __future__ import annotations

import pytest

from tests.adapters.test_trl import from_files

LAUNCH = ("accelerate launch --num_processes 8 examples/scripts/{script} "
          "--model_name_or_path Qwen/Qwen2.5-VL-3B-Instruct --output_dir out --max_completion_length 256 "
          "--use_vllm --vllm_mode colocate\n")


@pytest.mark.parametrize("script", ["grpo_vlm.py", "rloo_vlm.py"])
def test_the_example_scripts_keep_images_under_512_px(script: str) -> None:
    spec, _, notes = from_files({"launch.sh": LAUNCH.format(script=script)})
    assert spec["vision"] == {"data_max_pixels": 511 * 511}
    assert any("filter_big_images" in n for n in notes)


def test_another_script_keeps_the_processor_limit() -> None:
    spec, _, _ = from_files({"launch.sh": LAUNCH.format(script="my_vlm_grpo.py")})
    assert "data_max_pixels" not in spec.get("vision", {})


def test_a_text_model_gets_no_vision_section() -> None:
    spec, _, _ = from_files({"launch.sh": LAUNCH.format(script="grpo_vlm.py").replace("Qwen2.5-VL-3B-Instruct", "Qwen2.5-0.5B-Instruct")})
    assert "vision" not in spec
