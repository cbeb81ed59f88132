"""Vision towers: LLM tokens and tower patches per image, and the tower's activation memory.

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

import math
from collections.abc import Callable
from fractions import Fraction
from functools import lru_cache

from ..catalog.vision import VisionArch
from ..errors import InputError
from ..spec.run import AttentionImpl
from . import constants as C
from .activations import rmsnorm_saved_bytes_per_token
from .vision_params import CLASS_TOKENS

B = C.BF16_BYTES
F = C.FP32_BYTES

QWEN2_5_VL = "qwen2_5_vl"
INTERN_VIT = "intern_vit_6b"
SIGLIP = "siglip_vision_model"
TOWERS = (QWEN2_5_VL, INTERN_VIT, SIGLIP)

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
ROTARY_FP32_TEMPORARIES = 5
"""`apply_rotary_pos_emb_vision` upcasts q and k to fp32 and forms q·cos + rotate_half(q)·sin:
q, k, q·cos, rotate_half(q)·sin and their sum (fp32, h each) are alive at once."""


def _tower(v: VisionArch) -> str:
    if v.model_type not in TOWERS:
        raise InputError("model", f"vision tower {v.model_type!r} is not supported; "
                         f"supported: {', '.join(TOWERS)}")
    return v.model_type


# --- tokens and patches per image ----------------------------------------------------------

def smart_resize(height: int, width: int, factor: int = 28, min_pixels: int = C.QWEN_VL_MIN_PIXELS,
                 max_pixels: int = C.QWEN_VL_MAX_PIXELS) -> tuple[int, int]:
    """(height, width) Qwen2-VL's processor resizes an image to, multiples of ``factor``.

    Round each side to the nearest multiple (Python's round, halves to even); if that exceeds
    max_pixels scale by β = √(hw/max) and floor (never below one factor), if it falls below
    min_pixels scale by √(min/hw) and ceil. Source: transformers
    `models/qwen2_vl/image_processing_qwen2_vl.py` `smart_resize` (4.5x; the same float
    operations, so results match bit for bit). Older transformers (4.45) lacked the
    max(factor, ·) clamp and rejected sides < 10 px; qwen-vl-utils also clamps the first
    rounding, which differs only for sides < 14 px.
    Assumes: integer pixel sizes; aspect ratio ≤ 200 as the processor requires.
    """
    if min_pixels < 1 or max_pixels < min_pixels:
        raise InputError("max_pixels", f"min_pixels={min_pixels}, max_pixels={max_pixels}; "
                         "need 1 <= min_pixels <= max_pixels")
    if height < 1 or width < 1:
        raise InputError("image", f"height={height}, width={width}; both must be positive")
    if max(height, width) / min(height, width) > C.QWEN_VL_MAX_ASPECT_RATIO:
        raise InputError("image", f"aspect ratio of {height}x{width} exceeds "
                         f"{C.QWEN_VL_MAX_ASPECT_RATIO}, which Qwen2-VL's processor rejects")
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def internvl_tile_grid(height: int, width: int, max_tiles: int = C.INTERNVL_MAX_TILES,
                       min_tiles: int = C.INTERNVL_MIN_TILES, tile_size: int = 448) -> tuple[int, int]:
    """(columns, rows) of tiles InternVL's `dynamic_preprocess` cuts an image into.

    The grid i×j (min ≤ ij ≤ max) whose aspect i/j is closest to width/height; on a tie the
    larger grid wins if the image's area exceeds half of the grid's. Source: InternVL
    `dynamic_preprocess` / `find_closest_aspect_ratio` (model-card load_image code), same
    float comparisons and candidate order.
    """
    if height < 1 or width < 1 or not 1 <= min_tiles <= max_tiles:
        raise InputError("image", f"height={height}, width={width}, tiles {min_tiles}..{max_tiles}; "
                         "sizes must be positive and 1 <= min_tiles <= max_tiles")
    grids = sorted({(i, j) for n in range(min_tiles, max_tiles + 1) for i in range(1, n + 1)
                    for j in range(1, n + 1) if min_tiles <= i * j <= max_tiles},
                   key=lambda g: g[0] * g[1])
    aspect, area = width / height, width * height
    best_diff, best = float("inf"), (1, 1)
    for grid in grids:
        diff = abs(aspect - grid[0] / grid[1])
        if diff < best_diff:
            best_diff, best = diff, grid
        elif diff == best_diff and area > 0.5 * tile_size * tile_size * grid[0] * grid[1]:
            best = grid
    return best


def num_internvl_tiles(height: int, width: int, max_tiles: int = C.INTERNVL_MAX_TILES,
                       tile_size: int = 448) -> int:
    """Tiles of one image: the chosen grid, plus a thumbnail tile when the grid has > 1 tile
    (InternVL configs' `use_thumbnail: true`)."""
    cols, rows = internvl_tile_grid(height, width, max_tiles, C.INTERNVL_MIN_TILES, tile_size)
    tiles = cols * rows
    return tiles + int(C.INTERNVL_USE_THUMBNAIL and tiles > 1)


def _qwen_factor(v: VisionArch) -> int:
    """Pixels per LLM token side: patch 14 × merge 2 = 28."""
    return v.patch_size * v.spatial_merge_size


def num_patches_per_tile(v: VisionArch) -> int:
    """Fixed-size towers: (image_size / patch)² patches (InternViT 448/14 → 1024, SigLIP 4096)."""
    return (v.image_size // v.patch_size) ** 2


def num_tokens_per_tile(v: VisionArch) -> int:
    """InternVL: pixel shuffle 0.5 merges 2×2 patches: 1024 / 4 = 256 LLM tokens per tile."""
    return num_patches_per_tile(v) // v.spatial_merge_size ** 2


def num_image_tokens(v: VisionArch, height: int, width: int, *, min_pixels: int = C.QWEN_VL_MIN_PIXELS,
                     max_pixels: int = C.QWEN_VL_MAX_PIXELS, max_tiles: int = C.INTERNVL_MAX_TILES) -> int:
    """LLM tokens one image becomes.

    Qwen2.5-VL: (H′/28)(W′/28) after ``smart_resize``. InternVL: tiles × 256. gemma3: the
    config's `mm_tokens_per_image` (256; pan-and-scan off, its processor default).
    Arguments a tower does not use are ignored. Source: `smart_resize` + Qwen2VLImageProcessor
    grid; InternVL `dynamic_preprocess` and `num_image_token`; Gemma3Processor.
    """
    tower = _tower(v)
    if tower == QWEN2_5_VL:
        f = _qwen_factor(v)
        h, w = smart_resize(height, width, f, min_pixels, max_pixels)
        return (h // f) * (w // f)
    if tower == INTERN_VIT:
        return num_internvl_tiles(height, width, max_tiles, v.image_size) * num_tokens_per_tile(v)
    if height < 1 or width < 1:
        raise InputError("image", f"height={height}, width={width}; both must be positive")
    return v.mm_tokens_per_image


def _patches_of_tokens(v: VisionArch, num_tokens: int) -> int:
    """Tower sequence length behind ``num_tokens`` LLM tokens of one image."""
    tower = _tower(v)
    if tower == QWEN2_5_VL:
        return num_tokens * v.spatial_merge_size ** 2
    if tower == INTERN_VIT:
        return num_tokens // num_tokens_per_tile(v) * (num_patches_per_tile(v) + CLASS_TOKENS)
    return num_patches_per_tile(v)


def num_image_patches(v: VisionArch, height: int, width: int, *, min_pixels: int = C.QWEN_VL_MIN_PIXELS,
                      max_pixels: int = C.QWEN_VL_MAX_PIXELS, max_tiles: int = C.INTERNVL_MAX_TILES) -> int:
    """The tower's sequence length for one image: Qwen 4 patches per token (merge 2×2);
    InternViT 1024 patches + 1 class token per tile; SigLIP (gemma3) 64² = 4096."""
    tokens = num_image_tokens(v, height, width, min_pixels=min_pixels, max_pixels=max_pixels,
                              max_tiles=max_tiles)
    return _patches_of_tokens(v, tokens)


# --- worst case under the declared limits ---------------------------------------------------

def _floor_root_over(q: Fraction, f: int) -> int:
    """⌊√q / f⌋ exactly: the largest m with (m·f)² ≤ q."""
    return math.isqrt(q.numerator // q.denominator) // f


def _ceil_root_over(q: Fraction, f: int) -> int:
    """⌈√q / f⌉ exactly: m·f must reach t = ⌈√q⌉."""
    t = math.isqrt(q.numerator // q.denominator)
    t += t * t < q
    return -(-t // f)


def _ratio_steps(pixels: int, f: int) -> list[Fraction]:
    """Aspect ratios r = W/H in [1/200, 200] where √(pixels·r)/f or √(pixels/r)/f is an
    integer (where a scaled side can change), plus both ends, in order."""
    lo, hi = Fraction(1, C.QWEN_VL_MAX_ASPECT_RATIO), Fraction(C.QWEN_VL_MAX_ASPECT_RATIO)
    points = {lo, hi}
    for k in range(1, math.isqrt(pixels * C.QWEN_VL_MAX_ASPECT_RATIO) // f + 2):
        points.update(r for r in (Fraction((f * k) ** 2, pixels), Fraction(pixels, (f * k) ** 2))
                      if lo <= r <= hi)
    return sorted(points)


def _max_over_ratios(height_side: Callable[[Fraction], int], width_side: Callable[[Fraction], int],
                     pixels: int, f: int) -> int:
    """sup over r of height_side(r) · width_side(r), the first non-increasing and the second
    non-decreasing step functions of r stepping only at ``_ratio_steps``: each open interval
    (its midpoint), and each step with the height side from just before and the width side
    from just after it, which also covers HF's float β landing a hair off a step."""
    steps = _ratio_steps(pixels, f)
    mids = [(a + b) / 2 for a, b in zip(steps, steps[1:])]
    best = max((height_side(m) * width_side(m) for m in mids), default=0)
    for i, r in enumerate(steps):
        before, after = mids[i - 1] if i else r, mids[i] if i < len(mids) else r
        best = max(best, height_side(before) * width_side(after))
    return best


def _max_downscaled_tokens(f: int, max_pixels: int) -> int:
    """Downscale branch: sides max(1, ⌊√(max/r)/f⌋) and max(1, ⌊√(max·r)/f⌋) of r = W/H."""
    return _max_over_ratios(lambda r: max(1, _floor_root_over(max_pixels / r, f)),
                            lambda r: max(1, _floor_root_over(max_pixels * r, f)), max_pixels, f)


def _max_upscaled_tokens(f: int, min_pixels: int) -> int:
    """Upscale branch: sides ⌈√(min/r)/f⌉ and ⌈√(min·r)/f⌉ of r = W/H."""
    return _max_over_ratios(lambda r: _ceil_root_over(min_pixels / r, f),
                            lambda r: _ceil_root_over(min_pixels * r, f), min_pixels, f)


def _rounds_within_ratio(a: int, b: int, f: int) -> bool:
    """Some integer H, W with round(H/f) = a, round(W/f) = b and aspect ≤ 200 exists: take the
    largest H and the smallest W (a ≤ b). A tie H = f·a + f/2 rounds to even."""
    half, even = f // 2, f % 2 == 0
    largest_h = f * a + half - (a % 2 if even else 0)
    smallest_w = f * b - half + (b % 2 if even else 0)
    return max(largest_h, smallest_w) <= C.QWEN_VL_MAX_ASPECT_RATIO * min(largest_h, smallest_w)


def _max_rounded_tokens(f: int, min_pixels: int, max_pixels: int) -> int:
    """Rounded branch (min ≤ a·b·f² ≤ max): the largest t = a·b, a ≤ b, reachable by rounding.
    t = ⌊√n⌋² (a = b) always is, so the search stops quickly."""
    n, lowest = max_pixels // (f * f), max(1, -(-min_pixels // (f * f)))
    for t in range(n, lowest - 1, -1):
        if any(t % a == 0 and _rounds_within_ratio(a, t // a, f) for a in range(math.isqrt(t), 0, -1)):
            return t
    return 0


@lru_cache(maxsize=256)
def max_smart_resize_tokens(factor: int, min_pixels: int, max_pixels: int) -> int:
    """The most (H′/f)(W′/f) ``smart_resize`` can return for any image of aspect ≤ 200.

    Proof sketch. Let n = ⌊max/f²⌋. The processor ends in one of three branches:
    (1) rounded: H′W′ ≤ max, so tokens ≤ n; t = a·b is reachable iff rounding some H, W of
        aspect ≤ 200 gives (a, b): searched exactly from t = n down;
    (2) downscaled: H/β = √(max·H/W), so the sides depend on r = W/H alone, and any rational r
        is reached by a large enough image. ⌊x⌋⌊y⌋ ≤ xy = max/f² ≤ n, except where
        max(f, ·) lifts a zero side: a sliver of aspect 200 keeps ⌊√(200·max)/f⌋ tokens,
        more than n when max < 200·f² (156,800 px at f = 28);
    (3) upscaled: ⌈x⌉⌈y⌉ with xy = min/f² exceeds n when min_pixels is near max_pixels
        (min = max = 602,112: a 500×500 image becomes 784×784, 784 tokens).
    (2) and (3) are step functions of r, maximised with exact rationals over every interval
    and step; where both sides step at once HF's float β can land past either step, so both
    upper values are taken (min = max = 602,112: a 19×3648 image gets 3·385 = 1,155 tokens).
    Hence n bounds the answer only for ordinary limits, and is attained iff (1) reaches
    t = n: 12,845,056 → 16,384 = 128², 1,003,520 → 1,280 = 32·40, 602,112 → 768 = 24·32.
    """
    return max(_max_rounded_tokens(factor, min_pixels, max_pixels),
               _max_downscaled_tokens(factor, max_pixels),
               _max_upscaled_tokens(factor, min_pixels))


def max_image_tokens(v: VisionArch, *, max_pixels: int = C.QWEN_VL_MAX_PIXELS,
                     min_pixels: int = C.QWEN_VL_MIN_PIXELS, max_tiles: int = C.INTERNVL_MAX_TILES) -> int:
    """Worst-case LLM tokens of one image under the declared limits.

    Qwen2.5-VL: ``max_smart_resize_tokens``. InternVL: a 1×max_tiles grid is chosen by an image
    of that aspect, plus the thumbnail: (12 + 1) × 256 = 3,328. gemma3: 256.
    """
    tower = _tower(v)
    if tower == QWEN2_5_VL:
        if min_pixels < 1 or max_pixels < min_pixels:
            raise InputError("max_pixels", f"min_pixels={min_pixels}, max_pixels={max_pixels}; "
                             "need 1 <= min_pixels <= max_pixels")
        return max_smart_resize_tokens(_qwen_factor(v), min_pixels, max_pixels)
    if tower == INTERN_VIT:
        if max_tiles < 1:
            raise InputError("max_tiles", f"max_tiles={max_tiles}; must be at least 1")
        return (max_tiles + int(C.INTERNVL_USE_THUMBNAIL and max_tiles > 1)) * num_tokens_per_tile(v)
    return v.mm_tokens_per_image


def max_image_patches(v: VisionArch, *, max_pixels: int = C.QWEN_VL_MAX_PIXELS,
                      min_pixels: int = C.QWEN_VL_MIN_PIXELS, max_tiles: int = C.INTERNVL_MAX_TILES) -> int:
    """Tower sequence length of the worst-case image (Qwen 16,384 tokens → 65,536 patches)."""
    tokens = max_image_tokens(v, max_pixels=max_pixels, min_pixels=min_pixels, max_tiles=max_tiles)
    return _patches_of_tokens(v, tokens)


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


def vision_mlp_saved_bytes_per_patch(v: VisionArch) -> int:
    """Qwen SwiGLU (biases change nothing): input 2h, gate 2I, SiLU 2I, up 2I, product 2I
    = 2h + 8I. GELU MLP (InternViT, SigLIP): input 2h, fc1 output 2I (GELU backward), GELU
    output 2I (fc2 input) = 2h + 4I; InternViT's `mlp(...) * ls2` adds 2h.
    Source: Qwen2_5_VLMLP (bias=True), InternMLP, SiglipMLP (gelu_pytorch_tanh)."""
    h, i, tower = v.hidden_size, v.intermediate_size, _tower(v)
    if tower == QWEN2_5_VL:
        return B * h + 4 * B * i
    return B * h + 2 * B * i + (B * h if tower == INTERN_VIT else 0)


def vision_block_saved_bytes_per_patch(v: VisionArch, attention: AttentionImpl, window_len: int) -> int:
    """All bytes one tower block saves per patch without checkpointing: two norms + attention
    (keys per patch ``window_len``) + MLP; residual adds save nothing.
    Source: Qwen2_5_VLVisionBlock, InternVisionEncoderLayer, SiglipEncoderLayer forwards.
    Assumes: the tower is trained (a frozen tower saves nothing)."""
    return (2 * vision_norm_saved_bytes_per_patch(v)
            + vision_attention_saved_bytes_per_patch(v, attention, window_len)
            + vision_mlp_saved_bytes_per_patch(v))


def vision_embedding_saved_bytes_per_patch(v: VisionArch) -> int:
    """Saved once per patch outside the blocks by a trained tower: the patch-embedding conv's
    bf16 input C·t·p² (Qwen Conv3d over its 2 frames, else Conv2d), Qwen's fp32 rotary cos and
    sin (2·4·head_dim), SigLIP's post_layernorm. Source: Qwen2_5_VisionPatchEmbed (Conv3d on
    `hidden_states.to(weight dtype)`), `apply_rotary_pos_emb_vision`, SiglipVisionTransformer.
    Assumes: InternViT's class token is charged as a patch (1 in 1,025)."""
    tower = _tower(v)
    pixels = B * v.in_chans * v.temporal_patch_size * v.patch_size ** 2
    rotary = 2 * F * (v.hidden_size // v.num_heads) if tower == QWEN2_5_VL else 0
    post_norm = vision_norm_saved_bytes_per_patch(v) if tower == SIGLIP else 0
    return pixels + rotary + post_norm


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


def _inference_parts_per_patch(v: VisionArch, attention: AttentionImpl) -> tuple[int, int, int]:
    """(norm, attention, MLP) transient bytes per patch inside one block under no_grad.

    Norm: HF RMSNorm's fp32 upcast and product 2·4h; LayerNorm its output 2h. Attention: the
    6h qkv output plus, for Qwen, the larger of the fp32 rotary temporaries (5·4h) and the
    rotated q, k, out (and proj copy unless flash); others out (+ copy, + scaled q for
    InternViT eager). MLP: SwiGLU gate-activation, up, product 3·2I; GELU fc1 + GELU 2·2I.
    """
    h, i, tower = v.hidden_size, v.intermediate_size, _tower(v)
    attention = _effective_attention(v, attention)
    norm = 2 * F * h if v.norm_type != "layer_norm" else B * h
    copy = 0 if attention == AttentionImpl.flash_attention_2 else B * h
    if tower == QWEN2_5_VL:
        attn = 3 * B * h + max(ROTARY_FP32_TEMPORARIES * F * h, 2 * B * h + B * h + copy)
        mlp = 3 * B * i
    else:
        scaled_q = B * h if tower == INTERN_VIT and attention == AttentionImpl.eager else 0
        attn = 3 * B * h + scaled_q + B * h + copy
        mlp = 2 * B * i
    return norm, attn, mlp


def vision_inference_peak_bytes(v: VisionArch, num_patches: int, num_images: int, attention: AttentionImpl,
                                *, dense_mask: bool = False) -> int:
    """Activation peak of a no-grad tower forward (frozen tower in training, log-prob passes,
    vLLM's encoder profile): residual stream and block input (2 × 2h per patch) plus the
    largest block-internal transient, eager scores of the chunks alive at once included
    (bf16 scores beside their fp32 softmax, 6 B; InternViT 2 × 2 B; plus a dense mask).
    The projector's transients are smaller than a block's (its input is the last block's).
    Same shape as `activations.inference_layer_peak_bytes_per_token`.
    """
    total = num_patches * num_images
    norm, attn, mlp = _inference_parts_per_patch(v, attention)
    score_bytes = 2 * INTERN_EAGER_SCORE_BYTES if _tower(v) == INTERN_VIT else HF_EAGER_SCORE_BYTES
    scores = _eager_score_bytes(v, attention, num_patches, num_images, dense_mask, score_bytes)
    return 2 * B * v.hidden_size * total + max(norm * total, attn * total + scores, mlp * total)


# --- projector and encoder outputs ---------------------------------------------------------

def merger_saved_bytes(v: VisionArch, num_patches: int, num_images: int) -> int:
    """Activations a trained projector saves (it is often trained with the tower frozen).

    Qwen PatchMerger per patch: ln_q RMSNorm 6h, mlp.0 input 2h, GELU input 2h, GELU output
    (mlp.2 input) 2h = 12h (per token of m² patches the same ×m²).
    InternVL mlp1 per token (pixel-shuffled width m²h): LayerNorm input 2m²h + stats, Linear
    input 2m²h, GELU input and output 2·2·out.
    gemma3 per patch avg_pool2d input 2h; per token Gemma3RMSNorm fp32 input and normed 2·4h,
    matmul input 2h. Source: Qwen2_5_VLPatchMerger, InternVLChatModel.mlp1,
    Gemma3MultiModalProjector.
    """
    tower, h, total = _tower(v), v.hidden_size, num_patches * num_images
    if tower == QWEN2_5_VL:
        return total * (rmsnorm_saved_bytes_per_token(h) + 3 * B * h)
    if tower == INTERN_VIT:
        tokens = _num_tokens_of_patches(v, num_patches) * num_images
        width = v.spatial_merge_size ** 2 * h
        return tokens * (2 * B * width + LAYERNORM_STATS_BYTES + 2 * B * v.out_hidden_size)
    tokens = v.mm_tokens_per_image * num_images
    return total * B * h + tokens * (2 * F * h + B * h)


def _num_tokens_of_patches(v: VisionArch, num_patches: int) -> int:
    """LLM tokens behind one image's ``num_patches`` (inverse of ``_patches_of_tokens``)."""
    tower = _tower(v)
    if tower == QWEN2_5_VL:
        return num_patches // v.spatial_merge_size ** 2
    if tower == INTERN_VIT:
        return num_patches // (num_patches_per_tile(v) + CLASS_TOKENS) * num_tokens_per_tile(v)
    return v.mm_tokens_per_image


def encoder_cache_bytes(v: VisionArch, num_tokens: int) -> int:
    """Encoder outputs vLLM keeps on the GPU: tokens × LLM hidden × 2 B (model dtype bf16).
    Source: vllm/v1/worker/gpu_model_runner.py `encoder_cache`, sized in tokens by
    `encoder_cache_size`."""
    return num_tokens * v.out_hidden_size * B


def vllm_encoder_budget_tokens(max_num_batched_tokens: int, max_tokens_per_image: int) -> int:
    """vLLM's encoder compute budget and cache size: max(max_num_batched_tokens, tokens of the
    largest item). Source: vllm/v1/core/encoder_cache_manager.py `compute_mm_encoder_budget`;
    SchedulerConfig sets max_num_encoder_input_tokens = encoder_cache_size =
    max_num_batched_tokens."""
    return max(max_num_batched_tokens, max_tokens_per_image)


def num_vllm_profile_images(encoder_budget_tokens: int, max_tokens_per_image: int, images_per_prompt: int,
                            max_model_len: int, max_num_seqs: int) -> int:
    """Worst-case images vLLM's profile run encodes in one batch: as many as the encoder budget
    holds, capped by max_num_seqs × min(limit_mm_per_prompt, max_model_len // tokens), ≥ 1.
    Source: vllm/multimodal/budget.py `MultiModalBudget._get_max_items` (chunked prefill on)."""
    per_prompt = max(1, min(images_per_prompt, max_model_len // max_tokens_per_image))
    return max(1, min(encoder_budget_tokens // max_tokens_per_image, max_num_seqs * per_prompt))
