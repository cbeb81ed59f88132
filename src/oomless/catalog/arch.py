"""``ModelArch``: the dimensions of an HF ``config.json`` that memory depends on, frozen.

The type the memory model and the planner read; ``models.arch_from_config`` builds it from a
config dict (``models`` re-exports it, so callers keep importing it from there). Fields keep
the HF meaning of the key they come from; the layout fields (module names, norms, biases)
are the family's rules from ``families.FAMILIES``. Nothing here imports torch or transformers.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from ..frozen_hash import cached_hash, state_without_hash
from .checkpoint import CheckpointInfo
from .vision import AudioArch, VisionArch


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
    """Four norms per layer (gemma2/3 pre+post, GLM-4 post_self_attn/post_mlp)."""
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
    audio: AudioArch | None = None
    """Audio encoder (Qwen2.5-Omni's thinker); counted with the vision tower."""
    source: str = ""
    checkpoint: CheckpointInfo | None = None
    """What the resolver found beside the config (exact parameter counts, quantization); set
    by ``catalog.resolve``, None for a bare config dict."""
    attention_module: str = "self_attn"
    attention_names: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    """HF module names: (q, k, v, o), or (qkv, o) when fused (Phi-3 ``qkv_proj``,
    GPT-NeoX/ChatGLM ``query_key_value``, InternLM2 ``wqkv``)."""
    mlp_module: str = "mlp"
    mlp_gated: bool = True
    """Gated (SwiGLU/GeGLU: gate, up, down) or a plain 2-layer MLP (up, down)."""
    mlp_names: tuple[str, ...] = ("gate_proj", "up_proj", "down_proj")
    """(gate, up, down), (gate_up, down) when fused (Phi-3, GLM), or (up, down) if plain."""
    norm_type: str = "rms_norm"
    """Decoder norms: ``rms_norm`` (weight), ``layer_norm`` (weight + bias), ``none``."""
    layer_norm_names: tuple[str, ...] = ("input_layernorm", "post_attention_layernorm")
    qk_norm_full_width: bool = False
    """q/k norms over the whole projection (OLMo2: a·d and k·d) instead of one head_dim."""
    lm_head_bias: bool = False
    parallel_residual: bool = False
    """Attention and MLP read the same input (GPT-NeoX, Phi-2)."""
    partial_rotary_factor: float = 1.0
    """Share of head_dim that is rotated (GPT-NeoX 0.25, GLM/Phi-2 0.5); no parameters."""
    num_linear_attention_layers: int = 0
    """Gated DeltaNet layers (Qwen3.5/Qwen3-Next); the other layers use full attention."""
    linear_num_key_heads: int = 0
    linear_num_value_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_conv_kernel_dim: int = 0
    attention_output_gate: bool = False
    """Full-attention q_proj emits a sigmoid gate as wide as the queries (Qwen3.5)."""
    warnings: tuple[str, ...] = ()
    """Assumptions made reading the config (unknown family, defaults taken): one line each,
    for the planner to show next to the plan."""

    def __hash__(self) -> int:
        """The hash of every field, as the dataclass's own, computed once: the memory model's
        per-architecture caches look an arch up many times per plan, and hashing all ~60
        fields (the vision tower's too) each time was about 8 µs."""
        return cached_hash(self, _ARCH_FIELDS)

    def __getstate__(self) -> dict[str, object]:
        return state_without_hash(self)

    @property
    def num_moe_layers(self) -> int:
        return self.num_layers - self.num_dense_layers

    @property
    def uses_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def fused_qkv(self) -> bool:
        return len(self.attention_names) == 2


_ARCH_FIELDS = tuple(f.name for f in fields(ModelArch))
"""The fields a ``ModelArch`` hashes over (all of them, as the dataclass's own hash)."""
