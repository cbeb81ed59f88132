"""Parameter tensors of each vision tower (without its projector into the language model).

One function per tower, named as the HF (or InternVL remote-code) modules so that FSDP wrap
prefixes and ZeRO-3 module sizes can be looked up. ``vision_params`` adds the projector and
dispatches. Symbols: h = tower width, I = tower MLP width, n = depth, p = patch side,
t = temporal patch, C = input channels, m = spatial merge, N = patches per image side².
"""

from __future__ import annotations

from ..catalog.vision import AudioArch, VisionArch
from .tensors import LinearShape, ParamTensor, linear_tensors

CLASS_TOKENS = 1
"""InternViT and CLIP prepend one class token; their position tables have N + 1 rows."""
AUDIO_CONV_KERNEL = 3
"""Qwen2.5-Omni's audio stem: two Conv1d of kernel 3 (conv1 mel→d, conv2 d→d stride 2)."""
AUDIO_BOUNDARY_TOKENS = 2
"""``audio_bos_eos_token``: an Embedding(2, output_dim) for the start and end of audio."""


def norm(module: str, width: int, norm_type: str, count: int = 1) -> list[ParamTensor]:
    """RMSNorm: weight; affine LayerNorm: weight + bias."""
    names = ("weight", "bias") if norm_type == "layer_norm" else ("weight",)
    return [ParamTensor(module, name, width, count) for name in names]


def linear(module: str, fan_in: int, fan_out: int, bias: bool = True, count: int = 1
           ) -> list[ParamTensor]:
    """nn.Linear, or a Conv with the same weight/bias sizes (fan_in = C·kernel volume)."""
    return list(linear_tensors("", LinearShape(module, fan_in, fan_out, bias, count), False))


def _num_patches(v: VisionArch) -> int:
    return (v.image_size // v.patch_size) ** 2


def _qwen_blocks(v: VisionArch, fc: tuple[str, str], gated: bool) -> list[ParamTensor]:
    """Qwen-VL blocks ``visual.blocks.*``: norm1/norm2, attn.qkv (h→3h) and attn.proj, MLP;
    every linear with bias."""
    h, i, n, blk = v.hidden_size, v.intermediate_size, v.depth, "visual.blocks.*"
    mlp = ([*linear(f"{blk}.mlp.gate_proj", h, i, count=n)] if gated else [])
    return [
        *norm(f"{blk}.norm1", h, v.norm_type, n), *norm(f"{blk}.norm2", h, v.norm_type, n),
        *linear(f"{blk}.attn.qkv", h, 3 * h, count=n),
        *linear(f"{blk}.attn.proj", h, h, count=n),
        *mlp,
        *linear(f"{blk}.mlp.{fc[0]}", h, i, count=n),
        *linear(f"{blk}.mlp.{fc[1]}", i, h, count=n),
    ]


def qwen2_vl_tensors(v: VisionArch) -> list[ParamTensor]:
    """Qwen2-VL: Conv3d patch embed C·t·p²·h (no bias); LayerNorm blocks, fc1/fc2 MLP
    (I = embed_dim·mlp_ratio); merger ln_q LayerNorm(h), mlp.0 (m²h→m²h), mlp.2 (m²h→out).
    Source: qwen2_vl/modeling_qwen2_vl.py (PatchEmbed, Qwen2VLVisionBlock, PatchMerger)."""
    h, m2 = v.hidden_size, v.spatial_merge_size ** 2
    patch = v.in_chans * v.temporal_patch_size * v.patch_size ** 2
    return [
        *linear("visual.patch_embed.proj", patch, h, bias=False),
        *_qwen_blocks(v, ("fc1", "fc2"), gated=False),
        *norm("visual.merger.ln_q", h, v.norm_type),
        *linear("visual.merger.mlp.0", m2 * h, m2 * h),
        *linear("visual.merger.mlp.2", m2 * h, v.out_hidden_size),
    ]


def qwen2_5_vl_tensors(v: VisionArch) -> list[ParamTensor]:
    """Qwen2.5-VL: Conv3d patch embed (no bias); RMSNorm blocks with a SwiGLU MLP
    (gate/up/down, bias); merger ln_q RMSNorm(h), MLP (m²h→m²h) → GELU → (m²h→out).
    Source: qwen2_5_vl/modeling_qwen2_5_vl.py."""
    h, m2 = v.hidden_size, v.spatial_merge_size ** 2
    patch = v.in_chans * v.temporal_patch_size * v.patch_size ** 2
    return [
        *linear("visual.patch_embed.proj", patch, h, bias=False),
        *_qwen_blocks(v, ("up_proj", "down_proj"), gated=True),
        *norm("visual.merger.ln_q", h, "rms_norm"),
        *linear("visual.merger.mlp.0", m2 * h, m2 * h),
        *linear("visual.merger.mlp.2", m2 * h, v.out_hidden_size),
    ]


def _qwen3_merger(module: str, v: VisionArch, norm_width: int, count: int = 1
                  ) -> list[ParamTensor]:
    h2, out = v.spatial_merge_size ** 2 * v.hidden_size, v.out_hidden_size
    return [*norm(f"{module}.norm", norm_width, "layer_norm", count),
            *linear(f"{module}.linear_fc1", h2, h2, count=count),
            *linear(f"{module}.linear_fc2", h2, out, count=count)]


def qwen3_vl_tensors(v: VisionArch) -> list[ParamTensor]:
    """Qwen3-VL / Qwen3.5: Conv3d patch embed with bias, learned ``pos_embed``
    (num_position_embeddings·h), LayerNorm blocks with linear_fc1/linear_fc2, merger (norm
    LayerNorm(h) before the m² shuffle), and one deepstack merger per
    ``deepstack_visual_indexes`` entry (norm LayerNorm(m²h) after the shuffle).
    Source: qwen3_vl/modeling_qwen3_vl.py (Qwen3VLVisionModel, Qwen3VLVisionPatchMerger
    use_postshuffle_norm), qwen3_5/modeling_qwen3_5.py."""
    h, m2 = v.hidden_size, v.spatial_merge_size ** 2
    patch = v.in_chans * v.temporal_patch_size * v.patch_size ** 2
    out = [
        *linear("visual.patch_embed.proj", patch, h),
        ParamTensor("visual.pos_embed", "weight", v.num_position_embeddings * h, 1),
        *_qwen_blocks(v, ("linear_fc1", "linear_fc2"), gated=False),
        *_qwen3_merger("visual.merger", v, h),
    ]
    if v.deepstack_visual_indexes:
        out += _qwen3_merger("visual.deepstack_merger_list.*", v, m2 * h,
                             len(v.deepstack_visual_indexes))
    return out


def intern_vit_tensors(v: VisionArch) -> list[ParamTensor]:
    """InternViT (InternVL remote code modeling_intern_vit.py): class token h, positions
    (N+1)·h, patch Conv2d C·p²·h + h; per layer ls1/ls2, fused qkv, proj, 2 norms, fc1/fc2
    with bias, optional q/k RMSNorm(h)."""
    h, i, n = v.hidden_size, v.intermediate_size, v.depth
    emb, lyr = "vision_model.embeddings", "vision_model.encoder.layers.*"
    out = [
        ParamTensor(emb, "class_embedding", h, 1),
        ParamTensor(emb, "position_embedding", (_num_patches(v) + CLASS_TOKENS) * h, 1),
        *linear(f"{emb}.patch_embedding", v.in_chans * v.patch_size ** 2, h),  # Conv2d
        ParamTensor(lyr, "ls1", h, n), ParamTensor(lyr, "ls2", h, n),
        *linear(f"{lyr}.attn.qkv", h, 3 * h, v.qkv_bias, n),
        *linear(f"{lyr}.attn.proj", h, h, count=n),
        *norm(f"{lyr}.norm1", h, v.norm_type, n), *norm(f"{lyr}.norm2", h, v.norm_type, n),
        *linear(f"{lyr}.mlp.fc1", h, i, count=n), *linear(f"{lyr}.mlp.fc2", i, h, count=n),
    ]
    if v.qk_normalization:
        out += [*norm(f"{lyr}.attn.q_norm", h, "rms_norm", n),
                *norm(f"{lyr}.attn.k_norm", h, "rms_norm", n)]
    return out


def internvl_vision_tensors(v: VisionArch) -> list[ParamTensor]:
    """InternViT as ported to transformers: cls_token, position_embeddings (N+1)·h, patch
    Conv2d with bias; per layer lambda_1/lambda_2, q/k/v (bias = attention_bias),
    projection_layer (bias), optional q_norm/k_norm RMSNorm(h), fc1/fc2,
    layernorm_before/after; a final LayerNorm unless use_mean_pooling.
    Source: internvl/modeling_internvl.py (InternVLVisionModel)."""
    h, i, n = v.hidden_size, v.intermediate_size, v.depth
    emb, lyr = "vision_tower.embeddings", "vision_tower.encoder.layer.*"
    out = [
        ParamTensor(emb, "cls_token", h, 1),
        ParamTensor(emb, "position_embeddings", (_num_patches(v) + CLASS_TOKENS) * h, 1),
        *linear(f"{emb}.patch_embeddings.projection", v.in_chans * v.patch_size ** 2, h),
        ParamTensor(lyr, "lambda_1", h, n), ParamTensor(lyr, "lambda_2", h, n),
        *(t for proj in ("q_proj", "k_proj", "v_proj")
          for t in linear(f"{lyr}.attention.{proj}", h, h, v.qkv_bias, n)),
        *linear(f"{lyr}.attention.projection_layer", h, h, count=n),
        *linear(f"{lyr}.mlp.fc1", h, i, count=n), *linear(f"{lyr}.mlp.fc2", i, h, count=n),
        *norm(f"{lyr}.layernorm_before", h, v.norm_type, n),
        *norm(f"{lyr}.layernorm_after", h, v.norm_type, n),
    ]
    if v.qk_normalization:
        out += [*norm(f"{lyr}.attention.q_norm", h, "rms_norm", n),
                *norm(f"{lyr}.attention.k_norm", h, "rms_norm", n)]
    if v.post_norm:
        out += norm("vision_tower.layernorm", h, "layer_norm")
    return out


def _vit_layers(lyr: str, v: VisionArch) -> list[ParamTensor]:
    """SigLIP/CLIP/Idefics3 encoder layers: q/k/v/out_proj with bias, layer_norm1/2,
    mlp.fc1/fc2 with bias. Source: siglip/modeling_siglip.py, clip/modeling_clip.py."""
    h, i, n = v.hidden_size, v.intermediate_size, v.depth
    return [
        *(t for proj in ("q_proj", "k_proj", "v_proj", "out_proj")
          for t in linear(f"{lyr}.self_attn.{proj}", h, h, count=n)),
        *norm(f"{lyr}.layer_norm1", h, "layer_norm", n),
        *norm(f"{lyr}.layer_norm2", h, "layer_norm", n),
        *linear(f"{lyr}.mlp.fc1", h, i, count=n), *linear(f"{lyr}.mlp.fc2", i, h, count=n),
    ]


def siglip_tensors(v: VisionArch, root: str = "vision_tower.vision_model"
                   ) -> list[ParamTensor]:
    """SigLIP: patch Conv2d with bias, position table N·h, layers, post_layernorm, and the
    attention-pooling head when ``vision_use_head`` (probe, in_proj 3h·h + 3h, out_proj,
    LayerNorm, fc1/fc2). Source: siglip/modeling_siglip.py (SiglipVisionTransformer,
    SiglipMultiheadAttentionPoolingHead); Idefics3VisionTransformer is the same without
    a head (idefics3/modeling_idefics3.py)."""
    h, i = v.hidden_size, v.intermediate_size
    out = [
        *linear(f"{root}.embeddings.patch_embedding", v.in_chans * v.patch_size ** 2, h),
        ParamTensor(f"{root}.embeddings.position_embedding", "weight", _num_patches(v) * h, 1),
        *_vit_layers(f"{root}.encoder.layers.*", v),
        *norm(f"{root}.post_layernorm", h, "layer_norm"),
    ]
    if v.use_head:
        out += [ParamTensor(f"{root}.head", "probe", h, 1),
                ParamTensor(f"{root}.head.attention", "in_proj_weight", 3 * h * h, 1),
                ParamTensor(f"{root}.head.attention", "in_proj_bias", 3 * h, 1),
                *linear(f"{root}.head.attention.out_proj", h, h),
                *norm(f"{root}.head.layernorm", h, "layer_norm"),
                *linear(f"{root}.head.mlp.fc1", h, i), *linear(f"{root}.head.mlp.fc2", i, h)]
    return out


def idefics3_vision_tensors(v: VisionArch) -> list[ParamTensor]:
    """Idefics3/SmolVLM tower ``vision_model``: SigLIP without the pooling head."""
    return siglip_tensors(v, root="vision_model")


def clip_tensors(v: VisionArch) -> list[ParamTensor]:
    """CLIP (LLaVA's tower): class_embedding h, patch Conv2d C·p²·h without bias, position
    table (N+1)·h, pre_layrnorm, layers, post_layernorm; every layer is built even when
    LLaVA reads an earlier one (vision_feature_layer). Source: clip/modeling_clip.py
    (CLIPVisionEmbeddings, CLIPVisionTransformer)."""
    h, root = v.hidden_size, "vision_tower.vision_model"
    return [
        ParamTensor(f"{root}.embeddings", "class_embedding", h, 1),
        *linear(f"{root}.embeddings.patch_embedding", v.in_chans * v.patch_size ** 2, h,
                bias=False),
        ParamTensor(f"{root}.embeddings.position_embedding", "weight",
                    (_num_patches(v) + CLASS_TOKENS) * h, 1),
        *norm(f"{root}.pre_layrnorm", h, "layer_norm"),
        *_vit_layers(f"{root}.encoder.layers.*", v),
        *norm(f"{root}.post_layernorm", h, "layer_norm"),
    ]


def qwen2_5_omni_audio_tensors(a: AudioArch) -> list[ParamTensor]:
    """Qwen2.5-Omni ``audio_tower`` (Whisper-style): conv1 (M·3·d + d), conv2 (d·3·d + d),
    ``audio_bos_eos_token`` 2·out; per layer q/v/out_proj with bias and k_proj without,
    self_attn_layer_norm and final_layer_norm LayerNorm(d), fc1/fc2 with bias; ln_post
    LayerNorm(d) and ``proj`` (d→out, bias). The sinusoidal position table is a buffer.
    Symbols: d = d_model, F = encoder_ffn_dim, M = num_mel_bins, out = output_dim.
    Source: qwen2_5_omni/modeling_qwen2_5_omni.py (Qwen2_5OmniAudioEncoder,
    Qwen2_5OmniAudioEncoderLayer, Qwen2_5OmniAudioAttention)."""
    d, f, n, root = a.hidden_size, a.intermediate_size, a.num_layers, "audio_tower"
    lyr = f"{root}.layers.*"
    return [
        *linear(f"{root}.conv1", a.num_mel_bins * AUDIO_CONV_KERNEL, d),
        *linear(f"{root}.conv2", d * AUDIO_CONV_KERNEL, d),
        ParamTensor(f"{root}.audio_bos_eos_token", "weight",
                    AUDIO_BOUNDARY_TOKENS * a.out_hidden_size, 1),
        *linear(f"{lyr}.self_attn.k_proj", d, d, bias=False, count=n),
        *(t for proj in ("q_proj", "v_proj", "out_proj")
          for t in linear(f"{lyr}.self_attn.{proj}", d, d, count=n)),
        *norm(f"{lyr}.self_attn_layer_norm", d, "layer_norm", n),
        *linear(f"{lyr}.fc1", d, f, count=n), *linear(f"{lyr}.fc2", f, d, count=n),
        *norm(f"{lyr}.final_layer_norm", d, "layer_norm", n),
        *norm(f"{root}.ln_post", d, "layer_norm"),
        *linear(f"{root}.proj", d, a.out_hidden_size),
    ]
