"""Parameter counts of a ``VisionArch`` tower and its projector: pure functions, integer counts.

Towers: Qwen2.5-VL ViT, InternViT (InternVL), SigLIP (gemma3). Tensors are named as their HF
(or InternVL remote-code) modules and feed ``params.model_tensors``.

Known limitations: the InternViT tower is counted from its module code and checked only
against its nominal "300M" (the SigLIP tower is pinned by gemma-3-4b's exact public total).
"""

from __future__ import annotations

from ..catalog.models import ModelArch
from ..catalog.vision import VisionArch
from ..errors import InputError
from .tensors import LinearShape, ParamTensor, linear_tensors, num_tensor_parameters

CLASS_TOKENS = 1
"""InternViT prepends one class token; its position table has num_patches + 1 rows."""


def _norm(module: str, width: int, norm_type: str, count: int = 1) -> list[ParamTensor]:
    """RMSNorm: weight; affine LayerNorm: weight + bias."""
    names = ("weight", "bias") if norm_type == "layer_norm" else ("weight",)
    return [ParamTensor(module, name, width, count) for name in names]


def _linear(module: str, fan_in: int, fan_out: int, bias: bool = True, count: int = 1
            ) -> list[ParamTensor]:
    """nn.Linear, or a Conv with the same weight/bias sizes (fan_in = C·kernel volume)."""
    return list(linear_tensors("", LinearShape(module, fan_in, fan_out, bias, count), False))


def _qwen2_5_vl_tensors(v: VisionArch) -> list[ParamTensor]:
    h, i, n, m2 = v.hidden_size, v.intermediate_size, v.depth, v.spatial_merge_size ** 2
    blk = "visual.blocks.*"
    patch = v.in_chans * v.temporal_patch_size * v.patch_size ** 2
    return [
        *_linear("visual.patch_embed.proj", patch, h, bias=False),  # Conv3d
        *_norm(f"{blk}.norm1", h, "rms_norm", n), *_norm(f"{blk}.norm2", h, "rms_norm", n),
        *_linear(f"{blk}.attn.qkv", h, 3 * h, count=n),
        *_linear(f"{blk}.attn.proj", h, h, count=n),
        *_linear(f"{blk}.mlp.gate_proj", h, i, count=n),
        *_linear(f"{blk}.mlp.up_proj", h, i, count=n),
        *_linear(f"{blk}.mlp.down_proj", i, h, count=n),
        *_norm("visual.merger.ln_q", h, "rms_norm"),
        *_linear("visual.merger.mlp.0", m2 * h, m2 * h),
        *_linear("visual.merger.mlp.2", m2 * h, v.out_hidden_size),
    ]


def _intern_vit_tensors(v: VisionArch) -> list[ParamTensor]:
    h, i, n, m2 = v.hidden_size, v.intermediate_size, v.depth, v.spatial_merge_size ** 2
    emb, lyr = "vision_model.embeddings", "vision_model.encoder.layers.*"
    positions = (v.image_size // v.patch_size) ** 2 + CLASS_TOKENS
    out = [
        ParamTensor(emb, "class_embedding", h, 1),
        ParamTensor(emb, "position_embedding", positions * h, 1),
        *_linear(f"{emb}.patch_embedding", v.in_chans * v.patch_size ** 2, h),  # Conv2d
        ParamTensor(lyr, "ls1", h, n), ParamTensor(lyr, "ls2", h, n),
        *_linear(f"{lyr}.attn.qkv", h, 3 * h, v.qkv_bias, n),
        *_linear(f"{lyr}.attn.proj", h, h, count=n),
        *_norm(f"{lyr}.norm1", h, v.norm_type, n), *_norm(f"{lyr}.norm2", h, v.norm_type, n),
        *_linear(f"{lyr}.mlp.fc1", h, i, count=n), *_linear(f"{lyr}.mlp.fc2", i, h, count=n),
        *_norm("mlp1.0", m2 * h, "layer_norm"),
        *_linear("mlp1.1", m2 * h, v.out_hidden_size),
        *_linear("mlp1.3", v.out_hidden_size, v.out_hidden_size),
    ]
    if v.qk_normalization:
        out += [*_norm(f"{lyr}.attn.q_norm", h, "rms_norm", n),
                *_norm(f"{lyr}.attn.k_norm", h, "rms_norm", n)]
    return out


def _siglip_tensors(v: VisionArch) -> list[ParamTensor]:
    h, i, n = v.hidden_size, v.intermediate_size, v.depth
    vm, lyr = "vision_tower.vision_model", "vision_tower.vision_model.encoder.layers.*"
    out = [
        *_linear(f"{vm}.embeddings.patch_embedding", v.in_chans * v.patch_size ** 2, h),
        ParamTensor(f"{vm}.embeddings.position_embedding", "weight",
                    (v.image_size // v.patch_size) ** 2 * h, 1),
        *(t for proj in ("q_proj", "k_proj", "v_proj", "out_proj")
          for t in _linear(f"{lyr}.self_attn.{proj}", h, h, count=n)),
        *_norm(f"{lyr}.layer_norm1", h, "layer_norm", n),
        *_norm(f"{lyr}.layer_norm2", h, "layer_norm", n),
        *_linear(f"{lyr}.mlp.fc1", h, i, count=n), *_linear(f"{lyr}.mlp.fc2", i, h, count=n),
        *_norm(f"{vm}.post_layernorm", h, "layer_norm"),
        ParamTensor("multi_modal_projector", "mm_input_projection_weight",
                    h * v.out_hidden_size, 1),
        *_norm("multi_modal_projector.mm_soft_emb_norm", h, "rms_norm"),
    ]
    if v.use_head:  # attention-pooling head; gemma3 turns it off
        out += [ParamTensor(f"{vm}.head", "probe", h, 1),
                ParamTensor(f"{vm}.head.attention", "in_proj_weight", 3 * h * h, 1),
                ParamTensor(f"{vm}.head.attention", "in_proj_bias", 3 * h, 1),
                *_linear(f"{vm}.head.attention.out_proj", h, h),
                *_norm(f"{vm}.head.layernorm", h, "layer_norm"),
                *_linear(f"{vm}.head.mlp.fc1", h, i), *_linear(f"{vm}.head.mlp.fc2", i, h)]
    return out


VISION_TENSORS = {
    "qwen2_5_vl": _qwen2_5_vl_tensors,
    "intern_vit_6b": _intern_vit_tensors,
    "siglip_vision_model": _siglip_tensors,
}


def vision_tensors(arch: ModelArch) -> tuple[ParamTensor, ...]:
    """Parameter tensors of the vision tower and its projector into the language model.

    Qwen2.5-VL (p = patch, t = temporal patch, m = spatial merge, n = depth):
      patch embed Conv3d 3·t·p²·h (no bias); per block RMSNorm x2 (h each), attn.qkv
      (h→3h, bias), attn.proj (h→h, bias), SwiGLU gate/up (h→I, bias), down (I→h, bias);
      merger ln_q RMSNorm(h), MLP (m²h→m²h, bias) → GELU → (m²h→out, bias).
      Source: qwen2_5_vl/modeling_qwen2_5_vl.py.
    InternViT (InternVL remote code modeling_intern_vit.py, modeling_internvl_chat.py):
      class token h, positions (N+1)·h, patch Conv2d 3p²h + h; per layer ls1/ls2, qkv,
      proj, 2 LayerNorms, fc1/fc2 with bias; projector mlp1 = LayerNorm(m²h) → Linear(m²h,
      out) → GELU → Linear(out, out).
    SigLIP as used by gemma3 (siglip/modeling_siglip.py, gemma3/modeling_gemma3.py):
      patch Conv2d with bias, position table N·h, per layer q/k/v/out with bias, 2
      LayerNorms, fc1/fc2; post_layernorm; projector weight h·out + RMSNorm(h).
    Assumes: N = (image_size/patch)²; InternViT/SigLIP counts are derived from the module
    code and not checked against a published per-tower number.
    """
    v = arch.vision
    if v is None:
        return ()
    if v.model_type not in VISION_TENSORS:
        raise InputError("model", f"vision tower {v.model_type!r} of {arch.name!r} is not "
                         f"supported; supported: {', '.join(VISION_TENSORS)}")
    return tuple(VISION_TENSORS[v.model_type](v))


def num_vision_parameters(arch: ModelArch) -> int:
    """Vision tower + projector (0 for text-only models). Formula: ``vision_tensors``."""
    return num_tensor_parameters(vision_tensors(arch))
