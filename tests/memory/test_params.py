"""Parameter counts: hand-derived tiny cases, published totals, exact public counts,
inventory consistency and monotonicity."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oomless.catalog.models import arch_from_config
from oomless.catalog.resolve import catalog_ids, load_model
from oomless.errors import InputError
from oomless.memory import params as P

# --- hand-derived tiny cases -------------------------------------------------------------------

TINY_QWEN2 = {
    "model_type": "qwen2", "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 2,
    "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 32,
    "tie_word_embeddings": False, "max_position_embeddings": 64,
}


def test_tiny_dense_by_hand() -> None:
    # h=8, I=16, L=2, a=2, k=1, d=h/a=4, V=32, Qwen2 => q/k/v bias, o without.
    arch = arch_from_config(TINY_QWEN2, "tiny")
    # embedding V*h = 32*8 = 256; lm_head (untied) the same.
    assert P.num_embedding_parameters(arch) == 256
    assert P.num_lm_head_parameters(arch) == 256
    # per layer: q 8*8+8=72, k 8*4+4=36, v 36, o 8*8=64 -> 208;
    # gate/up/down 3*8*16 = 384; input/post-attention RMSNorm 2*8 = 16 -> 608.
    assert P.num_parameters_per_decoder_layer(arch, "dense") == 608
    assert P.num_decoder_layer_parameters(arch) == 2 * 608
    # total 256 + 1216 + final norm 8 + 256 = 1736.
    assert P.num_parameters(arch) == 1736
    assert P.num_active_parameters(arch) == 1736
    assert P.num_vision_parameters(arch) == 0
    # tensors of <= 8 elements: q bias 8, k bias 4, v bias 4, two norms 8+8 = 32 per layer,
    # x2 layers, + final norm 8 = 72. DeepSpeed persists numel <= threshold, so at 7 only
    # the k/v biases remain: 2 x (4+4) = 16.
    assert P.num_small_parameters(arch, threshold=8) == 72
    assert P.num_small_parameters(arch, threshold=7) == 16
    # largest module: embed_tokens and lm_head, 256 each (q_proj is 72).
    assert P.num_largest_module_parameters(arch) == 256


def test_tiny_tied_drops_lm_head() -> None:
    tied = arch_from_config({**TINY_QWEN2, "tie_word_embeddings": True}, "tiny-tied")
    assert P.num_lm_head_parameters(tied) == 0
    assert P.num_parameters(tied) == 1736 - 256


TINY_QWEN3_MOE = {
    "model_type": "qwen3_moe", "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 2,
    "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 4, "vocab_size": 32,
    "tie_word_embeddings": True, "max_position_embeddings": 64, "num_experts": 4,
    "num_experts_per_tok": 2, "moe_intermediate_size": 6, "mlp_only_layers": [],
    "decoder_sparse_step": 1,
}


def test_tiny_moe_by_hand() -> None:
    arch = arch_from_config(TINY_QWEN3_MOE, "tiny-moe")
    # attention: q 8*8=64, k 8*4=32, v 32, o 64 -> 192; q_norm + k_norm 4+4 = 8; norms 16.
    # router gate 8*4 = 32; experts 4 * 3*8*6 = 4*144 = 576.  Layer = 192+8+16+32+576 = 824.
    assert P.num_parameters_per_decoder_layer(arch, "moe") == 824
    # total: embedding 256 (tied) + 2*824 + final norm 8 = 1912.
    assert P.num_parameters(arch) == 1912
    # active: 2 layers x (4-2) idle experts x 144 = 576 fewer -> 1336.
    assert P.num_parameters_per_expert(arch) == 144
    assert P.num_active_parameters(arch) == 1336
    assert P.num_largest_module_parameters(arch) == 256  # experts are separate Linears
    # transformers 5 fuses experts into one module: 4*(8*12) + 4*(6*8) = 576 > embedding.
    fused = dataclasses.replace(arch, experts_fused=True)
    assert P.num_parameters(fused) == 1912
    assert P.num_largest_module_parameters(fused) == 576


TINY_DEEPSEEK = {
    "model_type": "deepseek_v3", "hidden_size": 16, "intermediate_size": 32,
    "moe_intermediate_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2,
    "num_key_value_heads": 2, "n_routed_experts": 4, "n_shared_experts": 1,
    "num_experts_per_tok": 2, "first_k_dense_replace": 1, "moe_layer_freq": 1,
    "kv_lora_rank": 4, "q_lora_rank": 8, "qk_nope_head_dim": 4, "qk_rope_head_dim": 2,
    "v_head_dim": 4, "vocab_size": 32, "tie_word_embeddings": False,
    "max_position_embeddings": 64,
}


def test_tiny_mla_moe_by_hand() -> None:
    arch = arch_from_config(TINY_DEEPSEEK, "tiny-dsv3")
    # MLA: q_a 16*8=128, q_a_layernorm 8, q_b 8*(2*(4+2))=96, kv_a 16*(4+2)=96,
    # kv_a_layernorm 4, kv_b 4*(2*(4+4))=64, o (2*4)*16=128 -> 524; two norms 32.
    # dense layer 0: 3*16*32 = 1536 -> 524+32+1536 = 2092.
    assert P.num_parameters_per_decoder_layer(arch, "dense") == 2092
    # MoE layer 1: gate 16*4=64, experts 4*3*16*8=1536, shared 3*16*8=384 -> 1984+556 = 2540.
    assert P.num_parameters_per_decoder_layer(arch, "moe") == 2540
    # total: embedding 512 + 2092 + 2540 + norm 16 + lm_head 512 = 5672.
    assert P.num_parameters(arch) == 5672
    # active: 1 MoE layer x 2 idle experts x 384 -> 5672 - 768 = 4904.
    assert P.num_active_parameters(arch) == 4904


def test_linear_shapes_use_hf_names() -> None:
    dense = [s.name for s in P.decoder_linear_shapes(load_model("Qwen/Qwen2.5-7B-Instruct"))]
    assert dense == ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    ds = load_model("deepseek-ai/DeepSeek-V3")
    moe = {s.name: s for s in P.decoder_linear_shapes(ds)}
    assert moe["experts.gate_proj"].num_per_layer == 256
    assert (moe["experts.gate_proj"].in_features, moe["experts.gate_proj"].out_features) == (
        7168, 2048)
    assert moe["shared_experts.down_proj"].in_features == 2048
    assert {"q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj", "gate"} <= set(moe)
    dense_layer = {s.name: s for s in P.decoder_linear_shapes(ds, "dense")}
    assert dense_layer["gate_proj"].out_features == 18432
    assert P.layer_kinds(ds) == (("dense", 3), ("moe", 58))
    oss = {s.name: s for s in P.decoder_linear_shapes(load_model("openai/gpt-oss-20b"))}
    assert oss["experts.gate_up_proj"].out_features == 2 * 2880 and oss["router"].bias


# --- published figures ---------------------------------------------------------------------

B = 10**9
PUBLISHED_TOTALS = [
    # (model, published params, relative tolerance, where the number is published)
    # "0.49B" has two significant figures (the count is 0.494B, truncated by the card);
    # tolerance = one unit of the last published digit, 0.01/0.49.
    ("Qwen/Qwen2.5-0.5B-Instruct", 0.49 * B, 0.01 / 0.49,
     "HF model card Qwen/Qwen2.5-0.5B-Instruct"),
    ("Qwen/Qwen2.5-1.5B-Instruct", 1.54 * B, 0.005, "HF model card Qwen/Qwen2.5-1.5B-Instruct"),
    ("Qwen/Qwen2.5-3B-Instruct", 3.09 * B, 0.005, "HF model card Qwen/Qwen2.5-3B-Instruct"),
    ("Qwen/Qwen2.5-7B-Instruct", 7.62 * B, 0.005, "HF model card Qwen/Qwen2.5-7B-Instruct"),
    ("Qwen/Qwen2.5-14B-Instruct", 14.7 * B, 0.005, "HF model card Qwen/Qwen2.5-14B-Instruct"),
    # The card's 32.5B (and its 31.0B non-embedding) disagree with the card's own config:
    # 64 x (62.9M attention + 424.7M MLP) + 2 x 778.6M embeddings = 32.76B, which is also the
    # hub's safetensors total (exact test below). The 1% tolerance covers the card's error.
    ("Qwen/Qwen2.5-32B-Instruct", 32.5 * B, 0.01, "HF model card Qwen/Qwen2.5-32B-Instruct"),
    ("Qwen/Qwen2.5-72B-Instruct", 72.7 * B, 0.005, "HF model card Qwen/Qwen2.5-72B-Instruct"),
    ("Qwen/Qwen2-7B-Instruct", 7.62 * B, 0.005, "HF hub model size, Qwen/Qwen2-7B-Instruct"),
    ("meta-llama/Llama-3.1-8B-Instruct", 8.03 * B, 0.005, "HF hub model size, Llama-3.1-8B"),
    ("meta-llama/Llama-3.1-70B-Instruct", 70.6 * B, 0.005, "HF hub model size, Llama-3.1-70B"),
    ("meta-llama/Llama-3.2-1B-Instruct", 1.24 * B, 0.005, "HF model card Llama-3.2-1B (1.23B)"),
    ("meta-llama/Llama-3.2-3B-Instruct", 3.21 * B, 0.005, "HF model card Llama-3.2-3B (3.21B)"),
    ("mistralai/Mistral-7B-Instruct-v0.3", 7.25 * B, 0.005, "HF hub model size, Mistral-7B-v0.3"),
    ("Qwen/Qwen3-8B", 8.2 * B, 0.005, "HF model card Qwen/Qwen3-8B (8.2B)"),
    ("Qwen/Qwen3-30B-A3B", 30.5 * B, 0.005, "HF model card Qwen/Qwen3-30B-A3B (30.5B total)"),
    ("Qwen/Qwen3-235B-A22B", 235 * B, 0.005, "HF model card Qwen/Qwen3-235B-A22B (235B)"),
    # 671B main model; the hub's 685B adds the 14B multi-token-prediction module.
    ("deepseek-ai/DeepSeek-V3", 671 * B, 0.005, "DeepSeek-V3 README / arXiv 2412.19437"),
    ("Qwen/Qwen2.5-VL-7B-Instruct", 8.29 * B, 0.005, "HF hub model size, Qwen2.5-VL-7B"),
    ("google/gemma-2-9b-it", 9.24 * B, 0.005, "HF hub model size, gemma-2-9b-it"),
    ("google/gemma-3-4b-it", 4.3 * B, 0.005, "HF hub model size, gemma-3-4b-it (4.3B)"),
    ("openai/gpt-oss-20b", 20.91 * B, 0.005, "gpt-oss model card arXiv 2508.10925 table 1"),
    # InternVL3 cards give sizes to the nearest billion only ("2B", "8B"); the tower and
    # projector are counted from the remote code. 5% reflects that precision, nothing else.
    ("OpenGVLab/InternVL3-2B", 2 * B, 0.05, "HF model card OpenGVLab/InternVL3-2B"),
    ("OpenGVLab/InternVL3-8B", 8 * B, 0.05, "HF model card OpenGVLab/InternVL3-8B"),
]


@pytest.mark.parametrize(("model", "published", "rel_tol", "source"), PUBLISHED_TOTALS)
def test_published_totals(model: str, published: float, rel_tol: float, source: str) -> None:
    assert P.num_parameters(load_model(model)) == pytest.approx(published, rel=rel_tol), source


PUBLISHED_ACTIVE = [
    # Active figures are published to 2 significant figures; tolerance = one unit of the
    # last published digit (Qwen truncates: our 3.353B is printed "3.3B").
    ("Qwen/Qwen3-30B-A3B", 3.3 * B, 0.1 / 3.3, False, "HF model card Qwen/Qwen3-30B-A3B"),
    ("Qwen/Qwen3-235B-A22B", 22 * B, 1 / 22, False, "HF model card Qwen/Qwen3-235B-A22B"),
    # DeepSeek and OpenAI leave the input embedding (a lookup) out of "activated".
    ("deepseek-ai/DeepSeek-V3", 37 * B, 1 / 37, True, "DeepSeek-V3 README / arXiv 2412.19437"),
    ("openai/gpt-oss-20b", 3.61 * B, 0.005, True, "gpt-oss model card arXiv 2508.10925"),
]


@pytest.mark.parametrize(("model", "published", "rel_tol", "no_embedding", "source"),
                         PUBLISHED_ACTIVE)
def test_published_active(model: str, published: float, rel_tol: float, no_embedding: bool,
                          source: str) -> None:
    arch = load_model(model)
    active = P.num_active_parameters(arch)
    if no_embedding:
        active -= P.num_embedding_parameters(arch)
    assert active == pytest.approx(published, rel=rel_tol), source


EXACT_COUNTS = [
    # sum(p.numel() for p in model.parameters()) / hub safetensors totals, as reported in
    # public code and hub metadata; an exact match pins every term, not just the total.
    ("Qwen/Qwen2.5-7B-Instruct", 7_615_616_512),
    ("Qwen/Qwen2.5-32B-Instruct", 32_763_876_352),
    ("Qwen/Qwen2.5-VL-7B-Instruct", 8_292_166_656),
    ("Qwen/Qwen3-30B-A3B", 30_532_122_624),
    ("meta-llama/Llama-3.2-3B-Instruct", 3_212_749_824),
    ("google/gemma-2-9b-it", 9_241_705_984),
    ("google/gemma-3-4b-it", 4_300_079_472),
    ("openai/gpt-oss-20b", 20_914_757_184),
]


@pytest.mark.parametrize(("model", "count"), EXACT_COUNTS)
def test_exact_public_counts(model: str, count: int) -> None:
    assert P.num_parameters(load_model(model)) == count


def test_qwen2_5_vl_7b_vision_tower() -> None:
    # ~0.68B; model.visual's sum(p.numel()) is 676,550,144 in public fine-tuning logs
    # (8,292,166,656 total - 7,615,616,512 language model).
    assert P.num_vision_parameters(load_model("Qwen/Qwen2.5-VL-7B-Instruct")) == 676_550_144


def test_internvit_300m_tower_is_about_300m() -> None:
    """InternViT-300M-448px-V2_5 (the InternVL3-2B/8B tower) without the mlp1 projector."""
    arch = load_model("OpenGVLab/InternVL3-2B")
    tower = sum(t.numel * t.count for t in P.vision_tensors(arch) if t.module.startswith(
        "vision_model."))
    assert tower == pytest.approx(0.3 * B, rel=0.02)


# --- consistency and properties ---------------------------------------------------------------


@pytest.mark.parametrize("model", catalog_ids())
def test_inventory_sums_to_total(model: str) -> None:
    arch = load_model(model)
    total = P.num_parameters(arch)
    assert sum(t.numel * t.count for t in P.model_tensors(arch)) == total
    assert P.num_small_parameters(arch, threshold=10**18) == total
    assert P.num_small_parameters(arch, threshold=0) == 0
    assert 0 < P.num_largest_module_parameters(arch) < total
    assert P.num_active_parameters(arch) <= total


def test_largest_module_is_embedding_or_fused_experts() -> None:
    qwen = load_model("Qwen/Qwen2.5-7B-Instruct")
    assert P.num_largest_module_parameters(qwen) == P.num_embedding_parameters(qwen)
    oss = load_model("openai/gpt-oss-20b")
    # 32 experts x (2880*5760 + 5760 + 2880*2880 + 2880) = 796,538,880 > 579M embedding.
    assert P.num_largest_module_parameters(oss) == 32 * (2880 * 5760 + 5760 + 2880 * 2880 + 2880)


def test_small_parameters_are_norms_and_biases() -> None:
    # Llama-3.1-8B has no biases: under 1e5 elements are only the 2*32+1 RMSNorms of 4096.
    llama = load_model("meta-llama/Llama-3.1-8B-Instruct")
    assert P.num_small_parameters(llama, threshold=100_000) == (2 * 32 + 1) * 4096


def test_unsupported_vision_tower_is_an_input_error() -> None:
    arch = load_model("Qwen/Qwen2.5-VL-7B-Instruct")
    assert arch.vision is not None
    odd = dataclasses.replace(arch, vision=dataclasses.replace(arch.vision, model_type="clip"))
    with pytest.raises(InputError, match="clip"):
        P.num_parameters(odd)


dims = st.integers(min_value=1, max_value=64)


@given(layers=st.integers(1, 8), heads=st.integers(1, 4), kv_div=st.sampled_from([1, 2, 4]),
       head_dim=dims, inter=dims, vocab=dims, tied=st.booleans())
def test_total_grows_with_layers_and_vocab(layers: int, heads: int, kv_div: int, head_dim: int,
                                           inter: int, vocab: int, tied: bool) -> None:
    kv = max(1, heads // kv_div)
    config = {"model_type": "llama", "hidden_size": heads * head_dim, "intermediate_size": inter,
              "num_hidden_layers": layers, "num_attention_heads": heads,
              "num_key_value_heads": kv, "vocab_size": vocab, "tie_word_embeddings": tied,
              "max_position_embeddings": 16}
    base = arch_from_config(config, "p")
    deeper = arch_from_config({**config, "num_hidden_layers": layers + 1}, "p")
    wider_vocab = arch_from_config({**config, "vocab_size": vocab + 1}, "p")
    one_layer = P.num_parameters_per_decoder_layer(base, "dense")
    assert P.num_parameters(deeper) - P.num_parameters(base) == one_layer
    assert P.num_parameters(wider_vocab) > P.num_parameters(base)
    assert P.num_parameters(base) == P.num_language_model_parameters(base)
    assert P.num_decoder_layer_parameters(base) == layers * one_layer
