"""bf16 weight tensors one vLLM tensor-parallel rank allocates, in construction order: the
requests whose caching-allocator segments vLLM's sleep level 1 backs up to pinned host memory
(`pinned.vllm_sleep_backup_bytes`).

Assumes: bf16 weights (no quantisation, no fp8 DeepSeek), vision tower TP-sharded
(``mm_encoder_tp_mode="weights"``, the default); vision embeddings and projectors other than
Qwen2.5-VL's merger treated as replicated; DeepSeek's ``e_score_correction_bias`` and transient
tensors of ``process_weights_after_loading`` ignored.
Source: vllm/model_executor/layers/linear.py, vocab_parallel_embedding.py, fused_moe/layer.py and
the model files named in `vllm_weight_request_sizes`.
"""

from __future__ import annotations

import math

from ..catalog.models import ModelArch
from . import constants as C
from .params import NORM_TENSOR_NAMES, LayerKind, attention_linear_shapes, decoder_layer_sequence
from .vision_params import vision_tensors
from .vllm import kv_heads_per_rank

VLLM_VISION_COLUMN_SUFFIXES = ("attn.qkv", "mlp.gate_proj", "mlp.up_proj", "mlp.fc1",
                               "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                               "merger.mlp.0", "linear_fc1")
"""Vision linears vLLM builds as QKVParallel/(Merged)ColumnParallelLinear: weight and bias split."""
VLLM_VISION_ROW_SUFFIXES = ("attn.proj", "mlp.down_proj", "mlp.fc2", "self_attn.out_proj",
                            "merger.mlp.2", "linear_fc2")
"""Vision linears vLLM builds as RowParallelLinear: weight split, bias whole.
Source (both): vllm/model_executor/models/qwen2_5_vl.py (Qwen2_5_VisionAttention,
Qwen2_5_VisionMLP, Qwen2_5_VisionPatchMerger), qwen3_vl.py (Qwen3_VisionMLP and
Qwen3_VisionPatchMerger linear_fc1 column / linear_fc2 row, for blocks, merger and deepstack
mergers), siglip.py, intern_vit.py."""
VLLM_VISION_FUSED = {"mlp.gate_proj": "mlp.gate_up_proj", "mlp.up_proj": "mlp.gate_up_proj",
                     "self_attn.q_proj": "self_attn.qkv_proj",
                     "self_attn.k_proj": "self_attn.qkv_proj",
                     "self_attn.v_proj": "self_attn.qkv_proj"}
"""HF vision linears vLLM fuses into one tensor (MergedColumnParallelLinear gate_up_proj in
qwen2_5_vl.py, QKVParallelLinear qkv_proj in siglip.py)."""
VLLM_MLA_STYLE = {"q_a_proj": "replicated", "kv_a_proj_with_mqa": "replicated",
                  "q_proj": "column", "q_b_proj": "column", "kv_b_proj": "column", "o_proj": "row"}
"""DeepSeek MLA projections in vLLM (deepseek_v2.py DeepseekV2MLAAttention)."""


def _shard(n: int, tp: int) -> int:
    return math.ceil(n / tp)


def _linear(in_f: int, out_f: int, bias: bool) -> tuple[int, ...]:
    return (in_f * out_f,) + ((out_f,) if bias else ())


def _column(in_f: int, outs: tuple[int, ...], bias: bool, tp: int) -> tuple[int, ...]:
    return _linear(in_f, sum(_shard(o, tp) for o in outs), bias)


def _row(in_f: int, out_f: int, bias: bool, tp: int) -> tuple[int, ...]:
    return _linear(_shard(in_f, tp), out_f, bias)


def _gated(h: int, inter: int, bias: bool, tp: int) -> tuple[int, ...]:
    return _column(h, (inter, inter), bias, tp) + _row(inter, h, bias, tp)


def _norms(arch: ModelArch, width: int, count: int = 1) -> tuple[int, ...]:
    """``count`` replicated norms of ``width``: RMSNorm weight; LayerNorm weight and bias;
    nothing for a parameter-free norm (vLLM olmo.py: LayerNorm without affine)."""
    return (width,) * (len(NORM_TENSOR_NAMES[arch.norm_type]) * count)


def _vllm_attention_numels(arch: ModelArch, tp: int) -> tuple[int, ...]:
    """Full attention: fused ``qkv_proj`` (QKVParallelLinear; Qwen3.5/Qwen3-Next count the
    output gate as a second set of q heads), ``o_proj`` (RowParallelLinear, bias whole), gpt-oss
    sinks, q/k norms of one head (Qwen3, qwen3_next.py) or of the whole projection, replicated
    (OLMo2: olmo2.py q_norm RMSNorm(a·d), k_norm RMSNorm(k·d), applied after an all-gather)."""
    h, a, d = arch.hidden_size, arch.num_attention_heads, arch.head_dim
    if arch.uses_mla:
        out: tuple[int, ...] = ()
        for s in attention_linear_shapes(arch):
            style = VLLM_MLA_STYLE[s.name]
            out += (_linear(s.in_features, s.out_features, s.bias) if style == "replicated" else
                    _column(s.in_features, (s.out_features,), s.bias, tp) if style == "column"
                    else _row(s.in_features, s.out_features, s.bias, tp))
        return out + (arch.kv_lora_rank,) + ((arch.q_lora_rank,) if arch.q_lora_rank else ())
    q_heads = a * (2 if arch.attention_output_gate else 1)
    qkv = _shard(q_heads, tp) * d + 2 * kv_heads_per_rank(arch, tp) * d
    out = _linear(h, qkv, arch.qkv_bias) + _row(a * d, h, arch.o_bias, tp)
    out += (_shard(a, tp),) if arch.attention_sinks else ()
    if not arch.qk_norm:
        return out
    if arch.qk_norm_full_width:
        return out + _norms(arch, a * d) + _norms(arch, arch.num_kv_heads * d)
    return out + _norms(arch, d, 2)


def _vllm_linear_attention_numels(arch: ModelArch, tp: int) -> tuple[int, ...]:
    """A Gated DeltaNet ``linear_attn`` (K = nk·dk, V = nv·dv): conv1d ((2K+V)/tp x kernel),
    ``in_proj_qkv`` (MergedColumnParallel [K, K, V]), ``in_proj_z`` (V), ``in_proj_b`` and
    ``in_proj_a`` (nv each, column-parallel), ``dt_bias`` and ``A_log`` (nv/tp), gated RMSNorm
    (dv, replicated), ``out_proj`` (RowParallel V x h); no biases.
    Source: vllm/model_executor/models/qwen3_5.py (Qwen3_5GatedDeltaNet). Assumes: Qwen3.5's
    layout; Qwen3-Next fuses the same weights as ``in_proj_qkvz`` and ``in_proj_ba``
    (qwen3_next.py), the same bytes in two requests instead of four.
    """
    h, nv = arch.hidden_size, arch.linear_num_value_heads
    key = arch.linear_num_key_heads * arch.linear_key_head_dim
    value = nv * arch.linear_value_head_dim
    return ((_shard(2 * key + value, tp) * arch.linear_conv_kernel_dim,)
            + _column(h, (key, key, value), False, tp) + _column(h, (value,), False, tp)
            + _column(h, (nv,), False, tp) + _column(h, (nv,), False, tp)
            + (_shard(nv, tp), _shard(nv, tp), arch.linear_value_head_dim)
            + _row(value, h, False, tp))


def _vllm_mlp_numels(arch: ModelArch, kind: LayerKind, tp: int) -> tuple[int, ...]:
    """Dense: gated ``gate_up_proj`` + ``down_proj``, or a plain MLP's column-parallel up
    (GPT-NeoX ``dense_h_to_4h``, StarCoder2 ``c_fc``, Phi ``fc1``) and row-parallel down
    (gpt_neox.py GPTNeoXMLP, starcoder2.py, phi.py). MoE: see ``vllm_weight_request_sizes``."""
    h = arch.hidden_size
    if kind == "dense":
        if not arch.mlp_gated:
            i = arch.intermediate_size
            return _column(h, (i,), arch.mlp_bias, tp) + _row(i, h, arch.mlp_bias, tp)
        return _gated(h, arch.intermediate_size, arch.mlp_bias, tp)
    e, i_r, bias = arch.num_experts, _shard(arch.moe_intermediate_size, tp), arch.mlp_bias
    out = _linear(h, e, arch.router_bias)  # router: ReplicatedLinear
    out += (e * 2 * i_r * h,) + ((e * 2 * i_r,) if bias else ())  # FusedMoE w13 (+ bias)
    out += (e * h * i_r,) + ((e * h,) if bias else ())  # FusedMoE w2 (+ bias)
    if arch.num_shared_experts:
        out += _gated(h, arch.moe_intermediate_size * arch.num_shared_experts, False, tp)
    if arch.shared_expert_intermediate_size:
        out += _gated(h, arch.shared_expert_intermediate_size, False, tp) + _linear(h, 1, False)
    return out


def _vllm_layer_numels(arch: ModelArch, kind: LayerKind, linear: bool, tp: int) -> tuple[int, ...]:
    mixer = (_vllm_linear_attention_numels(arch, tp) if linear
             else _vllm_attention_numels(arch, tp))
    return (mixer + _vllm_mlp_numels(arch, kind, tp)
            + _norms(arch, arch.hidden_size, len(arch.layer_norm_names)))


def _vllm_vision_numels(arch: ModelArch, tp: int) -> tuple[int, ...]:
    """Vision tensors per rank in HF order; a ``*`` module group (blocks, Qwen3-VL's deepstack
    mergers) is repeated as many times as it has instances where it first appears."""
    merged: dict[tuple[str, str], int] = {}
    counts: dict[str, int] = {}
    for t in vision_tensors(arch):
        owner, _, leaf = t.module.rpartition(".")
        parent, _, sub = owner.rpartition(".")
        suffix = f"{sub}.{leaf}"  # e.g. mlp.gate_proj
        fused = VLLM_VISION_FUSED.get(suffix)
        module = f"{parent}.{fused}" if fused else t.module
        if t.module.endswith(VLLM_VISION_COLUMN_SUFFIXES):
            numel = _shard(t.numel, tp)
        elif t.module.endswith(VLLM_VISION_ROW_SUFFIXES) and t.name == "weight":
            numel = _shard(t.numel, tp)
        else:
            numel = t.numel
        merged[(module, t.name)] = merged.get((module, t.name), 0) + numel
        if "*" in module:
            counts[module.partition("*")[0]] = t.count
    out: list[int] = []
    for key in merged:
        group = key[0].partition("*")[0]
        if "*" not in key[0]:
            out.append(merged[key])
        elif group in counts:
            members = [merged[k] for k in merged if k[0].startswith(f"{group}*")]
            out += members * counts.pop(group)
    return tuple(out)


def vllm_weight_request_sizes(arch: ModelArch, tensor_parallel_size: int) -> tuple[int, ...]:
    """bf16 bytes of each weight tensor one vLLM TP rank allocates, in construction order.

    Vision tower first (if any); embedding V'/tp·h with V' = V padded to 64; per layer
    (``decoder_layer_sequence``) the mixer: fused ``qkv_proj`` ((a/tp + 2·max(1, k/tp))·d x h,
    + bias; a gated q doubles a), ``o_proj`` (h x a·d/tp, bias whole), q/k norms — or a
    Gated DeltaNet (``_vllm_linear_attention_numels``); the MLP: ``gate_up_proj`` (2·I/tp x h)
    and ``down_proj`` (h x I/tp), a plain MLP's up (I/tp x h, bias split) and down (h x I/tp,
    bias whole), or for MoE the router (h x E) and FusedMoE ``w13`` (E x 2·I/tp x h) / ``w2``
    (E x h x I/tp), shared experts like a dense MLP; the layer's norms (RMSNorm h, LayerNorm
    h + h, OLMo-1 none); final norm; ``lm_head`` like the embedding, untied only, and its
    bias V'/tp (Phi-2).
    Source: vllm/model_executor/layers/linear.py (QKVParallelLinear, MergedColumnParallelLinear,
    RowParallelLinear), vocab_parallel_embedding.py (ParallelLMHead bias), fused_moe/layer.py
    (FusedMoE), models/qwen2.py, qwen3_moe.py, deepseek_v2.py, gpt_oss.py, qwen2_5_vl.py,
    qwen3_vl.py, gpt_neox.py, olmo2.py, qwen3_next.py, qwen3_5.py, phi.py, starcoder2.py.
    Assumes: bf16 weights; TP only (no expert parallelism); ceil where TP does not divide.
    Within a layer the order is mixer, MLP, norms (GPT-NeoX builds its LayerNorms first,
    OLMo2 its q/k norms before ``o_proj``; the order moves small blocks within the shared
    2 MiB segments only). GLM's ``o_proj`` bias, built by vLLM's Llama layer then dropped
    (glm.py), is not counted.
    """
    tp = tensor_parallel_size
    if tp < 1:
        raise ValueError(f"tensor_parallel_size={tp}; expected >= 1")
    h = arch.hidden_size
    padded_vocab = math.ceil(arch.vocab_size / C.VLLM_VOCAB_PADDING_SIZE) * C.VLLM_VOCAB_PADDING_SIZE
    vocab = _shard(padded_vocab, tp) * h
    numels = _vllm_vision_numels(arch, tp) + (vocab,)
    for kind, linear in decoder_layer_sequence(arch):
        numels += _vllm_layer_numels(arch, kind, linear, tp)
    numels += _norms(arch, h) + (() if arch.tie_word_embeddings else (vocab,))
    numels += (_shard(padded_vocab, tp),) if arch.lm_head_bias else ()
    return tuple(x * C.BF16_BYTES for x in numels)
