"""Model architectures: the dimensions of an HF ``config.json`` that memory depends on.

``arch_from_config`` turns a config dict into a frozen ``ModelArch`` (its vision tower is
read by ``vision``); ``load_model`` finds the dict (shipped catalog, local directory or JSON
file). Nothing here imports torch or transformers: the rules that transformers hard-codes per
family (Qwen2's q/k/v bias, Qwen3's q/k norms, Gemma's tied embeddings) are written out below,
each with the file it comes from.

Known limitations: families are recognised by ``model_type``; an unknown family is read as
a Llama-style decoder (``attention_bias``/``mlp_bias`` keys honoured, no q/k norm).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import InputError, unknown_name_error
from .checkpoint import CheckpointInfo
from .hf_config import FIELD, config_int
from .vision import VisionArch, vision_from_config  # VisionArch is re-exported

CONFIG_FILE_NAME = "config.json"
CATALOG_ID_SEPARATOR = "/"
CATALOG_STEM_SEPARATOR = "--"
SUBCONFIG_KEYS = ("text_config", "llm_config")
"""Where multimodal configs nest the language model: gemma3/Qwen2.5-VL (transformers>=4.52)
use ``text_config``, InternVL's remote code uses ``llm_config``."""
CATALOG_DEFAULTS_KEY = "_defaults_filled_by_transformers"
"""Catalog annotation inside a sparse sub-config: the values transformers fills in."""

QKV_BIAS_FAMILIES = frozenset(
    {"qwen2", "qwen2_moe", "qwen2_vl", "qwen2_5_vl", "qwen2_vl_text", "qwen2_5_vl_text"}
)
"""q/k/v projections built with ``bias=True`` regardless of config, o_proj without.
Source: transformers/models/qwen2/modeling_qwen2.py (Qwen2Attention), same in qwen2_moe,
qwen2_vl, qwen2_5_vl."""
QK_NORM_FAMILIES = frozenset({"qwen3", "qwen3_moe", "gemma3", "gemma3_text"})
"""RMSNorm(head_dim) on queries and keys. Source: transformers/models/qwen3/modeling_qwen3.py,
qwen3_moe/modeling_qwen3_moe.py, gemma3/modeling_gemma3.py (q_norm, k_norm)."""
SANDWICH_NORM_FAMILIES = frozenset({"gemma2", "gemma3", "gemma3_text"})
"""Four RMSNorms per layer (pre/post attention, pre/post feed-forward).
Source: transformers/models/gemma2/modeling_gemma2.py (Gemma2DecoderLayer)."""
TIED_BY_DEFAULT_FAMILIES = frozenset({"gemma", "gemma2", "gemma3", "gemma3_text"})
"""Families whose config class defaults ``tie_word_embeddings`` to True (Gemma*Config);
Llama/Qwen/Mistral/DeepSeek/gpt-oss configs default it to False."""
FUSED_EXPERT_FAMILIES = frozenset({"gpt_oss"})
"""MoE experts stored as 3-D parameters in one module (GptOssExperts.gate_up_proj etc.) in
transformers 4.5x; Qwen-MoE/DeepSeek/Mixtral keep an ``nn.ModuleList`` of per-expert MLPs."""
GPT_OSS_FAMILIES = frozenset({"gpt_oss"})
"""Biased experts and router, one learned attention-sink logit per head.
Source: transformers/models/gpt_oss/modeling_gpt_oss.py."""

FAMILY_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma3_text": {
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "vocab_size": 262_208,
        "max_position_embeddings": 131_072,
        "sliding_window": 4096,
        "sliding_window_pattern": 6,
    },
}
"""Config-class defaults for families whose hub files leave required keys out.
Source: transformers/models/gemma3/configuration_gemma3.py (Gemma3TextConfig.__init__)."""

OPT_IN_SLIDING_FAMILIES = QKV_BIAS_FAMILIES | {"qwen3", "qwen3_moe"}
"""``sliding_window`` applies only with ``use_sliding_window: true`` (default False), to
layers from ``max_window_layers`` on. Source: qwen2/configuration_qwen2.py, qwen3 likewise."""
GEMMA2_SLIDING_PERIOD = 2
"""Gemma2 alternates local/global attention: even layers slide (``not layer_idx % 2``)."""


@dataclass(frozen=True)
class ModelArch:
    """A decoder-only language model (plus optional vision tower), as configured."""

    name: str
    model_type: str
    text_model_type: str
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    tie_word_embeddings: bool
    qkv_bias: bool
    o_bias: bool
    mlp_bias: bool
    qk_norm: bool
    sandwich_norm: bool
    max_position_embeddings: int
    sliding_window: int | None = None
    num_sliding_window_layers: int = 0
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0
    num_shared_experts: int = 0
    num_dense_layers: int = 0
    """Layers with a dense MLP; equals ``num_layers`` for dense models."""
    experts_fused: bool = False
    router_bias: bool = False
    attention_sinks: bool = False
    kv_lora_rank: int = 0
    q_lora_rank: int | None = None
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    vision: VisionArch | None = None
    source: str = ""
    checkpoint: CheckpointInfo | None = None
    """What the resolver found beside the config (exact parameter counts, quantization); set
    by ``catalog.resolve``, None for a bare config dict."""

    @property
    def num_moe_layers(self) -> int:
        return self.num_layers - self.num_dense_layers

    @property
    def uses_mla(self) -> bool:
        return self.kv_lora_rank > 0


def _require(config: dict[str, Any], key: str, name: str) -> int:
    """A required positive integer dimension."""
    value = config.get(key)
    if value is None:
        raise InputError(FIELD, f"config of {name!r} has no {key!r}, needed to size the model")
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InputError(FIELD, f"config of {name!r} has {key}={value!r}; expected a positive "
                         "integer")
    return value


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    """The language model's keys: nested sub-config over flattened top-level copies over
    the family's config-class defaults."""
    sub: dict[str, Any] = next(
        (config[k] for k in SUBCONFIG_KEYS if isinstance(config.get(k), dict)), {})
    top = {k: v for k, v in config.items() if k not in SUBCONFIG_KEYS and k != "vision_config"}
    text_type = sub.get("model_type") or config.get("model_type", "")
    return {
        **FAMILY_DEFAULTS.get(text_type, {}),
        **top,
        **sub.get(CATALOG_DEFAULTS_KEY, {}),
        **sub,
        "model_type": text_type,
    }


def _num_dense_layers(text: dict[str, Any], num_layers: int, num_experts: int) -> int:
    """Source: deepseek_v3/modeling_deepseek_v3.py (first_k_dense_replace, moe_layer_freq);
    qwen2_moe/qwen3_moe modeling (mlp_only_layers, decoder_sparse_step)."""
    if num_experts == 0:
        return num_layers
    if "first_k_dense_replace" in text:
        first_k = config_int(text, "first_k_dense_replace")
        freq = config_int(text, "moe_layer_freq", 1)
        return sum(1 for i in range(num_layers) if not (i >= first_k and i % freq == 0))
    mlp_only = set(text.get("mlp_only_layers") or ())
    step = config_int(text, "decoder_sparse_step", 1)
    return sum(1 for i in range(num_layers) if i in mlp_only or (i + 1) % step != 0)


def _sliding(text: dict[str, Any], num_layers: int) -> tuple[int | None, int]:
    """(window, number of layers using it); (None, 0) when no layer slides.

    Source: qwen2 (use_sliding_window, layers >= max_window_layers), mistral (all layers),
    gemma2 (even layers), gemma3 (all but every ``sliding_window_pattern``-th), gpt_oss and
    newer configs (``layer_types``)."""
    window, family = text.get("sliding_window"), text["model_type"]
    opt_in = family in OPT_IN_SLIDING_FAMILIES
    if window is None or text.get("use_sliding_window", not opt_in) is False:
        return None, 0
    if isinstance(text.get("layer_types"), list):
        count = sum(1 for t in text["layer_types"] if t == "sliding_attention")
    elif opt_in:
        count = max(0, num_layers - config_int(text, "max_window_layers", 0))
    elif family == "gemma2":
        count = sum(1 for i in range(num_layers) if i % GEMMA2_SLIDING_PERIOD == 0)
    elif "sliding_window_pattern" in text:
        pattern = config_int(text, "sliding_window_pattern")
        count = sum(1 for i in range(num_layers) if (i + 1) % pattern != 0)
    else:
        count = num_layers
    return (int(window), count) if count else (None, 0)


def arch_from_config(config: dict[str, Any], name: str, source: str = "") -> ModelArch:
    """Parse an HF ``config.json`` dict (pure).

    Raises ``InputError("model", ...)`` naming the first missing or malformed key.
    Assumes: head_dim = ``head_dim`` if present, else q/k head width for MLA
    (qk_nope + qk_rope), else hidden / heads.
    """
    if not isinstance(config, dict):
        raise InputError(FIELD, f"config of {name!r} is not a JSON object")
    try:
        return _arch_from_config(config, name, source)
    except InputError:
        raise
    except (TypeError, ValueError, ZeroDivisionError) as err:
        raise InputError(FIELD, f"config of {name!r} has a malformed value ({err})") from err


def _arch_from_config(config: dict[str, Any], name: str, source: str) -> ModelArch:
    text = _text_config(config)
    family = text["model_type"]
    hidden = _require(text, "hidden_size", name)
    num_layers = _require(text, "num_hidden_layers", name)
    heads = _require(text, "num_attention_heads", name)
    vocab = _require(text, "vocab_size", name)
    intermediate = _require(text, "intermediate_size", name)
    max_pos = _require(text, "max_position_embeddings", name)
    num_experts = next(
        (config_int(text, k) for k in ("num_experts", "n_routed_experts", "num_local_experts")
         if text.get(k)),
        0,
    )
    kv_lora_rank = config_int(text, "kv_lora_rank")
    if "head_dim" in text and text["head_dim"] is not None:
        head_dim = int(text["head_dim"])
    elif kv_lora_rank:
        head_dim = config_int(text, "qk_nope_head_dim") + config_int(text, "qk_rope_head_dim")
    else:
        head_dim = hidden // heads
    window, num_sliding = _sliding(text, num_layers)
    attention_bias = bool(text.get("attention_bias", False))
    is_gpt_oss = family in GPT_OSS_FAMILIES
    tied_default = family in TIED_BY_DEFAULT_FAMILIES or config.get("model_type") in (
        TIED_BY_DEFAULT_FAMILIES
    )
    return ModelArch(
        name=name,
        model_type=str(config.get("model_type", family)),
        text_model_type=family,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_layers=num_layers,
        num_attention_heads=heads,
        num_kv_heads=config_int(text, "num_key_value_heads", heads),
        head_dim=head_dim,
        vocab_size=vocab,
        tie_word_embeddings=bool(text.get("tie_word_embeddings", tied_default)),
        qkv_bias=family in QKV_BIAS_FAMILIES or attention_bias,
        o_bias=family not in QKV_BIAS_FAMILIES and attention_bias,
        mlp_bias=bool(text.get("mlp_bias", False)) or is_gpt_oss,
        qk_norm=family in QK_NORM_FAMILIES,
        sandwich_norm=family in SANDWICH_NORM_FAMILIES,
        max_position_embeddings=max_pos,
        sliding_window=window,
        num_sliding_window_layers=num_sliding,
        num_experts=num_experts,
        num_experts_per_tok=config_int(text, "num_experts_per_tok") if num_experts else 0,
        moe_intermediate_size=config_int(text, "moe_intermediate_size", intermediate)
        if num_experts
        else 0,
        shared_expert_intermediate_size=config_int(text, "shared_expert_intermediate_size"),
        num_shared_experts=config_int(text, "n_shared_experts"),
        num_dense_layers=_num_dense_layers(text, num_layers, num_experts),
        experts_fused=family in FUSED_EXPERT_FAMILIES,
        router_bias=is_gpt_oss,
        attention_sinks=is_gpt_oss,
        kv_lora_rank=kv_lora_rank,
        q_lora_rank=(config_int(text, "q_lora_rank") or None) if kv_lora_rank else None,
        qk_rope_head_dim=config_int(text, "qk_rope_head_dim") if kv_lora_rank else 0,
        qk_nope_head_dim=config_int(text, "qk_nope_head_dim") if kv_lora_rank else 0,
        v_head_dim=config_int(text, "v_head_dim") if kv_lora_rank else 0,
        vision=vision_from_config(config, hidden),
        source=source,
    )
