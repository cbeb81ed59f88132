"""vLLM weight requests and FSDP units for the families beyond the Llama layer: hand-derived
tiny cases (GPT-NeoX, OLMo2, Phi-2, a Qwen3.5 hybrid, Qwen3-VL's deepstack mergers), then
every tiny family config of ``test_params_vs_transformers`` against the model transformers
builds (FSDP units = the modules of its ``_no_split_modules``, as verl wraps them)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from oomless.catalog.models import arch_from_config
from oomless.catalog.resolve import load_model
from oomless.memory import params as P
from oomless.memory import pinned as Pn

TINY = {"hidden_size": 8, "intermediate_size": 32, "num_hidden_layers": 1,
        "num_attention_heads": 2, "vocab_size": 64, "tie_word_embeddings": False,
        "max_position_embeddings": 64}
"""h=8, I=32, a=2, d=4, V=64 (already a multiple of vLLM's 64-row padding)."""


def _bytes(*numels: int) -> tuple[int, ...]:
    return tuple(2 * n for n in numels)


def test_gpt_neox_plain_mlp_and_layernorm_biases() -> None:
    arch = arch_from_config({**TINY, "model_type": "gpt_neox"}, "tiny-neox")
    # TP=1: query_key_value 3·8·8 + bias 24 (no GQA), dense 8·8 + bias 8, dense_h_to_4h
    # 8·32 + bias 32, dense_4h_to_h 32·8 + bias 8, two LayerNorms of weight + bias (8 each);
    # embed_in 64·8, final LayerNorm 8 + 8, embed_out 64·8.
    layer = _bytes(192, 24, 64, 8, 256, 32, 256, 8, 8, 8, 8, 8)
    assert Pn.vllm_weight_request_sizes(arch, 1) == (1024, *layer, 16, 16, 1024)
    # TP=2: 1 head of q, k, v each (3·4 rows), dense 4·8 (bias whole), h_to_4h 16 rows + 16
    # bias, 4h_to_h 16·8 (bias whole); vocab 32 rows.
    layer2 = _bytes(96, 12, 32, 8, 128, 16, 128, 8, 8, 8, 8, 8)
    assert Pn.vllm_weight_request_sizes(arch, 2) == (512, *layer2, 16, 16, 512)
    # FSDP: the layer (qkv 216 + dense 72 + MLP 288 + 264 + norms 32 = 872) and the root
    # (512 + 16 + 512).
    assert Pn.fsdp_unit_parameters(arch) == (872, 1040)


def test_olmo2_full_width_qk_norms_are_replicated() -> None:
    arch = arch_from_config({**TINY, "model_type": "olmo2", "intermediate_size": 16,
                             "num_key_value_heads": 1}, "tiny-olmo2")
    # qkv (8+4+4)·8, o 8·8, q_norm a·d = 8, k_norm k·d = 4, gate_up 2·16·8, down 16·8,
    # post_attention_layernorm and post_feedforward_layernorm 8 each.
    assert Pn.vllm_weight_request_sizes(arch, 1)[1:-2] == _bytes(128, 64, 8, 4, 256, 128, 8, 8)
    # TP=2: one q head + the kv head replicated, o 4·8; the q/k norms stay whole (olmo2.py
    # all-gathers q and k before them).
    assert Pn.vllm_weight_request_sizes(arch, 2)[1:-2] == _bytes(96, 32, 8, 4, 128, 64, 8, 8)


def test_phi_lm_head_bias_is_padded_like_the_vocabulary() -> None:
    arch = arch_from_config({**TINY, "model_type": "phi", "vocab_size": 60}, "tiny-phi")
    # V = 60 -> 64 rows; one input LayerNorm; q/k/v fused with bias, dense, fc1/fc2 biased;
    # lm_head weight and bias (64).
    layer = _bytes(192, 24, 64, 8, 256, 32, 256, 8, 8, 8)
    assert Pn.vllm_weight_request_sizes(arch, 1) == (1024, *layer, 16, 16, 1024, 128)
    assert sum(Pn.vllm_weight_request_sizes(arch, 1)) == 2 * (P.num_parameters(arch)
                                                              + 4 * 8 * 2 + 4)


HYBRID = {"model_type": "qwen3_5_text", "hidden_size": 8, "intermediate_size": 16,
          "num_hidden_layers": 4, "num_attention_heads": 2, "num_key_value_heads": 1,
          "head_dim": 4, "vocab_size": 64, "tie_word_embeddings": False,
          "max_position_embeddings": 64, "linear_num_key_heads": 2,
          "linear_num_value_heads": 4, "linear_key_head_dim": 2, "linear_value_head_dim": 2,
          "linear_conv_kernel_dim": 4}
"""Three Gated DeltaNet layers, then full attention (full_attention_interval 4); K = 4, V = 8."""


def test_hybrid_layers_by_hand() -> None:
    arch = arch_from_config(HYBRID, "tiny-qwen3.5")
    assert [linear for _, linear in P.decoder_layer_sequence(arch)] == [True, True, True, False]
    mlp_norms = _bytes(256, 128, 8, 8)  # gate_up 2·16·8, down 16·8, two RMSNorms
    # conv1d (2K+V)·4, in_proj_qkv (2K+V)·8, in_proj_z 8·8, in_proj_b/a 4·8, dt_bias, A_log 4,
    # gated norm dv = 2, out_proj 8·8.
    linear = _bytes(64, 128, 64, 32, 32, 4, 4, 2, 64)
    # qkv_proj: q and its gate (2·2·4) + k + v (4 each), ·8; o 8·8; q_norm/k_norm of d = 4.
    full = _bytes(192, 64, 4, 4)
    requests = Pn.vllm_weight_request_sizes(arch, 1)
    assert requests == (1024, *(linear + mlp_norms) * 3, *full, *mlp_norms, 16, 1024)
    # TP=2: conv 8 rows, qkv [2, 2, 4] rows, z 4, b/a 2, dt_bias/A_log 2, out_proj 4·8;
    # full: 2 q heads (1 + gate) + k + v replicated = 4·4 rows.
    linear2 = _bytes(32, 64, 32, 16, 16, 2, 2, 2, 32)
    full2 = _bytes(128, 32, 4, 4)
    mlp_norms2 = _bytes(128, 64, 8, 8)
    assert Pn.vllm_weight_request_sizes(arch, 2) == (
        512, *(linear2 + mlp_norms2) * 3, *full2, *mlp_norms2, 16, 512)
    # FSDP: linear layer 64+128+64+32+32+4+4+2+64 = 394, + MLP 384 + norms 16 = 794;
    # full layer q 128 + k 32 + v 32 + o 64 + q/k norms 8 = 264, + 400 = 664.
    assert Pn.fsdp_unit_parameters(arch) == (794, 794, 794, 664, 512 + 8 + 512)
    assert sum(Pn.fsdp_unit_parameters(arch)) == P.num_parameters(arch)


def test_qwen3_vl_deepstack_mergers_and_blocks() -> None:
    arch = load_model("Qwen/Qwen3-VL-2B-Instruct")
    v = arch.vision
    assert v is not None and len(v.deepstack_visual_indexes) == 3
    requests = Pn.vllm_weight_request_sizes(arch, 2)
    # merger + 3 deepstack mergers: linear_fc1 (m²h)² column-split = 4096·4096/2 elements.
    assert requests.count(2 * 4096 * 4096 // 2) == 4
    # every block's fused qkv (3h x h, split) once per block, after the patch embed (3·2·16²
    # x h, replicated: by chance the same size) and the learned pos_embed (whole).
    assert requests[0] == 2 * 3 * 2 * 16 * 16 * 1024
    assert requests.count(2 * 3 * 1024 * 1024 // 2) == v.depth + 1
    assert requests.count(2 * v.num_position_embeddings * 1024) == 1
    # FSDP: decoder layers, one unit per Qwen3VLVisionBlock, the root.
    units = Pn.fsdp_unit_parameters(arch)
    assert len(units) == arch.num_layers + v.depth + 1


# --- every tiny family config against transformers --------------------------------------------

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tests.memory.test_params_vs_transformers import (  # noqa: E402
    TEXT_CASES, TINY_TEXT, VLM_CASES, _vlm_config)


def _hf_fsdp_units(model: Any) -> tuple[list[int], int]:
    """verl's default wrap: every module whose class is in ``_no_split_modules`` (innermost
    first) becomes a unit of the parameters no inner unit took; the root keeps the rest."""
    wrap = set(model._no_split_modules or ())
    wrapped = [m for _, m in model.named_modules() if type(m).__name__ in wrap]
    taken: set[int] = set()
    units = []
    for module in reversed(wrapped):
        params = [p for p in module.parameters() if id(p) not in taken]
        taken |= {id(p) for p in params}
        units.append(sum(p.numel() for p in params))
    root = sum(p.numel() for p in model.parameters() if id(p) not in taken)
    return sorted(units), root


def _check(model_cls: Any, config: Any, name: str) -> None:
    with torch.device("meta"):
        model = model_cls.from_config(config)
    arch = arch_from_config(config.to_dict(), name)
    units, root = _hf_fsdp_units(model)
    ours = Pn.fsdp_unit_parameters(arch)
    assert (sorted(ours[:-1]), ours[-1]) == (units, root)
    padded = math.ceil(arch.vocab_size / 64) * 64 - arch.vocab_size
    vocab_tensors = 1 if arch.tie_word_embeddings else 2
    expected = (P.num_parameters(arch) + padded * arch.hidden_size * vocab_tensors
                + (padded if arch.lm_head_bias else 0))
    assert sum(Pn.vllm_weight_request_sizes(arch, 1)) == 2 * expected


@pytest.mark.parametrize(("model_type", "overrides"), TEXT_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(TEXT_CASES)])
def test_text_family_units_and_requests(model_type: str, overrides: dict[str, Any]) -> None:
    config = transformers.AutoConfig.for_model(model_type, **{**TINY_TEXT, **overrides})
    _check(transformers.AutoModelForCausalLM, config, f"tiny-{model_type}")


@pytest.mark.parametrize(("model_type", "vision", "text", "top"), VLM_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(VLM_CASES)])
def test_vision_language_family_units_and_requests(
        model_type: str, vision: dict[str, Any], text: dict[str, Any], top: dict[str, Any]
) -> None:
    config = _vlm_config(model_type, vision, text, top)
    _check(transformers.AutoModelForImageTextToText, config, f"tiny-{model_type}")
