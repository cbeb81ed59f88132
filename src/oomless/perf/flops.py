"""FLOPs of the forward and backward passes, as named terms.

Symbols: N = parameters a token multiplies (active, without the embedding lookup), L = decoder
layers, d = attention width (heads x head_dim), T = tokens a query attends to.

    forward per token  = 2·N + 4·L·d·T              (matmuls; QKᵀ and AV)
    training per token = forward · (1 + BACKWARD) [+ forward with recompute]

Source: Kaplan et al. 2020 (arXiv 2001.08361) table 1, C_forward = 2N + 2·n_layer·n_ctx·d_attn
per token for a causal average; torchtitan `get_num_flop_per_token` = 6N + 12·L·H·Q·T (no causal
halving, the convention we follow). Backward = 2 × forward (input grads + weight grads), so
training = 6N; recomputation adds one forward: × 4/3 (Korthikanti et al. 2022, arXiv 2205.05198).
Assumes: dense attention FLOPs (flash kernels skip masked blocks, so real work is lower);
MoE counts only the routed experts a token uses; vision towers ~2 FLOPs per parameter per patch.
"""

from __future__ import annotations

import functools

from ..catalog.models import ModelArch
from ..memory import params as P
from ..memory import vision_params as VP
from ..spec.run import FinetuneMethod

FORWARD_FLOPS_PER_PARAM = 2
"""One multiply and one add per weight per token."""
ATTENTION_FORWARD_FLOPS_PER_WIDTH = 2 * 2
"""QKᵀ and AV, each 2 FLOPs per query, key position and attention channel."""
BACKWARD_INPUT_GRAD_FORWARDS = 1
"""Gradient w.r.t. activations costs one forward."""
BACKWARD_WEIGHT_GRAD_FORWARDS = 1
"""Gradient w.r.t. weights costs one forward; skipped for frozen weights (LoRA base, frozen
tower), which is why LoRA training costs 2 forwards (+1 with recompute), not 3."""
RECOMPUTE_FORWARDS = 1
"""Activation checkpointing re-runs each layer's forward once in the backward."""


@functools.lru_cache(maxsize=4096)  # pure on a frozen arch (its hash is kept: oomless.frozen_hash)
def num_parameters(arch: ModelArch) -> int:
    """All parameters (`memory.params.num_parameters`), cached: the cost model asks often."""
    return P.num_parameters(arch)


@functools.lru_cache(maxsize=4096)  # pure on a frozen arch (its hash is kept: oomless.frozen_hash)
def num_matmul_parameters(arch: ModelArch) -> int:
    """N: active language-model weights a token multiplies: the routed experts it uses, the
    lm_head (V·h, tied or not), not the embedding lookup and not the vision tower."""
    active_lm = P.num_active_parameters(arch) - VP.num_vision_parameters(arch)
    return active_lm - P.num_embedding_parameters(arch) - P.num_lm_head_parameters(arch) + arch.vocab_size * arch.hidden_size


def attention_width(arch: ModelArch) -> int:
    return arch.num_attention_heads * (arch.v_head_dim or arch.head_dim)


def attended_tokens(arch: ModelArch, context: int) -> float:
    """Mean over layers of the keys a query sees: sliding-window layers see at most the window."""
    window = arch.sliding_window or context
    sliding = arch.num_sliding_window_layers if arch.sliding_window else 0
    return (sliding * min(window, context) + (arch.num_layers - sliding) * context) / arch.num_layers


@functools.lru_cache(maxsize=4096)  # pure on a frozen arch (its hash is kept: oomless.frozen_hash)
def forward_flops_per_token(arch: ModelArch, context: int) -> float:
    """2·N + 4·L·d·T for one token attending to ``context`` tokens."""
    attention = ATTENTION_FORWARD_FLOPS_PER_WIDTH * arch.num_layers * attention_width(arch) * attended_tokens(arch, context)
    return FORWARD_FLOPS_PER_PARAM * num_matmul_parameters(arch) + attention


def training_forwards(method: FinetuneMethod, recompute: bool) -> int:
    """Forward-pass equivalents of one training pass: 3 for full fine-tuning, 2 for LoRA
    (no base weight gradients), +1 each with recompute (full: 4/3 of 3)."""
    weight_grads = BACKWARD_WEIGHT_GRAD_FORWARDS if method == FinetuneMethod.full else 0
    return 1 + BACKWARD_INPUT_GRAD_FORWARDS + weight_grads + (RECOMPUTE_FORWARDS if recompute else 0)


@functools.lru_cache(maxsize=4096)  # pure on a frozen arch (its hash is kept: oomless.frozen_hash)
def vision_forward_flops_per_patch(arch: ModelArch) -> float:
    """A ViT patch token passes every tower weight once: ~2·N_vision (attention ignored)."""
    return FORWARD_FLOPS_PER_PARAM * VP.num_vision_parameters(arch)


def vision_patches_per_prompt(arch: ModelArch, image_tokens_per_prompt: int) -> int:
    """Tower patches behind the LLM's image tokens: each token merges spatial_merge_size² patches
    (Qwen2.5-VL 2×2, InternVL pixel shuffle). Approximate for fixed-size towers."""
    if arch.vision is None:
        return 0
    return image_tokens_per_prompt * arch.vision.spatial_merge_size**2
