"""Vision towers: the dimensions of an HF ``vision_config`` that memory depends on.

``vision_from_config`` reads the ``vision_config`` of a multimodal ``config.json`` (Qwen2.5-VL,
InternVL, gemma3) into a frozen ``VisionArch``; ``models.arch_from_config`` attaches it to the
``ModelArch``. Pure, no torch or transformers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import InputError
from .hf_config import FIELD, config_int

SIGLIP_NORM = "layer_norm"
"""SigLIP uses affine LayerNorm (transformers/models/siglip/modeling_siglip.py)."""


@dataclass(frozen=True)
class VisionArch:
    """A vision tower's dimensions (Qwen2.5-VL ViT, InternViT, SigLIP)."""

    model_type: str
    depth: int
    hidden_size: int
    intermediate_size: int
    num_heads: int
    patch_size: int
    out_hidden_size: int
    """Width of the language model the projector feeds."""
    in_chans: int = 3
    spatial_merge_size: int = 1
    """Patches per side merged into one LLM token: Qwen2.5-VL merger (2), InternVL pixel
    shuffle 1/downsample_ratio (2), gemma3 average pooling (4)."""
    temporal_patch_size: int = 1
    window_size: int = 0
    fullatt_block_indexes: tuple[int, ...] = ()
    image_size: int = 0
    """Fixed input side in pixels (InternViT, SigLIP); 0 for dynamic resolution."""
    qkv_bias: bool = True
    norm_type: str = "rms_norm"
    qk_normalization: bool = False
    use_head: bool = False
    """SigLIP attention-pooling head present (gemma3 sets ``vision_use_head`` false)."""
    mm_tokens_per_image: int = 0
    """LLM tokens per image for fixed-size towers (gemma3: 256); 0 when dynamic."""


def vision_from_config(config: dict[str, Any], out_hidden_size: int) -> VisionArch | None:
    """The tower of a multimodal ``config``, or None for a text-only model.

    Source: qwen2_5_vl/configuration_qwen2_5_vl.py (Qwen2_5_VLVisionConfig), InternVL
    remote code configuration_intern_vit.py, siglip/configuration_siglip.py.
    """
    vc = config.get("vision_config")
    if not isinstance(vc, dict):
        return None
    depth = vc.get("depth", vc.get("num_hidden_layers"))
    heads = vc.get("num_heads", vc.get("num_attention_heads"))
    if depth is None or heads is None or "hidden_size" not in vc:
        raise InputError(FIELD, "vision_config lacks depth/num_heads/hidden_size")
    if "downsample_ratio" in config:
        merge = round(1 / float(config["downsample_ratio"]))
    elif config.get("mm_tokens_per_image") and vc.get("image_size"):
        patches_per_side = int(vc["image_size"]) // int(vc["patch_size"])
        tokens_per_side = round(int(config["mm_tokens_per_image"]) ** 0.5)
        merge = patches_per_side // tokens_per_side
    else:
        merge = config_int(vc, "spatial_merge_size", 1)
    return VisionArch(
        model_type=str(vc.get("model_type", "")),
        depth=int(depth),
        hidden_size=int(vc["hidden_size"]),
        intermediate_size=config_int(vc, "intermediate_size"),
        num_heads=int(heads),
        patch_size=config_int(vc, "patch_size"),
        out_hidden_size=config_int(vc, "out_hidden_size", out_hidden_size),
        in_chans=config_int(vc, "in_chans", config_int(vc, "num_channels", 3)),
        spatial_merge_size=merge,
        temporal_patch_size=config_int(vc, "temporal_patch_size", 1),
        window_size=config_int(vc, "window_size"),
        fullatt_block_indexes=tuple(int(i) for i in vc.get("fullatt_block_indexes") or ()),
        image_size=config_int(vc, "image_size"),
        qkv_bias=bool(vc.get("qkv_bias", True)),
        norm_type=str(vc.get("norm_type", SIGLIP_NORM if "siglip" in vc.get("model_type", "")
                                  else "rms_norm")),
        qk_normalization=bool(vc.get("qk_normalization", False)),
        use_head=bool(vc.get("vision_use_head", False)),
        mm_tokens_per_image=config_int(config, "mm_tokens_per_image"),
    )
