"""Activation and logits terms against hand-derived tiny cases (TINY: h=8, q=8, kv=4, 2 heads, I=16)."""

from __future__ import annotations

import pytest

from oomless.catalog.models import arch_from_config
from oomless.memory import activations as A
from oomless.memory import logits as L
from oomless.spec.run import AttentionImpl, LogitsMode
from tests.helpers import TINY_CONFIG

TINY = arch_from_config(TINY_CONFIG, "tiny")


@pytest.mark.parametrize(
    ("attention", "seq_len", "expected"),
    [
        # norms 2·(4+2)·8 = 96; MLP 2·8 + 8·16 = 144; attention = q/k/v input 16 + core + o_proj input 16.
        (AttentionImpl.sdpa, 10, 96 + 144 + 16 + (4 * 2 * 8 + 4 * 2) + 16),  # core: q,k,v expanded,out + lse
        (AttentionImpl.flash_attention_2, 10, 96 + 144 + 16 + (16 + 2 * 2 * 4 + 16 + 8) + 16),
        (AttentionImpl.eager, 10, 96 + 144 + 16 + (3 * 2 * 8 + 6 * 2 * 10) + 16),
    ],
)
def test_layer_saved_bytes_per_token_by_hand(attention: AttentionImpl, seq_len: int, expected: int) -> None:
    assert A.decoder_layer_saved_bytes_per_token(TINY, attention, seq_len) == expected


def test_training_saved_by_hand() -> None:
    # 2 sequences × 10 tokens; per token: 2 layers × 344 + head (6·8 + 2·8 = 64); plus the
    # shared [2, 1, 10, 10] bf16 mask of sdpa with padding (400 B).
    assert A.training_saved_activation_bytes(TINY, AttentionImpl.sdpa, False, 2, 10) == 20 * (2 * 344 + 64) + 400
    # Checkpointing keeps the 2h = 16-byte layer input per layer.
    assert A.training_saved_activation_bytes(TINY, AttentionImpl.sdpa, True, 2, 10) == 20 * (2 * 16 + 64) + 400
    # flash-attention takes no dense mask.
    assert A.training_saved_activation_bytes(TINY, AttentionImpl.flash_attention_2, True, 2, 10) == 20 * (2 * 16 + 64)
    # LoRA branches add their saved inputs per layer when nothing is recomputed.
    assert A.training_saved_activation_bytes(TINY, AttentionImpl.sdpa, False, 2, 10, 100) == 20 * (2 * 444 + 64) + 400


def test_lora_branch_by_hand() -> None:
    # Adapted inputs of widths 8 and 16, r=2: fp32 input 4·d + lora_A output 4·2; with
    # dropout a 1-byte mask per input element too.
    assert A.lora_saved_bytes_per_token([8, 16], 2, False) == (32 + 8) + (64 + 8)
    assert A.lora_saved_bytes_per_token([8, 16], 2, True) == (40 + 8) + (80 + 8)


def test_backward_transient_by_hand() -> None:
    # Gradient in and out of a layer: 2 · 2 · 8 = 32 per token; + one recomputed layer (344).
    assert A.backward_transient_bytes(TINY, AttentionImpl.sdpa, True, 2, 10) == 20 * (32 + 344)
    assert A.backward_transient_bytes(TINY, AttentionImpl.sdpa, False, 2, 10) == 20 * 32


def test_inference_peak_by_hand() -> None:
    # residual + input 2·2·8 = 32; max(norm fp32 64, attention 2·(8+8)+16 = 48, MLP 3·2·16 = 96).
    assert A.inference_layer_peak_bytes_per_token(TINY) == 32 + 96
    # TP=2 halves heads and I: max(64, 24, 48) = 64.
    assert A.inference_layer_peak_bytes_per_token(TINY, 2) == 32 + 64


def test_checkpointing_saves_memory_for_real_models() -> None:
    from oomless.catalog.models import load_model

    arch = load_model("Qwen/Qwen2.5-7B-Instruct")
    full = A.training_saved_activation_bytes(arch, AttentionImpl.sdpa, False, 1, 2048)
    gc = A.training_saved_activation_bytes(arch, AttentionImpl.sdpa, True, 1, 2048)
    assert gc < full / 10


def test_logits_by_hand() -> None:
    # 2 sequences × 5 completion tokens × V=32 = 320 logits.
    assert L.training_logits_bytes(TINY, LogitsMode.full_bf16, 2, 5, 2048) == 320 * 6
    assert L.training_logits_bytes(TINY, LogitsMode.full_fp32, 2, 5, 2048) == 320 * 14
    # chunked, 4-row chunks: 320·4 + 4·32·12.
    assert L.training_logits_bytes(TINY, LogitsMode.chunked, 2, 5, 4) == 320 * 4 + 128 * 12
    # fused (Liger GRPO loss): one sequence's 5·32 logits at 14 B + bf16 grad of lm_head 32·8·2.
    assert L.training_logits_bytes(TINY, LogitsMode.fused, 2, 5, 2048) == 5 * 32 * 14 + 32 * 8 * 2
    assert L.logprob_logits_bytes(TINY, LogitsMode.full_bf16, 2, 5, 2048) == 320 * 4
    assert L.logprob_logits_bytes(TINY, LogitsMode.full_fp32, 2, 5, 2048) == 320 * 6


def test_qwen_logits_match_research_example() -> None:
    # research/memory-model.md §6: Qwen V=151,936, 8192 tokens -> 2.5 GB bf16 per copy.
    from oomless.catalog.models import load_model

    arch = load_model("Qwen/Qwen2.5-1.5B-Instruct")
    assert L.num_logit_elements(arch, 8192) * 2 / 1e9 == pytest.approx(2.49, abs=0.01)
