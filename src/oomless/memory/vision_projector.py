"""A vision-language model's projector (merger) activations and the encoder outputs vLLM
caches: the tower's last stage, fed by `memory.vision`'s blocks. Pure functions of plain ints
and a ``VisionArch``; integer bytes out (re-exported by `memory.vision`, the vision API).

Symbols: h tower width, m spatial merge (m² patches per LLM token). Assumes bf16 activations.
"""

from __future__ import annotations

from ..catalog.vision import VisionArch
from . import constants as C
from .activation_norms import rmsnorm_saved_bytes_per_token
from .vision_params import CLASS_TOKENS
from .vision_tokens import INTERN_VIT, QWEN2_5_VL, _tower, num_patches_per_tile, num_tokens_per_tile

B = C.BF16_BYTES
F = C.FP32_BYTES
LAYERNORM_STATS_BYTES = 2 * F
"""`native_layer_norm` saves fp32 mean and rstd per row (plus the input, counted apart)."""


def merger_saved_bytes(v: VisionArch, num_patches: int, num_images: int) -> int:
    """Activations a trained projector saves (it is often trained with the tower frozen).

    Qwen2.5-VL PatchMerger per patch: ln_q RMSNorm 6h, mlp.0 input 2h, GELU input 2h, GELU
    output (mlp.2 input) 2h = 12h (per token of m² patches the same ×m²).
    Qwen2-VL PatchMerger and Qwen3-VL's merger: ln_q/norm is a LayerNorm over h, which saves
    its bf16 input (the last block's output) 2h and fp32 mean/rstd per patch, then the same
    three 2h = 8h + 8 per patch. Qwen3-VL's deepstack mergers (one per
    ``deepstack_visual_indexes`` block) LayerNorm the m²h-wide token after the shuffle: its
    input is that block's output, already saved by the next block; each keeps its 2h output,
    stats per token and the MLP's 2·2h = 6h per patch + 8 per token.
    InternVL mlp1 per token (pixel-shuffled width m²h): LayerNorm input 2m²h + stats, Linear
    input 2m²h, GELU input and output 2·2·out.
    gemma3 per patch avg_pool2d input 2h; per token Gemma3RMSNorm fp32 input and normed 2·4h,
    matmul input 2h. Source: transformers 5.24 Qwen2_5_VLPatchMerger, qwen2_vl PatchMerger,
    Qwen3VLVisionPatchMerger (use_postshuffle_norm), InternVLChatModel.mlp1,
    Gemma3MultiModalProjector; the Qwen2-VL and Qwen3-VL terms checked by `oomless trace`.
    """
    tower, h, total = _tower(v), v.hidden_size, num_patches * num_images
    if v.model_type == QWEN2_5_VL:
        return total * (rmsnorm_saved_bytes_per_token(h) + 3 * B * h)
    if tower == QWEN2_5_VL:
        tokens = total // v.spatial_merge_size ** 2
        deepstack = len(v.deepstack_visual_indexes) * (total * 3 * B * h + tokens * LAYERNORM_STATS_BYTES)
        return total * (4 * B * h + LAYERNORM_STATS_BYTES) + deepstack
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
