"""Image tokens of the towers added for issue 12, each derived by hand from its processor:
Qwen2-VL and Qwen3-VL (smart_resize with factor patch × merge), HF InternVL (tiles), LLaVA-1.5
(CLIP 336/14 patch grid), Idefics3/SmolVLM (up to 4 × 4 tiles + a global image)."""

from __future__ import annotations

import pytest

from oomless.catalog.models import arch_from_config
from oomless.catalog.resolve import load_model
from oomless.memory.vision_tokens import max_image_patches, max_image_tokens, num_image_patches, num_image_tokens

transformers = pytest.importorskip("transformers")


def _arch(model_type: str, **vision: object):
    config = transformers.AutoConfig.for_model(model_type).to_dict()
    config["vision_config"].update(vision)
    return arch_from_config(config, model_type)


def test_qwen3_vl_resizes_with_32_pixel_factor() -> None:
    v = load_model("Qwen/Qwen3-VL-8B-Instruct").vision
    # 640×480 → 640×480 are multiples of 32 already: 20 × 15 = 300 tokens, 4 patches each
    assert num_image_tokens(v, 480, 640) == 300
    assert num_image_patches(v, 480, 640) == 1200
    assert max_image_tokens(v, max_pixels=1024 * 1024) == 1024


def test_qwen2_vl_uses_the_qwen2_5_rule() -> None:
    arch = _arch("qwen2_vl")
    assert num_image_tokens(arch.vision, 476, 644) == 17 * 23


def test_llava_clip_336_is_576_tokens_and_577_patches() -> None:
    arch = _arch("llava", image_size=336, patch_size=14)
    assert max_image_tokens(arch.vision) == 576 and num_image_tokens(arch.vision, 10, 4000) == 576
    assert max_image_patches(arch.vision) == 577  # the class token goes through the tower


def test_idefics3_tiles_plus_global_image() -> None:
    arch = _arch("idefics3", image_size=364, patch_size=14)
    per_tile = (364 // 14) ** 2 // arch.vision.spatial_merge_size ** 2  # 26² / 2² = 169
    assert per_tile == 169
    assert num_image_tokens(arch.vision, 300, 300) == per_tile  # one tile, no global image
    assert num_image_tokens(arch.vision, 728, 364) == 3 * per_tile  # 2 × 1 tiles + global
    assert num_image_tokens(arch.vision, 5000, 5000) == 17 * per_tile  # resized to 4 × 364: 16 + 1
    assert max_image_tokens(arch.vision) == 17 * per_tile
    assert max_image_patches(arch.vision) == 17 * 26 * 26


def test_hf_internvl_tiles_like_the_remote_code() -> None:
    arch = _arch("internvl")
    assert max_image_tokens(arch.vision, max_tiles=12) == 13 * 256
