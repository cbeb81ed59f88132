"""Reading values out of an HF ``config.json`` dict, shared by ``models``, ``families`` and
``vision``: one place that knows the other spellings families use for the same dimension."""

from __future__ import annotations

from typing import Any

FIELD = "model"
"""The spec field that bad config values are reported against."""

KEY_ALIASES: dict[str, tuple[str, ...]] = {
    "hidden_size": ("n_embd", "d_model", "dim"),
    "num_hidden_layers": ("num_layers", "n_layer", "n_layers"),
    "num_attention_heads": ("n_head", "n_heads", "num_heads"),
    "num_key_value_heads": ("num_kv_heads", "n_head_kv", "n_kv_heads"),
    "intermediate_size": ("ffn_hidden_size", "n_inner", "ffn_dim"),
    "vocab_size": ("padded_vocab_size",),
    "max_position_embeddings": ("n_positions", "seq_length", "max_sequence_length", "n_ctx"),
    "head_dim": ("kv_channels",),
    "rms_norm_eps": ("layer_norm_eps", "layer_norm_epsilon", "layernorm_epsilon"),
}
"""Canonical (Llama) key → the spellings other families use, tried in order after it.
Source: gpt2/configuration_gpt2.py (n_embd, n_layer, n_head, n_inner, n_positions),
falcon/configuration_falcon.py (n_head_kv), THUDM chatglm remote configuration_chatglm.py
(num_layers, ffn_hidden_size, padded_vocab_size, kv_channels, seq_length,
layernorm_epsilon), gpt_neox/configuration_gpt_neox.py (layer_norm_eps)."""


def config_key(config: dict[str, Any], key: str) -> str | None:
    """The key under which ``config`` holds ``key`` (itself or an alias), None if absent."""
    for k in (key, *KEY_ALIASES.get(key, ())):
        if config.get(k) is not None:
            return k
    return None


def config_get(config: dict[str, Any], key: str, default: Any = None) -> Any:
    """``config[key]`` or its first present alias; ``default`` when none is set."""
    found = config_key(config, key)
    return default if found is None else config[found]


def config_int(config: dict[str, Any], key: str, default: int = 0) -> int:
    """``config[key]`` as an int, ``default`` when absent or null (no aliases)."""
    value = config.get(key)
    return default if value is None else int(value)
