"""Model architectures: reading an HF ``config.json`` into a ``ModelArch``.

``arch_from_config`` turns a config dict into a frozen ``ModelArch`` (the type lives in
``arch``; it, ``VisionArch`` and ``AudioArch`` are re-exported here): the language model's
keys (nested ``text_config``/``llm_config`` or flat, under any spelling ``hf_config`` knows),
the family's layout rules from ``families.FAMILIES`` (each citing its transformers file),
and the vision tower read by ``vision``. Nothing here imports torch or transformers.

An unknown ``model_type`` with the standard decoder keys is read as a Llama-style decoder and
the assumptions made land in ``ModelArch.warnings``; a config missing a key needed to size
the model is an ``InputError`` naming the key (and the other spellings tried).
"""

from __future__ import annotations

from typing import Any

from ..errors import InputError
from .arch import ModelArch
from .families import LLAMA_TRAITS, FamilyTraits, assumed_traits_warning, family_traits
from .hf_config import FIELD, KEY_ALIASES, config_get, config_int
from .vision import AudioArch, VisionArch, audio_from_config, vision_from_config

__all__ = [
    "AudioArch", "ModelArch", "VisionArch",  # re-exported from arch and vision
    "CATALOG_DEFAULTS_KEY", "EXPERT_COUNT_KEYS", "GEMMA2_SLIDING_PERIOD", "LINEAR_ATTENTION",
    "NON_ATTENTION_MIXER_KEYS", "SPEECH_OUTPUT_KEYS", "SUBCONFIG_KEYS", "THINKER_KEY",
    "UNKNOWN_MAX_POSITIONS", "arch_from_config",
]

SUBCONFIG_KEYS = ("text_config", "llm_config")
"""Where multimodal configs nest the language model: gemma3/Qwen-VL/LLaVA/Idefics3
(transformers>=4.52) use ``text_config``, InternVL's remote code uses ``llm_config``."""
CATALOG_DEFAULTS_KEY = "_defaults_filled_by_transformers"
"""Catalog annotation inside a sparse sub-config: the values transformers fills in."""
EXPERT_COUNT_KEYS = ("num_experts", "n_routed_experts", "num_local_experts")
"""Routed experts per MoE layer: Qwen-MoE/OLMoE, DeepSeek/GLM-4-MoE, Mixtral/gpt-oss."""
GEMMA2_SLIDING_PERIOD = 2
"""Gemma2 alternates local/global attention: even layers slide (``not layer_idx % 2``)."""
NON_ATTENTION_MIXER_KEYS = ("hybrid_override_pattern", "mamba_num_heads", "ssm_state_size",
                            "linear_num_value_heads", "conv_kernel")
"""Keys of Mamba/linear-attention hybrids (Nemotron-H, Jamba, Qwen3.5): an unknown family
carrying them is not a plain decoder, and the warning says so."""
THINKER_KEY = "thinker_config"
"""Qwen2.5-Omni nests the model that reads text, images and audio and writes text (the
"thinker", which GRPO trains) under ``thinker_config``, beside the speech ``talker_config``
and ``token2wav_config``. Source: qwen2_5_omni/configuration_qwen2_5_omni.py."""
SPEECH_OUTPUT_KEYS = ("talker_config", "token2wav_config")
UNKNOWN_MAX_POSITIONS = 0
"""``max_position_embeddings`` recorded when a config has none (nothing is sized by it)."""


def _require(text: dict[str, Any], key: str, name: str, traits: FamilyTraits) -> int:
    """A required positive integer dimension, under ``key`` or one of its spellings."""
    spellings = (key, *traits.aliases.get(key, ()), *KEY_ALIASES.get(key, ()))
    value = next((text[k] for k in spellings if text.get(k) is not None), None)
    if value is None:
        others = f" (nor {', '.join(repr(k) for k in spellings[1:])})" if spellings[1:] else ""
        raise InputError(FIELD, f"config of {name!r} has no {key!r}{others}, needed to size "
                         "the model")
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InputError(FIELD, f"config of {name!r} has {key}={value!r}; expected a positive "
                         "integer")
    return value


def _get(text: dict[str, Any], key: str, traits: FamilyTraits, default: Any = None) -> Any:
    """An optional value under ``key``, the family's spellings, or the common ones."""
    for k in traits.aliases.get(key, ()):
        if text.get(k) is not None:
            return text[k]
    return config_get(text, key, default)


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    """The language model's keys: nested sub-config over flattened top-level copies over
    the family's config-class defaults."""
    nested: dict[str, Any] = next(
        (config[k] for k in SUBCONFIG_KEYS if isinstance(config.get(k), dict)), {})
    sub = {k: v for k, v in nested.items() if v is not None}
    top = {k: v for k, v in config.items()
           if k not in SUBCONFIG_KEYS and k != "vision_config" and v is not None}
    text_type = sub.get("model_type") or config.get("model_type", "")
    traits = family_traits(text_type) or family_traits(str(config.get("model_type", "")))
    return {
        **(traits.defaults if traits else {}),
        **top,
        **sub.get(CATALOG_DEFAULTS_KEY, {}),
        **sub,
        "model_type": text_type,
    }


def _num_dense_layers(text: dict[str, Any], num_layers: int, num_experts: int) -> int:
    """Source: deepseek_v3/modeling_deepseek_v3.py and deepseek_v2 (first_k_dense_replace,
    moe_layer_freq); qwen2_moe/qwen3_moe modeling (mlp_only_layers, decoder_sparse_step)."""
    if num_experts == 0:
        return num_layers
    if "first_k_dense_replace" in text:
        first_k = config_int(text, "first_k_dense_replace")
        freq = config_int(text, "moe_layer_freq", 1)
        return sum(1 for i in range(num_layers) if not (i >= first_k and i % freq == 0))
    mlp_only = set(text.get("mlp_only_layers") or ())
    step = config_int(text, "decoder_sparse_step", 1)
    return sum(1 for i in range(num_layers) if i in mlp_only or (i + 1) % step != 0)


def _sliding(text: dict[str, Any], num_layers: int, opt_in: bool) -> tuple[int | None, int]:
    """(window, number of layers using it); (None, 0) when no layer slides.

    Source: qwen2 (use_sliding_window, layers >= max_window_layers), mistral (all layers),
    gemma2 (even layers), gemma3 (all but every ``sliding_window_pattern``-th), gpt_oss,
    olmo3 and newer configs (``layer_types``)."""
    window, family = text.get("sliding_window"), text["model_type"]
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
    Assumes: head_dim = q/k head width for MLA (qk_nope + qk_rope), else ``head_dim`` (or
    ``kv_channels``) if present, else hidden / heads.
    """
    if not isinstance(config, dict):
        raise InputError(FIELD, f"config of {name!r} is not a JSON object")
    try:
        return _arch_from_config(config, name, source)
    except InputError:
        raise
    except (TypeError, ValueError, ZeroDivisionError) as err:
        raise InputError(FIELD, f"config of {name!r} has a malformed value ({err})") from err


def _bias(text: dict[str, Any], fixed: bool | None, key: str) -> bool:
    return fixed if fixed is not None else bool(text.get(key, False))


def _tied(config: dict[str, Any], text: dict[str, Any], traits: FamilyTraits) -> bool:
    """``tie_word_embeddings``: a ``text_config`` model ties by the top-level key when it has
    one (transformers 5 reads ``model.config.tie_word_embeddings``, modeling_utils.py
    ``tie_weights``); InternVL's remote ``llm_config`` builds its own CausalLM and ties by it.
    """
    top = config.get("tie_word_embeddings")
    if isinstance(config.get("text_config"), dict) and top is not None:
        return bool(top)
    return bool(text.get("tie_word_embeddings", traits.tied_default))


def _head_dim(text: dict[str, Any], traits: FamilyTraits, hidden: int, heads: int) -> int:
    if config_int(text, "kv_lora_rank"):
        return config_int(text, "qk_nope_head_dim") + config_int(text, "qk_rope_head_dim")
    return int(_get(text, "head_dim", traits) or hidden // heads)


def _moe_fields(text: dict[str, Any], num_layers: int, intermediate: int) -> dict[str, Any]:
    """Routed/shared experts and the layers that have them (0s for a dense model)."""
    num_experts = next((config_int(text, k) for k in EXPERT_COUNT_KEYS if text.get(k)), 0)
    return {
        "num_experts": num_experts,
        "num_experts_per_tok": config_int(text, "num_experts_per_tok") if num_experts else 0,
        "moe_intermediate_size": config_int(text, "moe_intermediate_size", intermediate)
        if num_experts else 0,
        "shared_expert_intermediate_size": config_int(text, "shared_expert_intermediate_size"),
        "num_shared_experts": config_int(text, "n_shared_experts") if num_experts else 0,
        "num_dense_layers": _num_dense_layers(text, num_layers, num_experts),
    }


def _mla_fields(text: dict[str, Any]) -> dict[str, Any]:
    """Multi-head latent attention ranks (DeepSeek-V2/V3); empty for standard attention."""
    kv_lora_rank = config_int(text, "kv_lora_rank")
    if not kv_lora_rank:
        return {}
    return {
        "kv_lora_rank": kv_lora_rank,
        "q_lora_rank": config_int(text, "q_lora_rank") or None,
        "qk_rope_head_dim": config_int(text, "qk_rope_head_dim"),
        "qk_nope_head_dim": config_int(text, "qk_nope_head_dim"),
        "v_head_dim": config_int(text, "v_head_dim"),
    }


LINEAR_ATTENTION = "linear_attention"


def _linear_attention_fields(text: dict[str, Any], num_layers: int,
                             traits: FamilyTraits) -> dict[str, Any]:
    """Gated DeltaNet dimensions and how many layers use it (``layer_types``, else every
    layer but each ``full_attention_interval``-th). Source: qwen3_5/configuration_qwen3_5.py."""
    if not traits.hybrid_linear_attention:
        return {}
    if isinstance(text.get("layer_types"), list):
        num_linear = sum(1 for t in text["layer_types"] if t == LINEAR_ATTENTION)
    else:
        interval = config_int(text, "full_attention_interval", 4)
        num_linear = sum(1 for i in range(num_layers) if (i + 1) % interval)
    keys = ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
            "linear_value_head_dim", "linear_conv_kernel_dim")
    return {"num_linear_attention_layers": num_linear, "attention_output_gate": True,
            **{k: _require(text, k, str(text.get("model_type")), traits) for k in keys}}


def _layout_fields(text: dict[str, Any], traits: FamilyTraits) -> dict[str, Any]:
    """Biases, fusions, module names and norms the family's modeling code fixes."""
    qk_norm = bool(traits.qk_norm) and (not traits.qk_norm_key
                                        or bool(text.get(traits.qk_norm_key)))
    parallel = traits.parallel_residual_key == "*" or bool(
        traits.parallel_residual_key and text.get(traits.parallel_residual_key))
    return {
        "qkv_bias": _bias(text, traits.qkv_bias, traits.qkv_bias_key),
        "o_bias": _bias(text, traits.o_bias, traits.o_bias_key),
        "mlp_bias": _bias(text, traits.mlp_bias, traits.mlp_bias_key),
        "qk_norm": qk_norm,
        "qk_norm_full_width": qk_norm and traits.qk_norm == "full",
        "sandwich_norm": len(traits.layer_norms) >= 4,
        "attention_module": traits.attention_module,
        "attention_names": traits.attention_names,
        "mlp_module": traits.mlp_module,
        "mlp_gated": traits.mlp == "gated",
        "mlp_names": traits.mlp_names,
        "norm_type": traits.norm_type,
        "layer_norm_names": traits.layer_norms,
        "lm_head_bias": traits.lm_head_bias,
        "parallel_residual": parallel,
        "partial_rotary_factor": float(_get(text, "partial_rotary_factor", traits, None)
                                       or (text.get("rope_parameters") or {}).get(
                                           "partial_rotary_factor", 1.0)),
        "experts_fused": traits.experts_fused,
        "router_bias": traits.gpt_oss,
        "attention_sinks": traits.gpt_oss,
    }


def _thinker(config: dict[str, Any], name: str) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The config that holds the language model and its encoders (Qwen2.5-Omni's thinker, else
    ``config`` itself), and a note when a speech talker is configured beside it."""
    thinker = config.get(THINKER_KEY)
    if not isinstance(thinker, dict):
        return config, ()
    speech = [k for k in SPEECH_OUTPUT_KEYS if isinstance(config.get(k), dict)]
    if not speech or config.get("enable_audio_output") is False:
        return thinker, ()
    return thinker, (f"config of {name!r}: only the thinker (language model, vision and audio "
                     f"encoders) is counted; {' and '.join(speech)} (speech output) are built "
                     "too while enable_audio_output is true (ms-swift: ENABLE_AUDIO_OUTPUT=0 "
                     "turns it off) and their weights are not in the plan",)


def _arch_from_config(config: dict[str, Any], name: str, source: str) -> ModelArch:
    top_model_type = str(config.get("model_type", ""))
    config, speech_notes = _thinker(config, name)
    text = _text_config(config)
    family = text["model_type"]
    known = family_traits(family)
    traits = known or LLAMA_TRAITS
    hidden = _require(text, "hidden_size", name, traits)
    num_layers = _require(text, "num_hidden_layers", name, traits)
    heads = _require(text, "num_attention_heads", name, traits)
    vocab = _require(text, "vocab_size", name, traits)
    moe = _moe_fields(text, num_layers, 0)
    if moe["num_experts"] and not moe["num_dense_layers"] and text.get("intermediate_size") is None:
        intermediate = 0  # every layer is MoE (Qwen3.5-MoE files carry no dense width)
        _require(text, "moe_intermediate_size", name, traits)
    else:
        intermediate = _require(text, "intermediate_size", name, traits)
    notes: tuple[str, ...] = speech_notes
    max_pos = _get(text, "max_position_embeddings", traits)
    if max_pos is None:
        notes += (f"config of {name!r} has no 'max_position_embeddings'; context length "
                  "not checked against it",)
    tied = _tied(config, text, traits)
    layout = _layout_fields(text, traits)
    if known is None:
        notes = (assumed_traits_warning(family, layout["qkv_bias"], tied), *notes)
        if any(k in text for k in NON_ATTENTION_MIXER_KEYS):
            notes += (f"config of {name!r} describes non-attention mixer layers "
                      f"({', '.join(k for k in NON_ATTENTION_MIXER_KEYS if k in text)}); "
                      "they were counted as attention layers",)
    window, num_sliding = _sliding(text, num_layers, traits.opt_in_sliding)
    kv_heads = heads if traits.ignores_kv_heads else int(
        _get(text, "num_key_value_heads", traits, heads))
    return ModelArch(
        name=name,
        model_type=top_model_type or family,
        text_model_type=family,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_layers=num_layers,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=_head_dim(text, traits, hidden, heads),
        vocab_size=vocab,
        tie_word_embeddings=tied,
        max_position_embeddings=int(max_pos or UNKNOWN_MAX_POSITIONS),
        sliding_window=window,
        num_sliding_window_layers=num_sliding,
        **_moe_fields(text, num_layers, intermediate),
        **_linear_attention_fields(text, num_layers, traits),
        **_mla_fields(text),
        **layout,
        vision=vision_from_config(config, hidden),
        audio=audio_from_config(config),
        source=source,
        warnings=notes,
    )
