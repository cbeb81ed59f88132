"""Per-family rules that transformers hard-codes and ``config.json`` does not say.

One ``FamilyTraits`` row per ``model_type``: which projections carry a bias (and which config
key switches it), how q/k/v and gate/up are fused and named, the norm kind and the norms per
layer, q/k norms, tied-embedding default, and the config-class defaults that hub files may
leave out. ``models.arch_from_config`` reads a row; nothing here computes a count. Each row
cites the transformers file (5.x, ``src/transformers/models/``) or remote-code file it
transcribes. A ``model_type`` missing from ``FAMILIES`` is read with ``LLAMA_TRAITS`` and the
assumptions are reported (``assumed_traits_warning``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

NormType = Literal["rms_norm", "layer_norm", "none"]
"""RMSNorm (weight), LayerNorm (weight + bias), or a norm without parameters (OLMo-1)."""
MlpType = Literal["gated", "plain"]
"""SwiGLU-style gate/up/down, or a 2-layer up/down MLP (GPT-NeoX, Phi-2, StarCoder2)."""
QkNorm = Literal["", "head", "full"]
"""No q/k norm; a norm of width head_dim shared by heads (Qwen3, gemma3); or a norm over the
whole q (a·d) and k (k·d) projection (OLMo2, OLMoE)."""

PRE_NORMS = ("input_layernorm", "post_attention_layernorm")
SANDWICH_NORMS = (*PRE_NORMS, "pre_feedforward_layernorm", "post_feedforward_layernorm")
LLAMA_ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj")
LLAMA_MLP = ("gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class FamilyTraits:
    """How one family lays out a decoder layer. Bias fields: True/False is fixed by the
    modeling code; None means the config key named next to it decides."""

    source: str
    qkv_bias: bool | None = None
    qkv_bias_key: str = "attention_bias"
    o_bias: bool | None = None
    o_bias_key: str = "attention_bias"
    mlp_bias: bool | None = None
    mlp_bias_key: str = "mlp_bias"
    attention_module: str = "self_attn"
    attention_names: tuple[str, ...] = LLAMA_ATTENTION
    """(q, k, v, o), or (qkv, o) when q/k/v are one fused linear."""
    mlp_module: str = "mlp"
    mlp: MlpType = "gated"
    mlp_names: tuple[str, ...] = LLAMA_MLP
    """gated: (gate, up, down) or fused (gate_up, down); plain: (up, down)."""
    norm_type: NormType = "rms_norm"
    layer_norms: tuple[str, ...] = PRE_NORMS
    qk_norm: QkNorm = ""
    qk_norm_key: str = ""
    """When set, the q/k norms exist only if this config key is true (Phi ``qk_layernorm``)."""
    tied_default: bool = False
    lm_head_bias: bool = False
    ignores_kv_heads: bool = False
    """q/k/v always have ``num_attention_heads`` heads (GPT-NeoX has no GQA)."""
    parallel_residual_key: str = ""
    """Config key of attention and MLP reading the same input (GPT-NeoX); "" = sequential,
    "*" = always parallel (Phi-2)."""
    opt_in_sliding: bool = False
    hybrid_linear_attention: bool = False
    """Gated DeltaNet ``linear_attn`` layers between gated full-attention layers whose q_proj
    also emits an output gate (Qwen3.5, Qwen3-Next)."""
    experts_fused: bool = False
    gpt_oss: bool = False
    defaults: dict[str, Any] = field(default_factory=dict)
    """Config-class defaults for keys hub files may leave out (read under the file's keys)."""
    aliases: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Family-only spellings of canonical keys, tried before ``hf_config.KEY_ALIASES``."""

    @property
    def fused_qkv(self) -> bool:
        return len(self.attention_names) == 2

    @property
    def fused_gate_up(self) -> bool:
        return self.mlp == "gated" and len(self.mlp_names) == 2


LLAMA_TRAITS = FamilyTraits("llama/modeling_llama.py")
_QWEN2 = FamilyTraits("qwen2/modeling_qwen2.py (q/k/v bias=True, o_proj bias=False)",
                      qkv_bias=True, o_bias=False, opt_in_sliding=True)
_QWEN3 = FamilyTraits("qwen3/modeling_qwen3.py (q_norm/k_norm RMSNorm(head_dim))",
                      qk_norm="head", opt_in_sliding=True)
_QWEN3_5 = FamilyTraits(
    "qwen3_5/modeling_qwen3_5.py, configuration_qwen3_5.py (Qwen3_5GatedDeltaNet linear_attn; "
    "full-attention q_proj of width 2·a·d carrying the output gate; full_attention_interval=4)",
    qk_norm="head", hybrid_linear_attention=True, defaults={"full_attention_interval": 4})
_GEMMA3 = FamilyTraits(
    "gemma3/modeling_gemma3.py, configuration_gemma3.py (Gemma3TextConfig defaults)",
    layer_norms=SANDWICH_NORMS, qk_norm="head", tied_default=True,
    defaults={"num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
              "vocab_size": 262_208, "max_position_embeddings": 131_072,
              "sliding_window": 4096, "sliding_window_pattern": 6})
_OLMO2 = FamilyTraits("olmo2/modeling_olmo2.py (post-norms only; q_norm RMSNorm(a·d), "
                      "k_norm RMSNorm(k·d))",
                      layer_norms=("post_attention_layernorm", "post_feedforward_layernorm"),
                      qk_norm="full")
_GLM = FamilyTraits("glm/modeling_glm.py, configuration_glm.py (attention_bias=True, "
                    "partial_rotary_factor=0.5; o_proj bias=False; fused gate_up_proj)",
                    o_bias=False, mlp_names=("gate_up_proj", "down_proj"),
                    defaults={"attention_bias": True, "partial_rotary_factor": 0.5})

FAMILIES: dict[str, FamilyTraits] = {
    "llama": LLAMA_TRAITS,
    "mistral": replace(LLAMA_TRAITS, source="mistral/modeling_mistral.py"),
    "mixtral": replace(LLAMA_TRAITS, source="mixtral/modeling_mixtral.py (num_local_experts)"),
    "granite": replace(LLAMA_TRAITS, source="granite/modeling_granite.py"),
    "smollm3": replace(LLAMA_TRAITS, source="smollm3/modeling_smollm3.py"),
    "deepseek_v2": replace(LLAMA_TRAITS, source="deepseek_v2/modeling_deepseek_v2.py (MLA)"),
    "deepseek_v3": replace(LLAMA_TRAITS, source="deepseek_v3/modeling_deepseek_v3.py (MLA)"),
    "qwen2": _QWEN2,
    "qwen2_moe": replace(_QWEN2, source="qwen2_moe/modeling_qwen2_moe.py"),
    "qwen2_vl": replace(_QWEN2, source="qwen2_vl/modeling_qwen2_vl.py"),
    "qwen2_vl_text": replace(_QWEN2, source="qwen2_vl/modeling_qwen2_vl.py"),
    "qwen2_5_vl": replace(_QWEN2, source="qwen2_5_vl/modeling_qwen2_5_vl.py"),
    "qwen2_5_vl_text": replace(_QWEN2, source="qwen2_5_vl/modeling_qwen2_5_vl.py"),
    "qwen2_5_omni_text": replace(_QWEN2, source="qwen2_5_omni/modeling_qwen2_5_omni.py "
                                 "(Qwen2_5OmniAttention: q/k/v bias=True, o_proj bias=False)"),
    "qwen2_5_omni_thinker": replace(_QWEN2, source="qwen2_5_omni/modeling_qwen2_5_omni.py"),
    "qwen3": _QWEN3,
    "qwen3_moe": replace(_QWEN3, source="qwen3_moe/modeling_qwen3_moe.py"),
    "qwen3_vl_text": replace(_QWEN3, source="qwen3_vl/modeling_qwen3_vl.py",
                             opt_in_sliding=False),
    "qwen3_vl_moe_text": replace(_QWEN3, source="qwen3_vl_moe/modeling_qwen3_vl_moe.py",
                                 opt_in_sliding=False),
    "qwen3_5_text": _QWEN3_5,
    "qwen3_5_moe_text": _QWEN3_5,
    "qwen3_5": _QWEN3_5,
    "qwen3_5_moe": _QWEN3_5,
    "qwen3_next": replace(_QWEN3_5, source="qwen3_next/modeling_qwen3_next.py (as qwen3_5, "
                          "in_proj_qkvz/in_proj_ba fused)"),
    "gemma": FamilyTraits("gemma/modeling_gemma.py (GemmaConfig ties embeddings)",
                          tied_default=True),
    "gemma2": FamilyTraits("gemma2/modeling_gemma2.py (Gemma2DecoderLayer: 4 RMSNorms)",
                           layer_norms=SANDWICH_NORMS, tied_default=True),
    "gemma3": _GEMMA3,
    "gemma3_text": _GEMMA3,
    "gpt_oss": FamilyTraits(
        "gpt_oss/modeling_gpt_oss.py (biased experts and router, per-head sinks)",
        mlp_bias=True, experts_fused=True, gpt_oss=True),
    "phi3": FamilyTraits("phi3/modeling_phi3.py (fused qkv_proj, gate_up_proj; no bias)",
                         qkv_bias=False, o_bias=False, mlp_bias=False,
                         attention_names=("qkv_proj", "o_proj"),
                         mlp_names=("gate_up_proj", "down_proj")),
    "phi": FamilyTraits(
        "phi/modeling_phi.py (biased q/k/v/dense/fc1/fc2/lm_head, one LayerNorm per layer, "
        "parallel attention+MLP; qk_layernorm: LayerNorm(head_dim))",
        qkv_bias=True, o_bias=True, mlp_bias=True, mlp="plain", mlp_names=("fc1", "fc2"),
        attention_names=("q_proj", "k_proj", "v_proj", "dense"), norm_type="layer_norm",
        layer_norms=("input_layernorm",), qk_norm="head", qk_norm_key="qk_layernorm",
        lm_head_bias=True, parallel_residual_key="*",
        defaults={"partial_rotary_factor": 0.5}),
    "gpt_neox": FamilyTraits(
        "gpt_neox/modeling_gpt_neox.py, configuration_gpt_neox.py (fused query_key_value, "
        "dense_h_to_4h/dense_4h_to_h with bias, LayerNorms with bias, no GQA; "
        "attention_bias=True, use_parallel_residual=True, rotary_pct=0.25)",
        mlp_bias=True, attention_module="attention",
        attention_names=("query_key_value", "dense"), mlp="plain",
        mlp_names=("dense_h_to_4h", "dense_4h_to_h"), norm_type="layer_norm",
        ignores_kv_heads=True, parallel_residual_key="use_parallel_residual",
        defaults={"attention_bias": True, "use_parallel_residual": True,
                  "partial_rotary_factor": 0.25},
        aliases={"partial_rotary_factor": ("rotary_pct",)}),
    "olmo": FamilyTraits("olmo/modeling_olmo.py (OlmoLayerNorm has no parameters)",
                         norm_type="none"),
    "olmo2": _OLMO2,
    "olmo3": replace(_OLMO2, source="olmo3/modeling_olmo3.py (as olmo2, + layer_types)"),
    "olmoe": FamilyTraits("olmoe/modeling_olmoe.py (q_norm RMSNorm(a·d), k_norm RMSNorm(k·d))",
                          qk_norm="full"),
    "glm": _GLM,
    "glm4": replace(_GLM, source="glm4/modeling_glm4.py (as glm, + post_self_attn_layernorm "
                    "and post_mlp_layernorm)",
                    layer_norms=(*PRE_NORMS, "post_self_attn_layernorm", "post_mlp_layernorm")),
    "starcoder2": FamilyTraits(
        "starcoder2/modeling_starcoder2.py (use_bias on q/k/v/o and c_fc/c_proj, LayerNorm)",
        qkv_bias_key="use_bias", o_bias_key="use_bias", mlp_bias_key="use_bias",
        mlp="plain", mlp_names=("c_fc", "c_proj"), norm_type="layer_norm",
        defaults={"use_bias": True}),
    "internlm2": FamilyTraits(
        "InternLM2 remote code modeling_internlm2.py (attention.wqkv/wo with bias=config.bias, "
        "feed_forward.w1/w3/w2, attention_norm/ffn_norm; InternLM2Config bias=True)",
        qkv_bias_key="bias", o_bias_key="bias", attention_module="attention",
        attention_names=("wqkv", "wo"), mlp_module="feed_forward", mlp_names=("w1", "w3", "w2"),
        layer_norms=("attention_norm", "ffn_norm"), defaults={"bias": True}),
    "chatglm": FamilyTraits(
        "THUDM GLM-4/ChatGLM2-3 remote code modeling_chatglm.py (self_attention."
        "query_key_value bias=add_qkv_bias, dense and mlp bias=add_bias_linear, "
        "mlp.dense_h_to_4h = fused gate/up of width 2·ffn_hidden_size)",
        qkv_bias_key="add_qkv_bias", o_bias_key="add_bias_linear",
        mlp_bias_key="add_bias_linear", attention_module="self_attention",
        attention_names=("query_key_value", "dense"),
        mlp_names=("dense_h_to_4h", "dense_4h_to_h"),
        defaults={"add_qkv_bias": False, "add_bias_linear": False},
        aliases={"num_key_value_heads": ("multi_query_group_num",),
                 "vocab_size": ("padded_vocab_size",)}),
}
"""Families whose layouts are transcribed; each row's ``source`` names its modeling file."""


def family_traits(model_type: str) -> FamilyTraits | None:
    """The row for ``model_type``, or None for a family not transcribed here."""
    return FAMILIES.get(model_type)


def assumed_traits_warning(model_type: str, bias: bool, tied: bool) -> str:
    """The one-line warning for a ``model_type`` planned with ``LLAMA_TRAITS``."""
    return (f"unknown model_type {model_type!r}: planned as a Llama-style decoder (separate "
            f"q/k/v/o_proj, gated gate/up/down MLP, 2 RMSNorms per layer, no q/k norm, "
            f"attention bias={bias} from 'attention_bias', tie_word_embeddings={tied}); "
            "parameter counts may be off if the family differs")
