"""Vision tokens and tower memory: processor examples, worst cases, a hand-derived tiny tower,
monotonicity, and the research notes' per-patch estimate."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oomless.catalog.resolve import load_model
from oomless.catalog.vision import VisionArch
from oomless.errors import InputError
from oomless.memory import vision as V
from oomless.spec.run import AttentionImpl

QWEN7B = load_model("Qwen/Qwen2.5-VL-7B-Instruct").vision
INTERNVL3 = load_model("OpenGVLab/InternVL3-8B").vision
GEMMA3 = load_model("google/gemma-3-4b-it").vision
S0_MAX_PIXELS = 602112  # 768 · 28²
PROFILE = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- smart_resize: published and hand-derived examples ----------------------------------------


def test_full_hd_at_the_qwen_vl_utils_default() -> None:
    # 1080/28 = 38.57 -> 39, 1920/28 = 68.57 -> 69;
    # 1092·1932 = 2,109,744 px lies inside [3136, 12,845,056], so no rescaling.
    assert V.smart_resize(1080, 1920) == (1092, 1932)
    assert V.num_image_tokens(QWEN7B, 1080, 1920) == 39 * 69 == 2691
    assert V.num_image_patches(QWEN7B, 1080, 1920) == 4 * 2691 == (1092 // 14) * (1932 // 14)


def test_full_hd_at_the_transformers_processor_default() -> None:
    # 2,109,744 > 1,003,520: β = √(1920·1080 / 1,003,520) = 1.4375;
    # 1080/β/28 = 26.8 -> 26, 1920/β/28 = 47.7 -> 47.
    beta = math.sqrt(1920 * 1080 / 1003520)
    assert (math.floor(1080 / beta / 28), math.floor(1920 / beta / 28)) == (26, 47)
    assert V.smart_resize(1080, 1920, max_pixels=V.C.HF_QWEN2_VL_PROCESSOR_MAX_PIXELS) == (728, 1316)
    assert V.num_image_tokens(QWEN7B, 1080, 1920, max_pixels=1003520) == 26 * 47 == 1222


@pytest.mark.parametrize(("side", "tokens"), [(1024, 1369), (1008, 1296), (896, 1024)])
def test_published_square_examples(side: int, tokens: int) -> None:
    # visionsqueezer.com/providers/qwen (qwen_vl_utils defaults):
    # 1024² -> 1,369, 1008² -> 1,296, 896² -> 1,024 tokens.
    assert V.num_image_tokens(QWEN7B, side, side) == tokens


def test_below_min_pixels_scales_up_with_ceil() -> None:
    # 30x60 rounds to 28x56 = 1568 < 3136: β = √(3136/1800) = 1.32;
    # 30β/28 = 1.41 -> 2, 60β/28 = 2.83 -> 3.
    assert V.smart_resize(30, 60) == (56, 84)
    # 20x20 rounds to 28x28 = 784 < 3136: β = 2.8, 56/28 -> 2: the 4-token minimum.
    assert V.smart_resize(20, 20) == (56, 56)
    assert V.num_image_tokens(QWEN7B, 20, 20) == 4


@pytest.mark.parametrize(("height", "width"), [(0, 10), (10, -1), (10, 2001)])
def test_bad_images_are_input_errors(height: int, width: int) -> None:
    with pytest.raises(InputError) as err:
        V.smart_resize(height, width)
    assert err.value.field == "image"


def test_bad_pixel_limits_are_input_errors() -> None:
    with pytest.raises(InputError):
        V.smart_resize(100, 100, min_pixels=10_000, max_pixels=5_000)
    with pytest.raises(InputError):
        V.max_image_tokens(QWEN7B, max_pixels=0)


# --- worst cases --------------------------------------------------------------------------------


@pytest.mark.parametrize(("max_pixels", "tokens"), [(12845056, 16384), (1003520, 1280), (S0_MAX_PIXELS, 768)])
def test_worst_case_attains_floor_of_max_over_784(max_pixels: int, tokens: int) -> None:
    # 16384 = 128·128, 1280 = 32·40, 768 = 24·32: square-ish grids, reachable by rounding.
    assert max_pixels // 784 == tokens
    assert V.max_image_tokens(QWEN7B, max_pixels=max_pixels) == tokens


def test_worst_case_patches_at_the_default() -> None:
    assert V.max_image_patches(QWEN7B) == 65536


def test_worst_case_can_exceed_floor_of_max_over_784() -> None:
    # max(factor, ·) lifts a zero side: a 28x5600 sliver at max 100,352 (128 tokens) keeps 160.
    assert V.smart_resize(28, 5600, max_pixels=100352) == (28, 4480)
    assert V.max_image_tokens(QWEN7B, max_pixels=100352) >= 160 > 100352 // 784
    # min = max: ceilings overshoot; a 10x1919 image is scaled up to 3 x 384 tokens, and where
    # both sides step at once HF's float β overshoots further (19x3648 -> 3 x 385 = 1155).
    assert V.smart_resize(10, 1919, min_pixels=S0_MAX_PIXELS, max_pixels=S0_MAX_PIXELS) == (84, 10752)
    assert V.smart_resize(19, 3648, min_pixels=S0_MAX_PIXELS, max_pixels=S0_MAX_PIXELS) == (84, 10780)
    assert V.max_image_tokens(QWEN7B, min_pixels=S0_MAX_PIXELS, max_pixels=S0_MAX_PIXELS) == 1155


def test_internvl_tiles() -> None:
    # 448x448: grid 1x1 (the 2x2 tie needs area > half of 4 tiles), no thumbnail:
    # 256 tokens; 1024 patches + class token.
    assert V.num_image_tokens(INTERNVL3, 448, 448) == 256
    assert V.num_image_patches(INTERNVL3, 448, 448) == 1025
    # 448 high, 896 wide: grid 2x1 + thumbnail = 3 tiles.
    assert V.num_internvl_tiles(448, 896) == 3
    # aspect 1:12 -> grid 12x1 + thumbnail: the worst case 13 · 256.
    assert V.num_internvl_tiles(100, 1200) == 13
    assert V.max_image_tokens(INTERNVL3) == 3328
    assert V.max_image_patches(INTERNVL3) == 13 * 1025


def test_gemma3_is_fixed() -> None:
    assert V.num_image_tokens(GEMMA3, 3000, 200) == V.max_image_tokens(GEMMA3) == 256
    assert V.num_image_patches(GEMMA3, 10, 10) == 4096


@PROFILE
@given(height=st.integers(1, 6000), width=st.integers(1, 6000),
       max_tokens=st.integers(4, 20000), min_tokens=st.integers(1, 64))
def test_no_image_beats_the_worst_case(height: int, width: int, max_tokens: int, min_tokens: int) -> None:
    if max(height, width) > 200 * min(height, width):
        return
    lo, hi = min_tokens * 784, max(min_tokens, max_tokens) * 784
    h, w = V.smart_resize(height, width, 28, lo, hi)
    assert h % 28 == 0 and w % 28 == 0
    assert (h // 28) * (w // 28) <= V.max_smart_resize_tokens(28, lo, hi)


@PROFILE
@given(max_tokens=st.integers(4, 20000), extra=st.integers(1, 3000))
def test_worst_case_grows_with_max_pixels(max_tokens: int, extra: int) -> None:
    small = V.max_image_tokens(QWEN7B, max_pixels=max_tokens * 784)
    assert V.max_image_tokens(QWEN7B, max_pixels=(max_tokens + extra) * 784) >= small


# --- a tiny tower by hand -------------------------------------------------------------------------

# h=8, I=16, 2 heads (head_dim 4), 2 blocks, block 1 full attention, window 28 px = 2x2 patches.
TINY = VisionArch(model_type="qwen2_5_vl", depth=2, hidden_size=8, intermediate_size=16, num_heads=2,
                  patch_size=14, out_hidden_size=12, spatial_merge_size=2, temporal_patch_size=2,
                  window_size=28, fullatt_block_indexes=(1,))
FLASH, SDPA, EAGER = AttentionImpl.flash_attention_2, AttentionImpl.sdpa, AttentionImpl.eager
# A 56x56 image: 2x2 tokens, 16 patches; window blocks see 4 keys, the full block 16.
PATCHES = 16


def test_tiny_per_patch_terms_by_hand() -> None:
    assert V.num_image_patches(TINY, 56, 56) == PATCHES
    assert V.attention_spans(TINY, PATCHES, 1, FLASH) == ((1, 4), (1, 16))
    # RMSNorm: fp32 upcast 4·8 + bf16 normalised 2·8 = 48.
    assert V.vision_norm_saved_bytes_per_patch(TINY) == 48
    # flash: qkv input 16 + fused qkv 48 + rotated q, k 32 + out 16 + lse 4·2 = 120.
    assert V.vision_attention_saved_bytes_per_patch(TINY, FLASH, 16) == 120
    # sdpa: + the contiguous proj-input copy 16.
    assert V.vision_attention_saved_bytes_per_patch(TINY, SDPA, 16) == 136
    # eager: 16 + 48 + 32 + (4 + 2)·2 heads·s + proj input 16 = 112 + 12s.
    assert V.vision_attention_saved_bytes_per_patch(TINY, EAGER, 4) == 112 + 48
    # SwiGLU: input 16 + gate, SiLU, up, product 4·2·16 = 144.
    assert V.vision_mlp_saved_bytes_per_patch(TINY) == 144
    # block = 2·48 + attention + 144.
    assert V.vision_block_saved_bytes_per_patch(TINY, FLASH, 4) == 360
    assert V.vision_block_saved_bytes_per_patch(TINY, EAGER, 16) == 96 + 112 + 192 + 144
    # conv input 2·3·2·14² = 2352 + fp32 cos/sin 2·4·4 = 32.
    assert V.vision_embedding_saved_bytes_per_patch(TINY) == 2384


def test_tiny_training_saved_by_hand() -> None:
    # flash: 16 patches · (2 blocks · 360 + 2384).
    assert V.vision_training_saved_bytes(TINY, PATCHES, 1, FLASH, False) == 16 * (720 + 2384)
    # eager: window block s=4 -> 400, full block s=16 -> 544.
    assert V.vision_training_saved_bytes(TINY, PATCHES, 1, EAGER, False) == 16 * (400 + 544 + 2384)
    # checkpointing: 2 blocks · bf16 input 16.
    assert V.vision_training_saved_bytes(TINY, PATCHES, 1, EAGER, True) == 16 * (32 + 2384)
    # dense mask (transformers 4.49-4.53), 2 images: every block eager over all 32 patches:
    # 96 + 112 + 12·32 + 144 = 736 per block.
    dense = V.vision_training_saved_bytes(TINY, PATCHES, 2, SDPA, False, dense_mask=True)
    assert dense == 32 * (2 * 736 + 2384)
    # flash never built the mask.
    assert (V.vision_training_saved_bytes(TINY, PATCHES, 2, FLASH, False, dense_mask=True)
            == V.vision_training_saved_bytes(TINY, PATCHES, 2, FLASH, False))


def test_tiny_backward_transient_by_hand() -> None:
    # gradients in and out 2·2·8 = 32 per patch -> 512; + recomputed block 360 · 16.
    assert V.vision_backward_transient_bytes(TINY, PATCHES, 1, FLASH, True) == 512 + 360 * 16
    # eager: + fp32 softmax grads of the largest chunk, 8 B · 2 heads · 16² = 4096.
    assert V.vision_backward_transient_bytes(TINY, PATCHES, 1, EAGER, False) == 512 + 4096
    assert V.vision_backward_transient_bytes(TINY, PATCHES, 1, EAGER, True) == 512 + 544 * 16 + 4096


def test_tiny_inference_peak_by_hand() -> None:
    # stream 2·2·8 = 32 per patch; held: bf16 pixels 2·3·2·14² = 2352 + fp32 cos/sin 2·4·4 = 32;
    # norm 2·4·8 = 64; attention qkv 48 + max(rotary 6·4·8 = 192, q, k, out 48) = 240;
    # MLP 3·2·16 = 96 -> 16 · (32 + 2384 + 240).
    assert V.inference_held_bytes_per_patch(TINY) == 2352 + 32
    assert V.vision_inference_peak_bytes(TINY, PATCHES, 1, FLASH) == 16 * (32 + 2384 + 240)
    # eager: q, k, out + copy 64 per patch beside one full-attention chunk of scores,
    # 10 B (bf16 scores, fp32 upcast, fp32 softmax) · 2 heads · 16² = 5120, above the rotary stage.
    assert V.vision_inference_peak_bytes(TINY, PATCHES, 1, EAGER) == 16 * (32 + 2384) + 16 * 48 + 16 * 64 + 5120
    # dense sdpa, 2 images: scores over 32 patches 10·2·32² + bool and bf16 mask 3·32².
    assert V.vision_inference_peak_bytes(TINY, PATCHES, 2, SDPA, dense_mask=True) == \
        32 * (32 + 2384) + 32 * 48 + 32 * 64 + 20480 + 3072


def test_tiny_merger_and_encoder_cache_by_hand() -> None:
    # ln_q 48 + mlp.0 input, GELU input, GELU output 3·16 = 96 per patch.
    assert V.merger_saved_bytes(TINY, PATCHES, 1) == 16 * 96
    # 4 tokens · out 12 · 2 B.
    assert V.encoder_cache_bytes(TINY, 4) == 96


def test_frozen_tower_is_cheaper_than_trained() -> None:
    frozen = V.vision_inference_peak_bytes(QWEN7B, 5120, 1, FLASH)
    assert frozen < V.vision_training_saved_bytes(QWEN7B, 5120, 1, FLASH, True)


def test_internvit_checkpoints_by_default_and_uses_naive_attention_without_flash() -> None:
    assert V.tower_checkpoints_by_default(INTERNVL3) and not V.tower_checkpoints_by_default(QWEN7B)
    assert (V.vision_block_saved_bytes_per_patch(INTERNVL3, SDPA, 1025)
            == V.vision_block_saved_bytes_per_patch(INTERNVL3, EAGER, 1025))


def test_unknown_tower_is_an_input_error() -> None:
    with pytest.raises(InputError):
        V.num_image_tokens(VisionArch("pixtral", 1, 8, 16, 2, 14, 8), 10, 10)


def test_vllm_encoder_budget() -> None:
    # max(max_num_batched_tokens, largest item): one 16,384-token image fits; 8 x 768-token images at 8192.
    assert V.vllm_encoder_budget_tokens(8192, 16384) == 16384
    assert V.num_vllm_profile_images(16384, 16384, 1, 32768, 256) == 1
    assert V.num_vllm_profile_images(V.vllm_encoder_budget_tokens(8192, 768), 768, 4, 4096, 256) == 10
    assert V.num_vllm_profile_images(8192, 768, 1, 4096, 2) == 2
    # 16,384 tokens · 3,584 · 2 B = 117 MB of cached encoder output.
    assert V.encoder_cache_bytes(QWEN7B, 16384) == 16384 * 3584 * 2


# --- monotonicity -------------------------------------------------------------------------------

TOWERS = st.sampled_from([QWEN7B, INTERNVL3, GEMMA3, TINY])


@PROFILE
@given(tower=TOWERS, attention=st.sampled_from(list(AttentionImpl)), patches=st.integers(1, 4096),
       images=st.integers(1, 4), more=st.integers(1, 512), checkpointing=st.booleans(),
       dense=st.booleans())
def test_more_patches_or_images_never_fewer_bytes(tower: VisionArch, attention: AttentionImpl,
                                                  patches: int, images: int, more: int,
                                                  checkpointing: bool, dense: bool) -> None:
    if tower is INTERNVL3:  # the tower sees whole 1,025-patch tiles
        patches = 1025 * (1 + patches % 13)
        more = 1025
    elif tower is GEMMA3:
        patches, more = 4096, 0
    terms = (
        lambda p, n: V.vision_training_saved_bytes(tower, p, n, attention, checkpointing,
                                                   dense_mask=dense),
        lambda p, n: V.vision_backward_transient_bytes(tower, p, n, attention, checkpointing,
                                                       dense_mask=dense),
        lambda p, n: V.vision_inference_peak_bytes(tower, p, n, attention, dense_mask=dense),
        lambda p, n: V.merger_saved_bytes(tower, p, n),
    )
    for term in terms:
        base = term(patches, images)
        assert term(patches + more, images) >= base
        assert term(patches, images + 1) >= base


# --- against the research notes (shared/research/memory-model.md §7) -----------------------------


def test_per_patch_block_estimate_of_the_research_notes() -> None:
    # §7: "training activations ≈ N_p·(16h + 8I) B ≈ 48 KB per patch per block"
    # (7B tower: h=1280, I=3420, 16 heads).
    h, i, heads = QWEN7B.hidden_size, QWEN7B.intermediate_size, QWEN7B.num_heads
    research = 16 * h + 8 * i
    assert research == 47_840
    ours = V.vision_block_saved_bytes_per_patch(QWEN7B, FLASH, V.num_window_patches(QWEN7B))
    assert ours == 63_264
    # Tolerance: within +35 %, and the whole gap is named: both RMSNorms' fp32 upcasts (2·4h),
    # the rotated q and k copies (2·2h) and flash's fp32 log-sum-exp (4·n_h), which 16h omits.
    assert ours - research == 2 * 4 * h + 2 * 2 * h + 4 * heads
    assert 1.0 <= ours / research <= 1.35
    # §7's "≈ 7.8 GB for one 1280-token image over 32 blocks": 5120 patches; ours ≈ 10.4 GB.
    assert 5120 * research * 32 / 1e9 == pytest.approx(7.84, abs=0.01)
    assert 5120 * ours * 32 / 1e9 == pytest.approx(10.37, abs=0.01)
