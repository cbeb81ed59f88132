"""Vision towers: the dimensions of an HF ``vision_config`` that memory depends on.

``vision_from_config`` reads the ``vision_config`` of a multimodal ``config.json`` into a
frozen ``VisionArch``; ``models.arch_from_config`` attaches it to the ``ModelArch``. The tower
and its projector into the language model are recognised from the top-level ``model_type``
(``TOWERS``), since hub files often leave ``vision_config.model_type`` out (Qwen2-VL). Pure,
no torch or transformers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import InputError
from .hf_config import FIELD, config_int

SIGLIP = "siglip_vision_model"
CLIP = "clip_vision_model"
LAYER_NORM = "layer_norm"
"""Affine LayerNorm (weight + bias): SigLIP, CLIP, Qwen2-VL/Qwen3-VL blocks, InternViT."""

TOWERS: dict[str, tuple[str, str]] = {
    "qwen2_vl": ("qwen2_vl", "qwen_merger"),
    "qwen2_5_vl": ("qwen2_5_vl", "qwen_merger"),
    "qwen2_5_omni": ("qwen2_5_vl", "qwen_merger"),
    "qwen2_5_omni_thinker": ("qwen2_5_vl", "qwen_merger"),
    "qwen3_vl": ("qwen3_vl", "qwen_merger"),
    "qwen3_vl_moe": ("qwen3_vl", "qwen_merger"),
    "qwen3_5": ("qwen3_vl", "qwen_merger"),
    "qwen3_5_moe": ("qwen3_vl", "qwen_merger"),
    "internvl_chat": ("intern_vit_6b", "internvl_mlp1"),
    "internvl": ("internvl_vision", "internvl"),
    "gemma3": (SIGLIP, "gemma3"),
    "llava": (CLIP, "llava"),
    "idefics3": ("idefics3_vision", "idefics3"),
    "smolvlm": ("idefics3_vision", "idefics3"),
}
"""Top-level ``model_type`` → (tower, projector). Source: qwen2_vl, qwen2_5_vl, qwen3_vl,
qwen3_5 modeling (``visual`` with its merger), qwen2_5_omni/modeling_qwen2_5_omni.py
(Qwen2_5OmniVisionEncoder: the Qwen2.5-VL tower with q/k/v as three biased linears instead
of one fused ``qkv``, the same parameter count), InternVL remote code (``vision_model`` +
``mlp1``), internvl/modeling_internvl.py, gemma3/modeling_gemma3.py (SigLIP +
Gemma3MultiModalProjector), llava/modeling_llava.py (CLIP or SigLIP + LlavaMultiModalProjector),
idefics3/smolvlm modeling (Idefics3VisionTransformer + Idefics3Connector). LLaVA takes the
tower ``vision_config.model_type`` names (CLIP by default)."""
NORM_BY_TOWER = {"qwen2_5_vl": "rms_norm", "intern_vit_6b": "rms_norm",
                 "internvl_vision": LAYER_NORM}
"""Block norm when the config does not say (``norm_type``); every other tower uses LayerNorm."""
ACT_BY_TOWER = {"qwen2_vl": "quick_gelu", "qwen2_5_vl": "silu", "qwen3_vl": "gelu_pytorch_tanh",
                "intern_vit_6b": "gelu", "internvl_vision": "gelu", SIGLIP: "gelu_pytorch_tanh",
                CLIP: "quick_gelu", "idefics3_vision": "gelu_pytorch_tanh"}
"""The tower MLP's activation when ``vision_config`` does not name it: the vision config
classes' ``hidden_act`` defaults (transformers 5.24 configuration_qwen2_vl.py, qwen2_5_vl,
qwen3_vl, qwen3_5, internvl, siglip, clip, idefics3; InternViT remote configuration_intern_vit.py)."""


@dataclass(frozen=True)
class VisionArch:
    """A vision tower's dimensions and the projector that feeds the language model."""

    model_type: str
    """The tower: qwen2_vl, qwen2_5_vl, qwen3_vl, intern_vit_6b, internvl_vision,
    siglip_vision_model, clip_vision_model, idefics3_vision."""
    depth: int
    hidden_size: int
    intermediate_size: int
    num_heads: int
    patch_size: int
    out_hidden_size: int
    """Width of the language model the projector feeds."""
    in_chans: int = 3
    spatial_merge_size: int = 1
    """Patches per side merged into one LLM token: Qwen-VL merger (2), InternVL pixel
    shuffle 1/downsample_ratio (2), gemma3 average pooling (4), Idefics3 scale_factor."""
    temporal_patch_size: int = 1
    window_size: int = 0
    fullatt_block_indexes: tuple[int, ...] = ()
    image_size: int = 0
    """Fixed input side in pixels (InternViT, SigLIP, CLIP); 0 for dynamic resolution."""
    qkv_bias: bool = True
    norm_type: str = "rms_norm"
    qk_normalization: bool = False
    use_head: bool = False
    """SigLIP attention-pooling head present (gemma3 sets ``vision_use_head`` false)."""
    mm_tokens_per_image: int = 0
    """LLM tokens per image for fixed-size towers (gemma3: 256); 0 when dynamic."""
    projector: str = ""
    """qwen_merger, internvl_mlp1, internvl, gemma3, llava, idefics3 (see ``TOWERS``)."""
    num_position_embeddings: int = 0
    """Learned position table rows of Qwen3-VL's tower (interpolated to the image)."""
    deepstack_visual_indexes: tuple[int, ...] = ()
    """Qwen3-VL blocks whose output feeds one extra (deepstack) merger each."""
    num_feature_layers: int = 1
    """LLaVA: hidden states of this many tower layers are concatenated into the projector."""
    projector_bias: bool = True
    post_norm: bool = True
    """HF InternVL's tower ends in a LayerNorm only without ``use_mean_pooling``."""
    hidden_act: str = ""
    """The tower MLP's activation (transformers ``ACT2FN`` name): Qwen2.5-VL's gated silu,
    Qwen2-VL's and CLIP's quick_gelu, the GELUs of the others."""


def _tower(config: dict[str, Any], vc: dict[str, Any]) -> tuple[str, str]:
    top, own = str(config.get("model_type", "")), str(vc.get("model_type", ""))
    if top == "llava":
        return (own or CLIP), "llava"
    if top in TOWERS:
        return TOWERS[top]
    if own in {t for t, _ in TOWERS.values()}:  # a config naming only its tower
        return own, next(p for t, p in TOWERS.values() if t == own)
    raise InputError(FIELD, f"vision tower of model_type {top!r} ({own!r}) is not supported; "
                     f"supported model_type: {', '.join(TOWERS)}")


def _merge(config: dict[str, Any], vc: dict[str, Any]) -> int:
    """Patches per side that become one LLM token."""
    if "downsample_ratio" in config:
        return round(1 / float(config["downsample_ratio"]))
    if "scale_factor" in config:
        return config_int(config, "scale_factor")
    if config.get("mm_tokens_per_image") and vc.get("image_size"):
        patches_per_side = int(vc["image_size"]) // int(vc["patch_size"])
        return patches_per_side // round(int(config["mm_tokens_per_image"]) ** 0.5)
    return config_int(vc, "spatial_merge_size", 1)


def _side(value: Any) -> int:
    """An image or patch side; HF InternVL writes ``[448, 448]``."""
    if isinstance(value, (list, tuple)):
        return int(value[0])
    return 0 if value is None else int(value)


def _widths(vc: dict[str, Any], out_hidden_size: int, tower: str) -> tuple[int, int, int]:
    """(tower width, MLP width, width fed to the LLM). Qwen2-VL names the tower width
    ``embed_dim`` and the LLM width ``hidden_size``, with MLP = embed_dim·mlp_ratio; the
    Qwen2.5-VL tower (also inside Qwen2.5-Omni, whose files may carry a stray ``embed_dim``)
    reads ``hidden_size``, ``intermediate_size`` and ``out_hidden_size``
    (qwen2_5_omni/modeling_qwen2_5_omni.py builds ``patch_embed`` with ``config.hidden_size``)."""
    if "embed_dim" in vc and tower == "qwen2_vl":
        embed = int(vc["embed_dim"])
        return embed, int(embed * float(vc.get("mlp_ratio", 4))), int(vc.get("hidden_size")
                                                                      or out_hidden_size)
    return (int(vc["hidden_size"]), config_int(vc, "intermediate_size"),
            config_int(vc, "out_hidden_size", out_hidden_size))


def _feature_layers(config: dict[str, Any]) -> int:
    layer = config.get("vision_feature_layer", -1)
    return len(layer) if isinstance(layer, (list, tuple)) else 1


def vision_from_config(config: dict[str, Any], out_hidden_size: int) -> VisionArch | None:
    """The tower of a multimodal ``config``, or None for a text-only model.

    Source: qwen2_vl/configuration_qwen2_vl.py (embed_dim, mlp_ratio), qwen2_5_vl and
    qwen3_vl configuration files, InternVL remote code configuration_intern_vit.py,
    internvl/configuration_internvl.py, siglip/configuration_siglip.py (vision_use_head
    defaults True), clip/configuration_clip.py, idefics3/configuration_idefics3.py
    (scale_factor), llava/configuration_llava.py (vision_feature_layer,
    multimodal_projector_bias).
    """
    vc = config.get("vision_config")
    if not isinstance(vc, dict):
        return None
    depth = vc.get("depth", vc.get("num_hidden_layers"))
    heads = vc.get("num_heads", vc.get("num_attention_heads"))
    if depth is None or heads is None or ("hidden_size" not in vc and "embed_dim" not in vc):
        raise InputError(FIELD, "vision_config lacks depth/num_heads/hidden_size")
    tower, projector = _tower(config, vc)
    hidden, inter, out = _widths(vc, out_hidden_size, tower)
    return VisionArch(
        model_type=tower,
        depth=int(depth),
        hidden_size=hidden,
        intermediate_size=inter,
        num_heads=int(heads),
        patch_size=_side(vc.get("patch_size")),
        out_hidden_size=out,
        in_chans=config_int(vc, "in_chans", config_int(vc, "in_channels",
                                                       config_int(vc, "num_channels", 3))),
        spatial_merge_size=_merge(config, vc),
        temporal_patch_size=config_int(vc, "temporal_patch_size", 1),
        window_size=config_int(vc, "window_size"),
        fullatt_block_indexes=tuple(int(i) for i in vc.get("fullatt_block_indexes") or ()),
        image_size=_side(vc.get("image_size")),
        qkv_bias=bool(vc.get("qkv_bias", vc.get("attention_bias", True))),
        norm_type=str(vc.get("norm_type", NORM_BY_TOWER.get(tower, LAYER_NORM))),
        qk_normalization=bool(vc.get("qk_normalization", vc.get("use_qk_norm", False))),
        use_head=tower == SIGLIP and bool(vc.get("vision_use_head", True)),
        mm_tokens_per_image=config_int(config, "mm_tokens_per_image"),
        projector=projector,
        num_position_embeddings=config_int(vc, "num_position_embeddings"),
        deepstack_visual_indexes=tuple(int(i) for i in vc.get("deepstack_visual_indexes") or ()),
        num_feature_layers=_feature_layers(config),
        projector_bias=bool(config.get("multimodal_projector_bias", True)),
        post_norm=not (tower == "internvl_vision" and vc.get("use_mean_pooling", True)),
        hidden_act=str(vc.get("hidden_act") or ACT_BY_TOWER.get(tower, "gelu")),
    )


OMNI_AUDIO_ENCODER = "qwen2_5_omni_audio_encoder"
OMNI_AUDIO_DEFAULTS: dict[str, int] = {
    "encoder_layers": 32, "d_model": 1280, "encoder_ffn_dim": 5120,
    "encoder_attention_heads": 20, "num_mel_bins": 128, "output_dim": 3584,
}
"""Qwen2_5OmniAudioEncoderConfig defaults, for keys a hub ``audio_config`` leaves out.
Source: qwen2_5_omni/configuration_qwen2_5_omni.py (transformers 5.x)."""


@dataclass(frozen=True)
class AudioArch:
    """A Whisper-style audio encoder (Qwen2.5-Omni's ``audio_tower``) and its projection."""

    model_type: str
    num_layers: int
    hidden_size: int
    """``d_model``."""
    intermediate_size: int
    """``encoder_ffn_dim``."""
    num_heads: int
    num_mel_bins: int
    out_hidden_size: int
    """``output_dim``: width of the language model ``proj`` feeds."""


def audio_from_config(config: dict[str, Any]) -> AudioArch | None:
    """The audio encoder of a thinker ``config`` (Qwen2.5-Omni), or None without one.

    Source: qwen2_5_omni/configuration_qwen2_5_omni.py (Qwen2_5OmniAudioEncoderConfig)."""
    ac = config.get("audio_config")
    if not isinstance(ac, dict):
        return None
    kind = str(ac.get("model_type") or OMNI_AUDIO_ENCODER)
    if kind != OMNI_AUDIO_ENCODER:
        raise InputError(FIELD, f"audio tower {kind!r} is not supported; supported: "
                         f"{OMNI_AUDIO_ENCODER}")
    value = {k: config_int(ac, k, default) for k, default in OMNI_AUDIO_DEFAULTS.items()}
    return AudioArch(model_type=kind, num_layers=value["encoder_layers"],
                     hidden_size=value["d_model"], intermediate_size=value["encoder_ffn_dim"],
                     num_heads=value["encoder_attention_heads"],
                     num_mel_bins=value["num_mel_bins"], out_hidden_size=value["output_dim"])
