"""Vision towers' activation memory (their image tokens and patches: `memory.vision_tokens`).

Towers: Qwen2.5-VL ViT (window attention, RMSNorm, SwiGLU, 2×2 PatchMerger), InternViT
(InternVL: 448 px tiles, class token, LayerScale, pixel-shuffle projector) and SigLIP (gemma3:
one 896 px image, average-pooled to 256 tokens). Pure functions of plain ints and a
``VisionArch``; integer bytes out.

Per-patch bytes are derived tensor by tensor from what autograd keeps in transformers'
`models/qwen2_5_vl/modeling_qwen2_5_vl.py` (v4.50.0 and main after PR #37363), InternVL's
remote `modeling_intern_vit.py` and `models/siglip/modeling_siglip.py`, as `activations.py`
does for the decoder, counting each storage once: Qwen's and InternViT's ``v`` (and
InternViT's packed flash ``qkv``) are views of the fused qkv output, so all 3h of it stays
saved. Symbols: h hidden, I intermediate, n_h heads, s the keys one patch attends to.

Assumes: bf16 activations and pixels; attention/drop-path dropout 0 (the configs' values;
InternViT's stochastic depth keeps only a [batch, 1, 1] mask); images, not video (one temporal
patch per image).

Known limitations: edge windows of Qwen's window attention are charged the full window (an
upper bound); the rotary transient follows HF's fp32 `apply_rotary_pos_emb_vision` (vLLM's
fused rotary is smaller); sdpa with the dense mask is charged eager's score bytes.
"""

from __future__ import annotations

from ..catalog.vision import VisionArch
from ..spec.run import AttentionImpl
from . import constants as C
from .activation_norms import rmsnorm_saved_bytes_per_token
from .vision_params import CLASS_TOKENS
from .vision_tokens import (
    INTERN_VIT,
    QWEN2_5_VL,
    SIGLIP,
    TOWERS,
    _tower,
    internvl_tile_grid,
    max_image_patches,
    max_image_tokens,
    max_smart_resize_tokens,
    num_image_patches,
    num_image_tokens,
    num_internvl_tiles,
    num_patches_per_tile,
    smart_resize,
)

from .vision_projector import (
    encoder_cache_bytes,
    merger_saved_bytes,
    num_vllm_profile_images,
    vllm_encoder_budget_tokens,
)

__all__ = [  # the token and projector rules, re-exported: this module is the vision API
    "TOWERS", "internvl_tile_grid", "max_image_patches", "max_image_tokens", "max_smart_resize_tokens",
    "num_image_patches", "num_image_tokens", "num_internvl_tiles", "smart_resize",
    "encoder_cache_bytes", "merger_saved_bytes", "num_vllm_profile_images", "vllm_encoder_budget_tokens",
]

B = C.BF16_BYTES
F = C.FP32_BYTES


LAYERNORM_STATS_BYTES = 2 * F
"""`native_layer_norm` saves fp32 mean and rstd per row (plus the input, counted apart)."""
HF_EAGER_SCORE_BYTES = F + B
"""HF `eager_attention_forward`: softmax(dtype=float32) saves its fp32 output, `.to(bf16)`
its bf16 copy for the value matmul: 4 + 2 bytes per score. In a no-grad forward the peak
is the same pair (bf16 scores alive while the fp32 softmax is written)."""
INTERN_EAGER_SCORE_BYTES = B
"""InternViT `_naive_attn` takes softmax in bf16 and matmuls the same tensor: 2 bytes."""
EAGER_SCORE_GRAD_BYTES = F + F
"""Backward through softmax: fp32 grad of the probabilities and fp32 grad of the scores are
alive together (the bf16 grads around them are freed first): 4 + 4 bytes per score."""
DENSE_MASK_BYTES = {AttentionImpl.sdpa: 1 + B, AttentionImpl.eager: B}
"""transformers 4.49-4.53 Qwen2.5-VL: sdpa builds a bool [1, N, N] mask (1 B) that PyTorch's
math kernel turns into an additive bf16 mask (2 B); eager builds a bf16 finfo.min mask."""
ROTARY_FP32_TEMPORARIES = 6
"""`apply_rotary_pos_emb_vision` upcasts q and k to fp32 and forms q·cos + rotate_half(q)·sin,
then the same for k: when k's last product is made, q and k upcast, q_embed, k·cos,
rotate_half(k) and rotate_half(k)·sin (fp32, h each) are alive. Source: transformers
qwen2_5_vl/modeling_qwen2_5_vl.py (4.51.3 and 5.24 alike); measured by `oomless trace`
(46,512 B per patch of the 3B tower, no grad)."""
HF_EAGER_INFERENCE_SCORE_BYTES = B + F + F
"""HF eager attention without grad: the bf16 scaled scores (still bound to `attn_weights`), the
fp32 copy `softmax(..., dtype=float32)` makes of a bf16 input (ATen SoftMax.cpp skips it only
for Half on CUDA) and the fp32 softmax: 2 + 4 + 4 bytes per score (`oomless trace`: 184,752 B
per patch of the 3B tower at 1,024 patches, eager)."""




# --- attention spans -----------------------------------------------------------------------

def _effective_attention(v: VisionArch, attention: AttentionImpl) -> AttentionImpl:
    """InternViT has only flash and a naive path: InternVLChatModel sets the tower's
    `use_flash_attn` only with flash_attention_2, so sdpa runs the naive (eager) path."""
    if _tower(v) == INTERN_VIT and attention != AttentionImpl.flash_attention_2:
        return AttentionImpl.eager
    return attention


def _dense(v: VisionArch, attention: AttentionImpl, dense_mask: bool) -> bool:
    """The dense-mask path exists only for Qwen2.5-VL's sdpa/eager (flash used cu_seqlens)."""
    return dense_mask and _tower(v) == QWEN2_5_VL and attention != AttentionImpl.flash_attention_2


def _block_attention(v: VisionArch, attention: AttentionImpl, dense_mask: bool) -> AttentionImpl:
    """With the dense mask, sdpa's 3-D q/k/v fall to PyTorch's math kernel (the fused kernels
    need 4-D inputs), which materialises the scores: charged like eager (an upper bound)."""
    return AttentionImpl.eager if _dense(v, attention, dense_mask) else attention


def num_window_patches(v: VisionArch) -> int:
    """Patches in one Qwen2.5-VL window: (window_size / patch)² = (112/14)² = 64.
    Source: `get_window_index` (windows of window/merge/patch = 4 merged tokens a side)."""
    return (v.window_size // v.patch_size) ** 2


def attention_spans(v: VisionArch, num_patches: int, num_images: int, attention: AttentionImpl,
                    dense_mask: bool = False) -> tuple[tuple[int, int], ...]:
    """(number of blocks, keys one patch attends to) for each kind of block.

    Qwen2.5-VL: blocks outside `fullatt_block_indexes` attend within a 64-patch window
    (cu_window_seqlens), the others over their image (cu_seqlens); ``num_patches`` is per
    image. InternViT: each 448 px tile alone (1,025 with the class token). SigLIP: the image.
    ``dense_mask``: transformers 4.49-4.53 Qwen2.5-VL sdpa/eager built a [1, N, N] block-
    diagonal mask over all N = num_patches·num_images patches of the call and computed every
    block's scores over all N (verified in 4.50.0; main computes per chunk since PR #37363,
    merged after 2025-07-02, so from 4.54). Ignored for flash_attention_2 and other towers.
    """
    tower, total = _tower(v), num_patches * num_images
    if _dense(v, attention, dense_mask):
        return ((v.depth, total),)
    if tower == QWEN2_5_VL and v.window_size:
        full = sum(1 for i in v.fullatt_block_indexes if i < v.depth)
        return ((v.depth - full, min(num_patches, num_window_patches(v))), (full, num_patches))
    if tower == INTERN_VIT:
        return ((v.depth, num_patches_per_tile(v) + CLASS_TOKENS),)
    return ((v.depth, num_patches),)


def _num_concurrent_chunks(v: VisionArch, num_patches: int, num_images: int, span: int) -> int:
    """Attention chunks whose scores exist at once: Qwen loops over windows/images one at a
    time (or one dense chunk); InternViT batches all tiles, SigLIP all images."""
    tower = _tower(v)
    if tower == QWEN2_5_VL:
        return 1
    if tower == INTERN_VIT:
        return num_patches * num_images // span
    return num_images


# --- saved for backward, per patch -----------------------------------------------------------

def vision_norm_saved_bytes_per_patch(v: VisionArch) -> int:
    """One pre-norm. HF RMSNorm (Qwen): fp32 upcast + bf16 normalised, 6h. Affine LayerNorm
    (InternViT, SigLIP): bf16 input 2h + fp32 mean and rstd.
    Source: Qwen2RMSNorm in modeling_qwen2_5_vl.py; ATen `native_layer_norm` saved tensors."""
    if v.norm_type == "layer_norm":
        return B * v.hidden_size + LAYERNORM_STATS_BYTES
    return rmsnorm_saved_bytes_per_token(v.hidden_size)


def vision_attention_saved_bytes_per_patch(v: VisionArch, attention: AttentionImpl, window_len: int) -> int:
    """Bytes one attention block (after its norm) keeps per patch.

    - qkv input 2h and the q/k/v projections 6h: Qwen/InternViT's fused qkv output stays
      whole because v (and InternViT's packed flash qkv) is a view of it; SigLIP's three
      separate projections are the same 6h.
    - Qwen rotary: rotated q and k are new bf16 tensors, 2·2h; the fp32 cos/sin tables are
      shared by all blocks (``vision_embedding_saved_bytes_per_patch``).
    - flash_attention_2: out 2h + fp32 lse 4·n_h; the proj input is a view of out.
      Source: flash-attn varlen save_for_backward; `attn_output.reshape(...).contiguous()`.
    - sdpa (PyTorch flash/efficient kernel): out 2h + lse 4·n_h, and transformers'
      `transpose(1, 2).contiguous()` (Qwen: then `torch.cat` of chunks) copies out for proj: 2h.
    - eager: HF scores 6 B (fp32 softmax + bf16 copy) per head per key, InternViT's bf16
      softmax 2 B, plus its scaled q (2h); the proj input is a contiguous copy, 2h.
    - InternViT LayerScale `attn(...) * ls1` keeps the proj output, 2h; qk-norm (6B tower)
      adds two RMSNorms.
    """
    h, n_h, tower = v.hidden_size, v.num_heads, _tower(v)
    attention = _effective_attention(v, attention)
    projections = B * h + 3 * B * h
    rotated = 2 * B * h if tower == QWEN2_5_VL else 0
    if attention == AttentionImpl.flash_attention_2:
        core = B * h + F * n_h
    elif attention == AttentionImpl.sdpa:
        core = B * h + F * n_h + B * h
    elif tower == INTERN_VIT:
        core = B * h + INTERN_EAGER_SCORE_BYTES * n_h * window_len + B * h
    else:
        core = HF_EAGER_SCORE_BYTES * n_h * window_len + B * h
    layer_scale = B * h if tower == INTERN_VIT else 0
    qk_norm = 2 * rmsnorm_saved_bytes_per_token(h) if v.qk_normalization else 0
    return projections + rotated + core + layer_scale + qk_norm


SWIGLU, QUICK_GELU, GELU = "swiglu", "quick_gelu", "gelu"


def mlp_kind(v: VisionArch) -> str:
    """Qwen2.5-VL's MLP is gated (gate_proj, up_proj, SiLU); the others are fc1 → activation →
    fc2, QuickGELU (Qwen2-VL, CLIP: ``x * sigmoid(1.702 x)``) or a GELU kernel."""
    if v.model_type == QWEN2_5_VL:
        return SWIGLU
    return QUICK_GELU if v.hidden_act == QUICK_GELU else GELU


def vision_mlp_saved_bytes_per_patch(v: VisionArch) -> int:
    """Qwen2.5-VL SwiGLU (biases change nothing): input 2h, gate 2I, SiLU 2I, up 2I, product
    2I = 2h + 8I. GELU MLP (InternViT, SigLIP, Qwen3-VL): input 2h, fc1 output 2I (GELU
    backward), GELU output 2I (fc2 input) = 2h + 4I; InternViT's `mlp(...) * ls2` adds 2h.
    QuickGELU (Qwen2-VL, CLIP): the product keeps fc1's output and the sigmoid's, the sigmoid
    its output, fc2 the product: 2h + 6I.
    Source: transformers 5.24 Qwen2_5_VLMLP (bias=True), qwen2_vl VisionMlp, Qwen3VLVisionMLP,
    activations.py QuickGELUActivation, InternMLP, SiglipMLP; each checked by `oomless trace`
    (Qwen2-VL, Qwen2.5-VL, Qwen3-VL)."""
    h, i, kind = v.hidden_size, v.intermediate_size, mlp_kind(v)
    if kind == SWIGLU:
        return B * h + 4 * B * i
    if kind == QUICK_GELU:
        return B * h + 3 * B * i
    return B * h + 2 * B * i + (B * h if _tower(v) == INTERN_VIT else 0)


def vision_block_saved_bytes_per_patch(v: VisionArch, attention: AttentionImpl, window_len: int) -> int:
    """All bytes one tower block saves per patch without checkpointing: two norms + attention
    (keys per patch ``window_len``) + MLP; residual adds save nothing.
    Source: Qwen2_5_VLVisionBlock, InternVisionEncoderLayer, SiglipEncoderLayer forwards.
    Assumes: the tower is trained (a frozen tower saves nothing)."""
    return (2 * vision_norm_saved_bytes_per_patch(v)
            + vision_attention_saved_bytes_per_patch(v, attention, window_len)
            + vision_mlp_saved_bytes_per_patch(v))


POS_INTERPOLATION_TAPS = 4
"""Qwen3-VL resamples its learned position table bilinearly: 4 taps per patch
(`get_vision_interpolation_indices_and_weights`, mode "bilinear")."""


def vision_embedding_saved_bytes_per_patch(v: VisionArch) -> int:
    """Saved once per patch outside the blocks by a trained tower: the patch-embedding conv's
    bf16 input C·t·p² (Qwen Conv3d over its 2 frames, else Conv2d), Qwen's fp32 rotary cos and
    sin (2·4·head_dim), SigLIP's post_layernorm, Qwen3-VL's position-table gather (the
    embedding's int64 indices and the fp32 weights its product keeps, 4 taps each).
    Source: Qwen2_5_VisionPatchEmbed (Conv3d on `hidden_states.to(weight dtype)`),
    `apply_rotary_pos_emb_vision`, SiglipVisionTransformer, Qwen3VLVisionModel.forward
    (``pos_embed(interp_indices) * interp_weights``).
    Assumes: InternViT's class token is charged as a patch (1 in 1,025)."""
    tower = _tower(v)
    pixels = B * v.in_chans * v.temporal_patch_size * v.patch_size ** 2
    rotary = 2 * F * (v.hidden_size // v.num_heads) if tower == QWEN2_5_VL else 0
    post_norm = vision_norm_saved_bytes_per_patch(v) if tower == SIGLIP else 0
    table = POS_INTERPOLATION_TAPS * (C.INT64_BYTES + F) if v.num_position_embeddings else 0
    return pixels + rotary + post_norm + table


def checkpointed_block_input_bytes_per_patch(v: VisionArch) -> int:
    """With gradient checkpointing each block keeps only its bf16 input (2h).
    Source: Qwen2.5-VL blocks are `GradientCheckpointingLayer`s (older versions call
    `_gradient_checkpointing_func` per block); InternViT/SigLIP checkpoint each layer."""
    return B * v.hidden_size


def tower_checkpoints_by_default(v: VisionArch) -> bool:
    """InternViT's encoder sets `self.gradient_checkpointing = True` in `__init__`
    (modeling_intern_vit.py), so it recomputes in training unless explicitly disabled."""
    return _tower(v) == INTERN_VIT


# --- tower totals --------------------------------------------------------------------------

def vision_training_saved_bytes(v: VisionArch, num_patches: int, num_images: int, attention: AttentionImpl,
                                checkpointing: bool, *, dense_mask: bool = False) -> int:
    """Activations a trained tower holds at the end of its forward, ``num_images`` images of
    ``num_patches`` patches each (projector excluded: ``merger_saved_bytes``).

    A frozen tower saves nothing (neither pixels nor weights need grad): charge its no-grad
    ``vision_inference_peak_bytes`` instead; its output still feeds the LLM.
    Source: the per-block terms above; with checkpointing each block keeps its input.
    Assumes: ``checkpointing`` is the tower's flag (HF `gradient_checkpointing_enable` sets it
    on the tower too; InternViT defaults to on, ``tower_checkpoints_by_default``).
    """
    total, block_attention = num_patches * num_images, _block_attention(v, attention, dense_mask)
    if checkpointing:
        blocks = v.depth * checkpointed_block_input_bytes_per_patch(v)
    else:
        blocks = sum(count * vision_block_saved_bytes_per_patch(v, block_attention, span)
                     for count, span in attention_spans(v, num_patches, num_images, attention, dense_mask))
    return total * (blocks + vision_embedding_saved_bytes_per_patch(v))


def _eager_score_bytes(v: VisionArch, attention: AttentionImpl, num_patches: int, num_images: int,
                       dense_mask: bool, bytes_per_score: int) -> int:
    """Largest set of attention scores alive at once (0 unless eager, or sdpa with the dense
    mask, whose math kernel materialises them like eager): bytes · n_h · s² per chunk."""
    attention = _effective_attention(v, attention)
    dense = _dense(v, attention, dense_mask)
    if attention != AttentionImpl.eager and not dense:
        return 0
    spans = attention_spans(v, num_patches, num_images, attention, dense_mask)
    mask = DENSE_MASK_BYTES[attention] if dense else 0
    chunks = {span: _num_concurrent_chunks(v, num_patches, num_images, span) for _, span in spans}
    return max((bytes_per_score * v.num_heads * chunks[span] + mask) * span * span for _, span in spans)


def vision_backward_transient_bytes(v: VisionArch, num_patches: int, num_images: int,
                                    attention: AttentionImpl, checkpointing: bool, *,
                                    dense_mask: bool = False) -> int:
    """Extra memory while backpropagating through one block: the gradient into and out of it
    (2 × 2h per patch), with checkpointing the recomputed block's saved tensors (the largest
    kind), and for eager scores the fp32 softmax gradients of one chunk (8 B per score).
    Source: torch.utils.checkpoint recomputes one block at a time; SoftmaxBackward."""
    total = num_patches * num_images
    grads = 2 * B * v.hidden_size * total
    spans = attention_spans(v, num_patches, num_images, attention, dense_mask)
    block_attention = _block_attention(v, attention, dense_mask)
    recompute = (max(vision_block_saved_bytes_per_patch(v, block_attention, s) for _, s in spans) * total
                 if checkpointing else 0)
    scores = _eager_score_bytes(v, attention, num_patches, num_images, dense_mask, EAGER_SCORE_GRAD_BYTES)
    return grads + recompute + scores


def _inference_parts_per_patch(v: VisionArch, attention: AttentionImpl) -> tuple[int, int, int, int, int]:
    """(norm, qkv, rotary, rest, MLP) transient bytes per patch inside one block under no_grad.

    Norm: HF RMSNorm's fp32 upcast and product 2·4h; LayerNorm its output 2h. Attention: the
    qkv output 6h (InternViT eager: + its scaled q), then for Qwen either the fp32 rotary
    temporaries (6·4h) or, once they are freed, the rotated q, k and the output (and its
    contiguous copy unless flash) beside the eager scores; other towers the output (+ copy).
    MLP: SwiGLU gate-activation, up, product 3·2I; GELU fc1 + GELU 2·2I; QuickGELU fc1, the
    sigmoid and the product 3·2I.
    """
    h, i, tower = v.hidden_size, v.intermediate_size, _tower(v)
    attention = _effective_attention(v, attention)
    norm = 2 * F * h if v.norm_type != "layer_norm" else B * h
    copy = 0 if attention == AttentionImpl.flash_attention_2 else B * h
    mlp = (2 if mlp_kind(v) == GELU else 3) * B * i
    if tower == QWEN2_5_VL:
        return norm, 3 * B * h, ROTARY_FP32_TEMPORARIES * F * h, 2 * B * h + B * h + copy, mlp
    scaled_q = B * h if tower == INTERN_VIT and attention == AttentionImpl.eager else 0
    return norm, 3 * B * h + scaled_q, 0, B * h + copy, mlp


def inference_held_bytes_per_patch(v: VisionArch) -> int:
    """What a Qwen tower's no-grad forward keeps for its whole length besides the residual
    stream: the bf16 copy of `pixel_values` (2·C·t·p², `get_image_features` casts them to the
    tower's dtype and keeps the reference through the call) and the fp32 rotary cos/sin tables
    (2·4·head_dim); Qwen3-VL also its fp32 resampled position embeddings (the ``pos_embeds``
    local, 4h) and, by its last blocks, every deepstack feature (bf16 at the LLM's width, per
    token of m² patches). Source: transformers qwen2_5_vl/modeling_qwen2_5_vl.py
    (`get_image_features`, `Qwen2_5_VisionTransformerPretrainedModel.forward`),
    qwen3_vl/modeling_qwen3_vl.py (`Qwen3VLVisionModel.forward`); `oomless trace`."""
    if _tower(v) != QWEN2_5_VL:
        return 0
    pixels = B * v.in_chans * max(v.temporal_patch_size, 1) * v.patch_size * v.patch_size
    table = F * v.hidden_size if v.num_position_embeddings else 0
    deepstack = len(v.deepstack_visual_indexes) * B * v.out_hidden_size // v.spatial_merge_size ** 2
    return pixels + 2 * F * (v.hidden_size // v.num_heads) + table + deepstack


def inference_score_bytes(v: VisionArch) -> int:
    """Bytes per eager attention score alive at the no-grad peak (InternViT: its bf16 softmax twice)."""
    return 2 * INTERN_EAGER_SCORE_BYTES if _tower(v) == INTERN_VIT else HF_EAGER_INFERENCE_SCORE_BYTES


def vision_inference_peak_bytes(v: VisionArch, num_patches: int, num_images: int, attention: AttentionImpl,
                                *, dense_mask: bool = False) -> int:
    """Activation peak of a no-grad tower forward (frozen tower in training, log-prob passes,
    vLLM's encoder profile, assumed to follow transformers' tower): residual stream and block
    input (2 × 2h per patch), what the forward holds throughout (`inference_held_bytes_per_patch`)
    and the largest block-internal transient, the eager scores of the chunks alive at once
    beside the rotated q, k (`HF_EAGER_INFERENCE_SCORE_BYTES`; plus a dense mask). The
    projector's transients are smaller than a block's (its input is the last block's).
    Same shape as `activations.inference_layer_peak_bytes_per_token`; checked per patch
    against `oomless trace` (sdpa, flash, eager).
    """
    total = num_patches * num_images
    norm, qkv, rotary, rest, mlp = _inference_parts_per_patch(v, attention)
    scores = _eager_score_bytes(v, attention, num_patches, num_images, dense_mask, inference_score_bytes(v))
    block = max(norm * total, qkv * total + max(rotary * total, rest * total + scores), mlp * total)
    return (2 * B * v.hidden_size + inference_held_bytes_per_patch(v)) * total + block
