"""Activation and logits terms against hand-derived tiny cases (TINY: h=8, q=8, kv=4, 2 heads of
head_dim 4, 1 KV head, I=16, L=2, V=32, untied). The traced agreement lives in tests/trace/."""

from __future__ import annotations

import pytest

from oomless.catalog.models import arch_from_config
from oomless.memory import activations as A
from oomless.memory import logits as L
from oomless.memory.activation_calibration import LLAMA_STYLE, family_coefficients
from oomless.spec.run import AttentionImpl, LogitsMode
from tests.helpers import TINY_CONFIG

TINY = arch_from_config(TINY_CONFIG, "tiny")
# Per token, whatever the attention: two norms (fp32 upcast 4·8 + bf16 cast 2·8 + inverse RMS 4
# = 52 each), the two norm outputs the linears keep (2·8 each), the MLP (gate, activation, up,
# product: 4 × 2·16 = 128): 104 + 32 + 128 = 264.
PER_TOKEN = 264


@pytest.mark.parametrize(
    ("attention", "expected"),
    [
        # q, k and v (expanded to 2 heads), output: 4·2·8·10 = 640; fp32 LSE [2 heads, 32]: 256;
        # s = 10 is not a multiple of 16: the bf16 bias is padded per head, 2·2·10·16 = 640.
        (AttentionImpl.sdpa, PER_TOKEN * 10 + 640 + 256 + 640),
        # unpadded q (16), k and v (8 each), output (16), LSE (4·2), padded output (16), indices (8).
        (AttentionImpl.flash_attention_2, PER_TOKEN * 10 + (16 + 8 + 8 + 16 + 8 + 16 + 8) * 10),
        # q copy, expanded k and v, contiguous output: 4·2·8·10; scores 6 B × 2 heads × 10 × 10.
        (AttentionImpl.eager, PER_TOKEN * 10 + 640 + 6 * 2 * 10 * 10),
    ],
)
def test_layer_saved_bytes_per_sequence_by_hand(attention: AttentionImpl, expected: int) -> None:
    assert A.decoder_layer_saved_bytes_per_sequence(TINY, attention, 10) == expected


def test_bias_is_one_mask_per_sequence_when_aligned() -> None:
    # s = 16: [1, 16, 16] bf16 per sequence, not padded, not per head.
    assert A.sdpa_bias_bytes_per_sequence(TINY, 16) == 2 * 16 * 16
    assert A.sdpa_bias_bytes_per_sequence(TINY, 17) == 2 * 2 * 17 * 32


def test_training_saved_by_hand() -> None:
    layer = A.decoder_layer_saved_bytes_per_sequence(TINY, AttentionImpl.sdpa, 10)
    rotary = 2 * 2 * 10 * 4  # cos, sin: [1, 10, 4] bf16
    head = 20 * 52  # final norm over 2 × 10 tokens
    # 2 layers × (2 sequences + the kernel's rng seed/offset, 2 × 512 B).
    assert A.training_saved_activation_bytes(TINY, AttentionImpl.sdpa, False, 2, 10) == 2 * (2 * layer + 1024) + rotary + head
    # Checkpointing: each layer's bf16 input (2·8 per token), the int64 position ids (8·10) and the
    # bool mask [2, 1, 10, 10] the checkpoints hold.
    assert A.training_saved_activation_bytes(TINY, AttentionImpl.sdpa, True, 2, 10) == 2 * 20 * 16 + 80 + 200 + rotary + head
    # flash-attention's checkpoints hold the bool [2, 10] padding mask instead.
    assert A.training_saved_activation_bytes(TINY, AttentionImpl.flash_attention_2, True, 2, 10) == 2 * 20 * 16 + 80 + 20 + rotary + head
    # LoRA branches add their saved inputs per layer when nothing is recomputed.
    with_lora = A.training_saved_activation_bytes(TINY, AttentionImpl.sdpa, False, 2, 10, 100)
    assert with_lora == A.training_saved_activation_bytes(TINY, AttentionImpl.sdpa, False, 2, 10) + 2 * 2 * 10 * 100


def test_lora_branch_by_hand() -> None:
    # Adapted inputs of widths 8 and 16, r=2: fp32 input 4·d + lora_A output 4·2; with
    # dropout a 1-byte mask per input element too.
    assert A.lora_saved_bytes_per_token([8, 16], 2, False) == (32 + 8) + (64 + 8)
    assert A.lora_saved_bytes_per_token([8, 16], 2, True) == (40 + 8) + (80 + 8)


@pytest.mark.parametrize("attention", list(AttentionImpl))
@pytest.mark.parametrize("checkpointing", [False, True])
def test_backward_rises_above_saved_and_grows_with_batch(attention: AttentionImpl, checkpointing: bool) -> None:
    one = A.backward_transient_bytes(TINY, attention, checkpointing, 1, 64)
    two = A.backward_transient_bytes(TINY, attention, checkpointing, 2, 64)
    assert 0 < one < two
    if checkpointing:  # the recomputed top layer comes back whole
        assert one >= A.decoder_layer_saved_bytes_per_sequence(TINY, attention, 64)


def test_inference_peak_by_hand() -> None:
    # residual + input 2·2·8 = 32; max(norm fp32 64, attention 2·(8+8)+16 = 48, MLP 3·2·16 = 96).
    assert A.inference_layer_peak_bytes_per_token(TINY) == 32 + 96
    # TP=2 halves heads and I: max(64, 24, 48) = 64.
    assert A.inference_layer_peak_bytes_per_token(TINY, 2) == 32 + 64


def test_checkpointing_saves_memory_for_real_models() -> None:
    from oomless.catalog.resolve import load_model

    arch = load_model("Qwen/Qwen2.5-7B-Instruct")
    full = A.training_saved_activation_bytes(arch, AttentionImpl.sdpa, False, 1, 2048)
    gc = A.training_saved_activation_bytes(arch, AttentionImpl.sdpa, True, 1, 2048)
    assert gc < full / 10


def test_logits_by_hand() -> None:
    # 2 sequences, 5 completion tokens, s = 10, V = 32: E = 320 kept logits, E1 = 2·6·32 = 384 from
    # the LM head (logits_to_keep = c + 1). The head keeps a bf16 copy of its 2 × 6 input rows: 192.
    kept = 2 * 8 * 2 * 6
    # bf16: division (E1 + E), per-sequence loop backward (E·(1 + 2/2)), slices' backward (E + E1).
    assert L.training_logits_bytes(TINY, LogitsMode.full_bf16, 2, 5, 2048, 10) == kept + 2 * max(384 + 320, 640)
    # fp32: four fp32 copies of E at GatherBackward.
    assert L.training_logits_bytes(TINY, LogitsMode.full_fp32, 2, 5, 2048, 10) == kept + 16 * 320
    # chunked, 4-row chunks (128 logits): E + E − 128 in bf16 and 3 fp32 chunk copies.
    assert L.training_logits_bytes(TINY, LogitsMode.chunked, 2, 5, 4, 10) == kept + 2 * 320 + 2 * (320 - 128) + 12 * 128
    # fused (Liger GRPO loss): one sequence's 5·32 logits at 14 B + bf16 grad of lm_head 32·8·2.
    assert L.training_logits_bytes(TINY, LogitsMode.fused, 2, 5, 2048) == 5 * 32 * 14 + 32 * 8 * 2
    assert L.logprob_logits_bytes(TINY, LogitsMode.full_bf16, 2, 5, 2048) == 2 * (384 + 320)
    assert L.logprob_logits_bytes(TINY, LogitsMode.full_fp32, 2, 5, 2048) == 4 * (384 + 320)


def test_one_sequence_keeps_the_whole_final_norm_output() -> None:
    # One sequence: the kept rows are a view; the head keeps all s = 10 rows (2·8·10).
    assert L.lm_head_input_bytes(TINY, 1, 5, 10) == 2 * 8 * 10
    assert L.lm_head_input_bytes(TINY, 2, 5, 10) == 2 * 8 * 2 * 6


def test_tied_embeddings_add_the_head_gradient() -> None:
    tied = arch_from_config({**TINY_CONFIG, "tie_word_embeddings": True}, "tied")
    assert A.tied_head_gradient_bytes(tied) == 2 * 32 * 8
    assert A.tied_head_gradient_bytes(TINY) == 0


def test_families_without_measurements_use_the_llama_derivation() -> None:
    assert family_coefficients("qwen2") == LLAMA_STYLE
    assert family_coefficients("no_such_family") == LLAMA_STYLE
    assert family_coefficients("gemma2").norm_saved_bytes_per_element == 8


def test_qwen_logits_match_research_example() -> None:
    # research/memory-model.md §6: Qwen V=151,936, 8192 tokens -> 2.5 GB bf16 per copy.
    from oomless.catalog.resolve import load_model

    arch = load_model("Qwen/Qwen2.5-1.5B-Instruct")
    assert L.num_logit_elements(arch, 8192) * 2 / 1e9 == pytest.approx(2.49, abs=0.01)
