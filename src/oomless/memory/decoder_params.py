"""One decoder layer's parameter tensors: attention, MLP/MoE, norms, Gated DeltaNet.

The per-layer half of the inventory ``params.model_tensors`` is built from; ``params``
re-exports every name here, so callers keep importing from ``params``. Module and tensor names
follow the HF transformers modules so that LoRA targets (``q_proj``) and Adafactor's factored
states (rows + cols per matrix) can be looked up.

Symbols: h = hidden_size, I = intermediate_size, V = vocab_size, L = num_layers,
a = attention heads, k = kv heads, d = head_dim, E = routed experts, E_k = experts per token.

Known limitations: hybrid models (Qwen3.5: Gated DeltaNet + full attention) are counted
exactly in total; ``decoder_layer_tensors``/``num_parameters_per_decoder_layer`` describe a
full-attention layer and ``num_parameters_per_linear_attention_layer`` a Gated DeltaNet one
(FSDP units use both, ``decoder_layer_sequence``), but LoRA targets see every layer as a
full-attention one (linear_attn layers differ by a few percent).
"""

from __future__ import annotations

import functools
from typing import Literal

from ..catalog.models import ModelArch
from .tensors import LinearShape, ParamTensor, linear_tensors, num_tensor_parameters

LayerKind = Literal["dense", "moe"]

LLAMA_MLP_NAMES = ("gate_proj", "up_proj", "down_proj")
NORM_TENSOR_NAMES = {"rms_norm": ("weight",), "layer_norm": ("weight", "bias"), "none": ()}
"""Parameters of one norm: RMSNorm weight; affine LayerNorm weight + bias; OLMo-1's
parameter-free LayerNorm none (olmo/modeling_olmo.py OlmoLayerNorm)."""

ROUTER_NAME = {False: "gate", True: "router"}
"""The MoE router module: ``mlp.gate`` (Qwen-MoE, DeepSeek, Mixtral); gpt-oss, the only
family with a biased router, calls it ``mlp.router``."""



def layer_kinds(arch: ModelArch) -> tuple[tuple[LayerKind, int], ...]:
    """(kind, number of layers) pairs; DeepSeek-V3: (("dense", 3), ("moe", 58)).

    Source: deepseek_v3/modeling_deepseek_v3.py (first_k_dense_replace),
    qwen3_moe/modeling_qwen3_moe.py (mlp_only_layers, decoder_sparse_step).
    """
    pairs: tuple[tuple[LayerKind, int], ...] = (
        ("dense", arch.num_dense_layers), ("moe", arch.num_moe_layers))
    return tuple((kind, n) for kind, n in pairs if n > 0)


def attention_linear_shapes(arch: ModelArch) -> tuple[LinearShape, ...]:
    """The attention projections of one layer (module ``self_attn``).

    Source: llama/modeling_llama.py (q/k/v/o, bias = attention_bias), qwen2/modeling_qwen2.py
    (q/k/v bias, o without), deepseek_v3/modeling_deepseek_v3.py and deepseek_v2 (MLA: q_a/q_b
    or q_proj, kv_a_proj_with_mqa, kv_b_proj; only q_a/kv_a/o take attention_bias); fused
    q/k/v as one linear h→(a+2k)·d: phi3/modeling_phi3.py (qkv_proj), gpt_neox (query_key_value,
    k = a), InternLM2 remote code (wqkv), ChatGLM remote code (query_key_value). Names per
    family: ``catalog.families``.
    Assumes: q width a·d, k/v width k·d; MLA q head = qk_nope + qk_rope.
    """
    h, a = arch.hidden_size, arch.num_attention_heads
    if arch.uses_mla:
        q_head = arch.qk_nope_head_dim + arch.qk_rope_head_dim
        bias = arch.o_bias
        if arch.q_lora_rank:
            q: tuple[LinearShape, ...] = (
                LinearShape("q_a_proj", h, arch.q_lora_rank, bias),
                LinearShape("q_b_proj", arch.q_lora_rank, a * q_head, False),
            )
        else:
            q = (LinearShape("q_proj", h, a * q_head, False),)
        kv_b_out = a * (arch.qk_nope_head_dim + arch.v_head_dim)
        return (
            *q,
            LinearShape("kv_a_proj_with_mqa", h, arch.kv_lora_rank + arch.qk_rope_head_dim, bias),
            LinearShape("kv_b_proj", arch.kv_lora_rank, kv_b_out, False),
            LinearShape("o_proj", a * arch.v_head_dim, h, bias),
        )
    q_width, kv_width = a * arch.head_dim, arch.num_kv_heads * arch.head_dim
    if arch.attention_output_gate:  # Qwen3.5: q_proj emits queries and their gate
        q_name, k_name, v_name, o_name = arch.attention_names
        return (LinearShape(q_name, h, 2 * q_width, arch.qkv_bias),
                LinearShape(k_name, h, kv_width, arch.qkv_bias),
                LinearShape(v_name, h, kv_width, arch.qkv_bias),
                LinearShape(o_name, q_width, h, arch.o_bias))
    if arch.fused_qkv:  # Phi-3 qkv_proj, GPT-NeoX/ChatGLM query_key_value, InternLM2 wqkv
        qkv_name, o_name = arch.attention_names
        return (LinearShape(qkv_name, h, q_width + 2 * kv_width, arch.qkv_bias),
                LinearShape(o_name, q_width, h, arch.o_bias))
    q_name, k_name, v_name, o_name = arch.attention_names
    return (
        LinearShape(q_name, h, q_width, arch.qkv_bias),
        LinearShape(k_name, h, kv_width, arch.qkv_bias),
        LinearShape(v_name, h, kv_width, arch.qkv_bias),
        LinearShape(o_name, q_width, h, arch.o_bias),
    )


def _gated_mlp(prefix: str, h: int, inter: int, bias: bool, n: int = 1,
               names: tuple[str, ...] = LLAMA_MLP_NAMES) -> tuple[LinearShape, ...]:
    if len(names) == 2:  # fused gate/up: Phi-3/GLM gate_up_proj, ChatGLM dense_h_to_4h
        return (LinearShape(f"{prefix}{names[0]}", h, 2 * inter, bias, n),
                LinearShape(f"{prefix}{names[1]}", inter, h, bias, n))
    gate, up, down = names
    return (
        LinearShape(f"{prefix}{gate}", h, inter, bias, n),
        LinearShape(f"{prefix}{up}", h, inter, bias, n),
        LinearShape(f"{prefix}{down}", inter, h, bias, n),
    )


def dense_mlp_linear_shapes(arch: ModelArch) -> tuple[LinearShape, ...]:
    """The dense feed-forward: gated h→I (x2, or one fused h→2I), I→h; or plain h→I, I→h.

    Source: llama/modeling_llama.py (gate/up/down), phi3/modeling_phi3.py and glm (fused
    gate_up_proj), gpt_neox/modeling_gpt_neox.py (dense_h_to_4h/dense_4h_to_h),
    phi/modeling_phi.py (fc1/fc2), starcoder2 (c_fc/c_proj), InternLM2 (w1/w3/w2).
    """
    h, inter = arch.hidden_size, arch.intermediate_size
    if not arch.mlp_gated:
        up, down = arch.mlp_names
        return (LinearShape(up, h, inter, arch.mlp_bias),
                LinearShape(down, inter, h, arch.mlp_bias))
    return _gated_mlp("", h, inter, arch.mlp_bias, names=arch.mlp_names)


def mlp_linear_shapes(arch: ModelArch, layer_kind: LayerKind) -> tuple[LinearShape, ...]:
    """The feed-forward projections of one layer (module ``mlp``).

    Dense: ``dense_mlp_linear_shapes``. MoE: router ``gate`` (h→E), routed experts
    ``experts.*`` (h→I_moe, xE), shared experts as one MLP of width I_moe·n_shared
    (DeepSeek ``shared_experts``) or of ``shared_expert_intermediate_size`` plus a 1-wide
    ``shared_expert_gate`` (Qwen2-MoE). gpt-oss: ``router`` with bias and fused
    ``experts.gate_up_proj`` (h→2I) / ``experts.down_proj``, all with bias.
    Source: qwen3_moe/modeling_qwen3_moe.py, qwen2_moe/modeling_qwen2_moe.py,
    deepseek_v3/modeling_deepseek_v3.py, deepseek_v2, mixtral, olmoe, gpt_oss/modeling_gpt_oss.py.
    Assumes: experts named gate/up/down_proj whatever the family (Mixtral 4.x: w1/w3/w2).
    """
    h = arch.hidden_size
    if layer_kind == "dense":
        return dense_mlp_linear_shapes(arch)
    e, moe_i = arch.num_experts, arch.moe_intermediate_size
    shapes: tuple[LinearShape, ...] = (
        LinearShape(ROUTER_NAME[arch.router_bias], h, e, arch.router_bias),)
    if arch.experts_fused:
        shapes += (LinearShape("experts.gate_up_proj", h, 2 * moe_i, arch.mlp_bias, e),
                   LinearShape("experts.down_proj", moe_i, h, arch.mlp_bias, e))
    else:
        shapes += _gated_mlp("experts.", h, moe_i, arch.mlp_bias, e)
    if arch.num_shared_experts:
        shapes += _gated_mlp("shared_experts.", h, moe_i * arch.num_shared_experts, False)
    if arch.shared_expert_intermediate_size:
        shapes += _gated_mlp("shared_expert.", h, arch.shared_expert_intermediate_size, False)
        shapes += (LinearShape("shared_expert_gate", h, 1, False),)
    return shapes


def decoder_linear_shapes(
    arch: ModelArch, layer_kind: LayerKind | None = None
) -> tuple[LinearShape, ...]:
    """Attention + MLP linears of one decoder layer of ``layer_kind``; by default the kind
    most layers have (``moe`` for MoE models, whose few dense layers need ``"dense"``).

    Feeds LoRA (rank·(in+out) per targeted linear) and Adafactor (rows + cols per matrix).
    Source/Assumes: see ``attention_linear_shapes`` and ``mlp_linear_shapes``.
    """
    kind = layer_kind or ("moe" if arch.num_moe_layers > arch.num_dense_layers else "dense")
    return attention_linear_shapes(arch) + mlp_linear_shapes(arch, kind)


def norm_tensors(module: str, width: int, norm_type: str) -> tuple[ParamTensor, ...]:
    """The parameters of one norm of ``width`` under ``module`` (``NORM_TENSOR_NAMES``)."""
    return tuple(ParamTensor(module, n, width, 1) for n in NORM_TENSOR_NAMES[norm_type])


@functools.lru_cache(maxsize=None)  # pure on a frozen arch; each plan asks many times, fit plans hundreds
def decoder_layer_tensors(arch: ModelArch, layer_kind: LayerKind) -> tuple[ParamTensor, ...]:
    """Every parameter tensor of one decoder layer: linears, norms, q/k norms, sinks.

    Norms: ``layer_norm_names`` of width h (2 per layer; 4 for Gemma2/3 and GLM-4; 1 for
    Phi-2), RMSNorm (weight), LayerNorm (weight + bias: GPT-NeoX, Phi-2, StarCoder2) or none
    (OLMo-1); q_norm/k_norm of width d (Qwen3, gemma3, Phi-2 qk_layernorm) or of the whole
    projection a·d and k·d (OLMo2, OLMoE); MLA q_a_layernorm(q_lora_rank),
    kv_a_layernorm(kv_lora_rank); gpt-oss ``self_attn.sinks`` (a). Source: the modeling files
    named in ``attention_linear_shapes``, ``mlp_linear_shapes`` and ``catalog.families``.
    """
    attn, mlp = f"{arch.attention_module}.", f"{arch.mlp_module}."
    out: tuple[ParamTensor, ...] = ()
    for shape in attention_linear_shapes(arch):
        out += linear_tensors(attn, shape, arch.experts_fused)
    for shape in mlp_linear_shapes(arch, layer_kind):
        out += linear_tensors(mlp, shape, arch.experts_fused)
    for norm in arch.layer_norm_names:
        out += norm_tensors(norm, arch.hidden_size, arch.norm_type)
    if arch.qk_norm:
        d = arch.head_dim
        q_width, k_width = ((arch.num_attention_heads * d, arch.num_kv_heads * d)
                            if arch.qk_norm_full_width else (d, d))
        out += norm_tensors(f"{attn}q_norm", q_width, arch.norm_type)
        out += norm_tensors(f"{attn}k_norm", k_width, arch.norm_type)
    if arch.uses_mla:
        out += (ParamTensor(f"{attn}kv_a_layernorm", "weight", arch.kv_lora_rank, 1),)
        if arch.q_lora_rank:
            out += (ParamTensor(f"{attn}q_a_layernorm", "weight", arch.q_lora_rank, 1),)
    if arch.attention_sinks:
        out += (ParamTensor(attn.rstrip("."), "sinks", arch.num_attention_heads, 1),)
    return out


LINEAR_ATTENTION_MODULE = "linear_attn"


def linear_attention_tensors(arch: ModelArch) -> tuple[ParamTensor, ...]:
    """One Gated DeltaNet block ``linear_attn`` (0 for models without one).

    K = nk·dk, Vw = nv·dv: in_proj_qkv h→(2K + Vw), in_proj_z h→Vw, in_proj_b and in_proj_a
    h→nv, depthwise conv1d (2K + Vw)·kernel (no bias), dt_bias and A_log (nv each), gated
    RMSNorm(dv), out_proj Vw→h; no biases. Source: qwen3_5/modeling_qwen3_5.py
    (Qwen3_5GatedDeltaNet); Qwen3-Next fuses the same weights as in_proj_qkvz/in_proj_ba.
    """
    if not arch.num_linear_attention_layers:
        return ()
    h, nv = arch.hidden_size, arch.linear_num_value_heads
    key = arch.linear_num_key_heads * arch.linear_key_head_dim
    value = nv * arch.linear_value_head_dim
    m = f"{LINEAR_ATTENTION_MODULE}."
    shapes = (LinearShape("in_proj_qkv", h, 2 * key + value, False),
              LinearShape("in_proj_z", h, value, False),
              LinearShape("in_proj_b", h, nv, False), LinearShape("in_proj_a", h, nv, False),
              LinearShape("out_proj", value, h, False))
    out = tuple(t for s in shapes for t in linear_tensors(m, s, False))
    return out + (
        ParamTensor(f"{m}conv1d", "weight", (2 * key + value) * arch.linear_conv_kernel_dim, 1),
        ParamTensor(LINEAR_ATTENTION_MODULE, "dt_bias", nv, 1),
        ParamTensor(LINEAR_ATTENTION_MODULE, "A_log", nv, 1),
        ParamTensor(f"{m}norm", "weight", arch.linear_value_head_dim, 1),
    )


def is_attention_tensor(arch: ModelArch, t: ParamTensor) -> bool:
    """Whether ``t`` (named within one layer) belongs to the attention module."""
    return t.module == arch.attention_module or t.module.startswith(f"{arch.attention_module}.")


@functools.lru_cache(maxsize=None)  # pure on a frozen arch (its hash is cached: catalog.arch)
def num_parameters_per_decoder_layer(arch: ModelArch, layer_kind: LayerKind) -> int:
    """All parameters of one decoder layer of ``layer_kind`` (an FSDP wrap unit).

    Source/Assumes: ``decoder_layer_tensors``.
    """
    return num_tensor_parameters(decoder_layer_tensors(arch, layer_kind))


@functools.lru_cache(maxsize=None)  # pure on a frozen arch (its hash is cached: catalog.arch)
def num_decoder_layer_parameters(arch: ModelArch) -> int:
    """All decoder layers together: Σ over layer kinds of layers x per-layer parameters.

    Dense Llama-style layer: h·(a·d) + 2·h·(k·d) + (a·d)·h [+ biases] + 3·h·I + 2·h.
    Source/Assumes: ``decoder_layer_tensors``.
    """
    full = sum(n * num_parameters_per_decoder_layer(arch, kind) for kind, n in layer_kinds(arch))
    return full + arch.num_linear_attention_layers * _linear_minus_full_attention(arch)


def num_parameters_per_linear_attention_layer(arch: ModelArch, layer_kind: LayerKind) -> int:
    """One Gated DeltaNet layer of ``layer_kind``: the full-attention layer with its attention
    replaced by ``linear_attention_tensors`` (an FSDP wrap unit of a hybrid).

    Source/Assumes: ``decoder_layer_tensors``, ``linear_attention_tensors``.
    """
    return num_parameters_per_decoder_layer(arch, layer_kind) + _linear_minus_full_attention(arch)


@functools.lru_cache(maxsize=None)  # pure on a frozen arch (its hash is cached: catalog.arch)
def decoder_layer_sequence(arch: ModelArch) -> tuple[tuple[LayerKind, bool], ...]:
    """Per decoder layer, in model order: (MLP kind, whether it is a Gated DeltaNet layer).

    Kinds: the dense layers first (``layer_kinds``). Hybrids: every ``interval``-th layer is
    full attention, interval = L / (full-attention layers), as Qwen3.5/Qwen3-Next's
    ``layer_types`` (``full_attention_interval`` = 4) lay them out.
    Source: qwen3_5/configuration_qwen3_5.py (layer_types default); ``layer_kinds``.
    Assumes: full-attention layers evenly spaced (when L is not a multiple of their number,
    the last layers are the full-attention ones); only the order of the layers depends on it.
    """
    kinds = [kind for kind, n in layer_kinds(arch) for _ in range(n)]
    num_full = arch.num_layers - arch.num_linear_attention_layers
    if not arch.num_linear_attention_layers:
        return tuple((kind, False) for kind in kinds)
    if num_full and arch.num_layers % num_full == 0:
        interval = arch.num_layers // num_full
        linear = [(i + 1) % interval != 0 for i in range(arch.num_layers)]
    else:
        linear = [i < arch.num_linear_attention_layers for i in range(arch.num_layers)]
    return tuple(zip(kinds, linear))


@functools.lru_cache(maxsize=None)  # pure on a frozen arch (its hash is cached: catalog.arch)
def _linear_minus_full_attention(arch: ModelArch) -> int:
    """Parameters a Gated DeltaNet layer has beyond a full-attention one (may be negative)."""
    full = sum(t.numel * t.count for t in decoder_layer_tensors(arch, "dense")
               if is_attention_tensor(arch, t))
    return num_tensor_parameters(linear_attention_tensors(arch)) - full
