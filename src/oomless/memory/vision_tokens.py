"""Vision towers' image tokens and patches: the processors' resize and tiling rules, and the
worst case the declared limits allow.

Towers: Qwen2.5-VL (`smart_resize`, 28-px factor, 2×2 merge), InternVL (448-px dynamic tiles plus
a thumbnail, 256 tokens per tile) and gemma3 (SigLIP, a fixed 256 tokens). Pure functions of
plain ints and a ``VisionArch``. The tower's memory is in `memory.vision`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

from ..catalog.vision import VisionArch
from ..errors import InputError
from . import constants as C
from .vision_params import CLASS_TOKENS

QWEN2_5_VL = "qwen2_5_vl"
INTERN_VIT = "intern_vit_6b"
SIGLIP = "siglip_vision_model"
CLIP = "clip_vision_model"
IDEFICS3 = "idefics3_vision"
QWEN_RESIZE_TOWERS = frozenset({QWEN2_5_VL, "qwen2_vl", "qwen3_vl"})
"""Dynamic resolution by ``smart_resize`` (factor = patch × merge: 28 for Qwen2/2.5-VL, 32 for
Qwen3-VL's 16-pixel patches). Source: transformers image_processing_qwen2_vl.py; Qwen3-VL reuses
the Qwen2-VL image processor with patch_size 16 (qwen3_vl/processing_qwen3_vl.py)."""
TILED_TOWERS = frozenset({INTERN_VIT, "internvl_vision"})
"""InternVL's dynamic tiles of ``image_size`` plus a thumbnail, one class token per tile
(remote-code InternViT and the HF port's InternVLVisionEmbeddings alike)."""
FIXED_TOWERS = frozenset({SIGLIP, CLIP})
"""One fixed-size input per image: gemma3 (SigLIP, pooled to ``mm_tokens_per_image``), LLaVA-1.5
(CLIP 336/14: 576 patch tokens, the class token dropped by ``vision_feature_select_strategy``
"default")."""
IDEFICS3_MAX_TILES_PER_SIDE = 4
"""Idefics3/SmolVLM split an image whose longest edge is resized to at most
4 × ``max_image_size`` into tiles of ``max_image_size`` (the tower's ``image_size``), plus one
global image. Source: transformers image_processing_idefics3.py (defaults
``size={"longest_edge": 4 * 364}``, ``max_image_size={"longest_edge": 364}``, ``do_image_splitting``)."""
TOWERS = (QWEN2_5_VL, "qwen2_vl", "qwen3_vl", INTERN_VIT, "internvl_vision", SIGLIP, CLIP, IDEFICS3)


def _tower(v: VisionArch) -> str:
    if v.model_type not in TOWERS:
        raise InputError("model", f"vision tower {v.model_type!r} is not supported; "
                         f"supported: {', '.join(TOWERS)}")
    if v.model_type in QWEN_RESIZE_TOWERS:
        return QWEN2_5_VL
    if v.model_type in TILED_TOWERS:
        return INTERN_VIT
    return v.model_type


def _fixed_tokens(v: VisionArch) -> int:
    """LLM tokens of one fixed-size input: the config's ``mm_tokens_per_image`` (gemma3), else
    the patch grid over the projector's merge (LLaVA: (336/14)² = 576)."""
    return v.mm_tokens_per_image or num_patches_per_tile(v) // max(v.spatial_merge_size, 1) ** 2


def _idefics3_tiles() -> int:
    return IDEFICS3_MAX_TILES_PER_SIDE ** 2 + 1


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
    if tower == IDEFICS3:
        side = IDEFICS3_MAX_TILES_PER_SIDE * v.image_size
        scale = min(1.0, side / max(height, width))
        rows, cols = (math.ceil(height * scale / v.image_size), math.ceil(width * scale / v.image_size))
        tiles = rows * cols + int(rows * cols > 1)
        return tiles * num_tokens_per_tile(v)
    return _fixed_tokens(v)


def _patches_of_tokens(v: VisionArch, num_tokens: int) -> int:
    """Tower sequence length behind ``num_tokens`` LLM tokens of one image."""
    tower = _tower(v)
    if tower == QWEN2_5_VL:
        return num_tokens * v.spatial_merge_size ** 2
    if tower == INTERN_VIT:
        return num_tokens // num_tokens_per_tile(v) * (num_patches_per_tile(v) + CLASS_TOKENS)
    if tower == IDEFICS3:
        return num_tokens // num_tokens_per_tile(v) * num_patches_per_tile(v)
    return num_patches_per_tile(v) + (CLASS_TOKENS if tower == CLIP else 0)


def num_image_patches(v: VisionArch, height: int, width: int, *, min_pixels: int = C.QWEN_VL_MIN_PIXELS,
                      max_pixels: int = C.QWEN_VL_MAX_PIXELS, max_tiles: int = C.INTERNVL_MAX_TILES) -> int:
    """The tower's sequence length for one image: Qwen 4 patches per token (merge 2×2);
    InternViT 1024 patches + 1 class token per tile; SigLIP (gemma3) 64² = 4096."""
    tokens = num_image_tokens(v, height, width, min_pixels=min_pixels, max_pixels=max_pixels,
                              max_tiles=max_tiles)
    return _patches_of_tokens(v, tokens)


# --- worst case under the declared limits ---------------------------------------------------

Ratio = tuple[int, int]
"""An exact positive rational W/H as (numerator, denominator), not necessarily reduced: the
worst-case search below only compares, averages and floors them, all exact in integers. With a
`Fraction` per point (its gcd, its comparisons in the sort) the search for 602,112 px took
~40 ms of every process that plans Qwen2.5-VL, ~15 ms with the pairs (equal steps and maxima on
300 random limit sets)."""


def _less(a: Ratio, b: Ratio) -> bool:
    return a[0] * b[1] < b[0] * a[1]


def _merged(xs: list[Ratio], ys: list[Ratio]) -> list[Ratio]:
    """Two ascending lists as one, values that are equal kept once."""
    out: list[Ratio] = []
    i = j = 0
    while i < len(xs) or j < len(ys):
        take_x = j == len(ys) or (i < len(xs) and not _less(ys[j], xs[i]))
        r = xs[i] if take_x else ys[j]
        i, j = (i + 1, j) if take_x else (i, j + 1)
        if not out or _less(out[-1], r):
            out.append(r)
    return out


def _ratio_steps(pixels: int, f: int) -> list[Ratio]:
    """Aspect ratios r = W/H in [1/200, 200] where √(pixels·r)/f or √(pixels/r)/f is an
    integer (where a scaled side can change), plus both ends, in order: r = s/pixels and
    r = pixels/s for the squares s = (f·k)² with both inside the range (the same condition)."""
    most = C.QWEN_VL_MAX_ASPECT_RATIO
    squares = [s for s in ((f * k) ** 2 for k in range(1, math.isqrt(pixels * most) // f + 2))
               if pixels <= most * s and s <= most * pixels]
    rising = [(s, pixels) for s in squares]
    falling = [(pixels, s) for s in reversed(squares)]
    return _merged([(1, most)], _merged(_merged(rising, falling), [(most, 1)]))


def _max_over_ratios(height_side: Callable[[Ratio], int], width_side: Callable[[Ratio], int],
                     pixels: int, f: int) -> int:
    """sup over r of height_side(r) · width_side(r), the first non-increasing and the second
    non-decreasing step functions of r stepping only at ``_ratio_steps``: each open interval
    (its midpoint), and each step with the height side from just before and the width side
    from just after it, which also covers HF's float β landing a hair off a step."""
    steps = _ratio_steps(pixels, f)
    mids = [(a[0] * b[1] + b[0] * a[1], 2 * a[1] * b[1]) for a, b in zip(steps, steps[1:])]
    best = max((height_side(m) * width_side(m) for m in mids), default=0)
    for i, r in enumerate(steps):
        before, after = mids[i - 1] if i else r, mids[i] if i < len(mids) else r
        best = max(best, height_side(before) * width_side(after))
    return best


def _floor_root_of(num: int, den: int, f: int) -> int:
    """⌊√q / f⌋ exactly for q = num/den (den > 0): the largest m with (m·f)² ≤ q, from the
    integer ⌊q⌋ (the same whether or not the pair is reduced; no Fraction is built)."""
    return math.isqrt(num // den) // f


def _ceil_root_of(num: int, den: int, f: int) -> int:
    """⌈√q / f⌉ exactly for q = num/den (den > 0): m·f must reach t = ⌈√q⌉; t² < q ⇔
    t²·den < num."""
    t = math.isqrt(num // den)
    t += t * t * den < num
    return -(-t // f)


def _max_downscaled_tokens(f: int, max_pixels: int) -> int:
    """Downscale branch: sides max(1, ⌊√(max/r)/f⌋) and max(1, ⌊√(max·r)/f⌋) of r = W/H
    (r = p/q: max/r = max·q/p, max·r = max·p/q, in integers)."""
    return _max_over_ratios(lambda r: max(1, _floor_root_of(max_pixels * r[1], r[0], f)),
                            lambda r: max(1, _floor_root_of(max_pixels * r[0], r[1], f)), max_pixels, f)


def _max_upscaled_tokens(f: int, min_pixels: int) -> int:
    """Upscale branch: sides ⌈√(min/r)/f⌉ and ⌈√(min·r)/f⌉ of r = W/H (in integers, as above)."""
    return _max_over_ratios(lambda r: _ceil_root_of(min_pixels * r[1], r[0], f),
                            lambda r: _ceil_root_of(min_pixels * r[0], r[1], f), min_pixels, f)


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
    if tower == IDEFICS3:
        return _idefics3_tiles() * num_tokens_per_tile(v)
    return _fixed_tokens(v)


def max_image_patches(v: VisionArch, *, max_pixels: int = C.QWEN_VL_MAX_PIXELS,
                      min_pixels: int = C.QWEN_VL_MIN_PIXELS, max_tiles: int = C.INTERNVL_MAX_TILES) -> int:
    """Tower sequence length of the worst-case image (Qwen 16,384 tokens → 65,536 patches)."""
    tokens = max_image_tokens(v, max_pixels=max_pixels, min_pixels=min_pixels, max_tiles=max_tiles)
    return _patches_of_tokens(v, tokens)
