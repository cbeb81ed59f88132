"""Parameter counts of a ``ModelArch``: pure functions, integer counts.

Everything is counted from one inventory of parameter tensors (``model_tensors``), so the
total, the ZeRO-3 largest-module term and the small-tensor (persistence) term agree with each
other. The inventory's types live in ``tensors``, one decoder layer's tensors in
``decoder_params``, the vision tower's in ``vision_params``; all three are re-exported here,
so ``params`` stays the one place callers import parameter counts from.

Symbols: h = hidden_size, V = vocab_size, L = num_layers, E = routed experts,
E_k = experts per token.

Known limitations: buffers are not parameters and are not counted (rotary ``inv_freq``,
DeepSeek-V3's ``e_score_correction_bias`` which transformers registers as a buffer); the
DeepSeek-V3 multi-token-prediction module (``num_nextn_predict_layers``) is not loaded by
transformers and is not counted (nor Qwen3.5's ``mtp_num_hidden_layers``); for hybrid
(Gated DeltaNet) layers see ``decoder_params``, for the vision towers ``vision_params``.
"""

from __future__ import annotations

import functools
from collections import defaultdict

from ..catalog.models import ModelArch
from .decoder_params import (LINEAR_ATTENTION_MODULE, LLAMA_MLP_NAMES, NORM_TENSOR_NAMES,
                             ROUTER_NAME, LayerKind, attention_linear_shapes,
                             decoder_layer_sequence, decoder_layer_tensors, decoder_linear_shapes,
                             dense_mlp_linear_shapes, is_attention_tensor, layer_kinds,
                             linear_attention_tensors, mlp_linear_shapes, norm_tensors,
                             num_decoder_layer_parameters, num_parameters_per_decoder_layer,
                             num_parameters_per_linear_attention_layer)
from .tensors import (LinearShape, ParamTensor, is_expert, linear_tensors,
                      num_tensor_parameters)
from .vision_params import num_vision_parameters, vision_tensors

__all__ = [
    # decoder_params: one decoder layer
    "LINEAR_ATTENTION_MODULE", "LLAMA_MLP_NAMES", "NORM_TENSOR_NAMES", "ROUTER_NAME", "LayerKind",
    "attention_linear_shapes", "decoder_layer_sequence", "decoder_layer_tensors",
    "decoder_linear_shapes", "dense_mlp_linear_shapes", "is_attention_tensor", "layer_kinds",
    "linear_attention_tensors", "mlp_linear_shapes", "norm_tensors",
    "num_decoder_layer_parameters", "num_parameters_per_decoder_layer",
    "num_parameters_per_linear_attention_layer",
    # tensors and vision_params
    "LinearShape", "ParamTensor", "is_expert", "linear_tensors", "num_tensor_parameters",
    "num_vision_parameters", "vision_tensors",
    # this module: the whole model
    "model_tensors", "num_active_parameters", "num_config_parameters",
    "num_embedding_parameters", "num_final_norm_parameters", "num_language_model_parameters",
    "num_largest_module_parameters", "num_lm_head_parameters", "num_parameters",
    "num_parameters_per_expert", "num_small_parameters",
]


def _linear_params(shape: LinearShape) -> int:
    return shape.in_features * shape.out_features + (shape.out_features if shape.bias else 0)


# --- embeddings and totals -----------------------------------------------------------------


def num_embedding_parameters(arch: ModelArch) -> int:
    """Input embedding table ``model.embed_tokens``: V·h.

    Source: llama/modeling_llama.py (nn.Embedding(vocab_size, hidden_size)).
    Assumes: no padding of V beyond the config's vocab_size.
    """
    return arch.vocab_size * arch.hidden_size


def num_lm_head_parameters(arch: ModelArch) -> int:
    """Output projection ``lm_head`` (h→V): V·h (+ V bias for Phi-2), or 0 when tied to the
    embedding (a bias stays).

    Source: llama/modeling_llama.py (LlamaForCausalLM.lm_head, _tied_weights_keys),
    phi/modeling_phi.py (lm_head bias=True).
    Assumes: a tied lm_head shares storage and is counted once, as ``parameters()`` does.
    """
    bias = arch.vocab_size if arch.lm_head_bias else 0
    return bias + (0 if arch.tie_word_embeddings else arch.vocab_size * arch.hidden_size)


def num_final_norm_parameters(arch: ModelArch) -> int:
    """Final norm ``model.norm``: h (RMSNorm), 2h (LayerNorm), 0 (OLMo-1).

    Source: llama/modeling_llama.py (LlamaModel.norm), gpt_neox (final_layer_norm),
    olmo/modeling_olmo.py (parameter-free OlmoLayerNorm).
    """
    return len(NORM_TENSOR_NAMES[arch.norm_type]) * arch.hidden_size


def num_language_model_parameters(arch: ModelArch) -> int:
    """Embedding + decoder layers + final norm + lm_head (no vision tower).

    Source/Assumes: the terms it sums.
    """
    return (num_embedding_parameters(arch) + num_decoder_layer_parameters(arch)
            + num_final_norm_parameters(arch) + num_lm_head_parameters(arch))


@functools.lru_cache(maxsize=None)  # pure on a frozen arch (see decoder_layer_tensors)
def model_tensors(arch: ModelArch) -> tuple[ParamTensor, ...]:
    """The whole model's parameter tensors; ``count`` already multiplied by layers.

    Source/Assumes: ``decoder_layer_tensors``, ``vision_tensors``, the embedding terms.
    """
    h = arch.hidden_size
    out: tuple[ParamTensor, ...] = (
        ParamTensor("model.embed_tokens", "weight", num_embedding_parameters(arch), 1),)
    num_full = arch.num_layers - arch.num_linear_attention_layers
    for kind, n in layer_kinds(arch):
        for t in decoder_layer_tensors(arch, kind):
            # hybrids: attention counted once below for the full-attention layers only
            if arch.num_linear_attention_layers and is_attention_tensor(arch, t):
                continue
            out += (ParamTensor(f"model.layers.{kind}.{t.module}", t.name, t.numel, t.count * n),)
    if arch.num_linear_attention_layers:
        out += tuple(ParamTensor(f"model.layers.full_attention.{t.module}", t.name, t.numel,
                                 t.count * num_full)
                     for t in decoder_layer_tensors(arch, "dense") if is_attention_tensor(arch, t))
        out += tuple(ParamTensor(f"model.layers.linear_attention.{t.module}", t.name, t.numel,
                                 t.count * arch.num_linear_attention_layers)
                     for t in linear_attention_tensors(arch))
    out += norm_tensors("model.norm", h, arch.norm_type)
    if not arch.tie_word_embeddings:
        out += (ParamTensor("lm_head", "weight", arch.vocab_size * h, 1),)
    if arch.lm_head_bias:
        out += (ParamTensor("lm_head", "bias", arch.vocab_size, 1),)
    return out + vision_tensors(arch)


@functools.lru_cache(maxsize=None)  # pure on a frozen arch (see decoder_layer_tensors)
def num_config_parameters(arch: ModelArch) -> int:
    """All parameters derived from config.json: language model + vision tower and projector.

    Source/Assumes: ``num_language_model_parameters``, ``num_vision_parameters``.
    """
    return num_language_model_parameters(arch) + num_vision_parameters(arch)


@functools.lru_cache(maxsize=None)  # pure on a frozen arch (its hash is cached: catalog.arch)
def num_parameters(arch: ModelArch) -> int:
    """All parameters: the checkpoint's exact count when the resolver read its safetensors
    headers (``catalog.resolve``; not for packed quantized storage), else ``num_config_parameters``.
    Per-tensor terms (ZeRO-3 modules, LoRA targets) keep the config's inventory."""
    info = arch.checkpoint
    exact = info.exact_num_parameters if info is not None and info.quantization is None else None
    return exact or num_config_parameters(arch)


def num_parameters_per_expert(arch: ModelArch) -> int:
    """One routed expert of one layer: 3·h·I_moe (+ biases for gpt-oss), 0 for dense models.

    Source/Assumes: ``mlp_linear_shapes``.
    """
    if not arch.num_experts:
        return 0
    return sum(_linear_params(s) for s in mlp_linear_shapes(arch, "moe") if is_expert(s))


def num_active_parameters(arch: ModelArch) -> int:
    """Parameters a token passes through: all, minus the routed experts not among its top-k.

    = num_parameters - L_moe·(E - E_k)·expert. Embedding and lm_head count in full (Qwen's
    convention for "activated" parameters; DeepSeek and OpenAI leave the embedding out).
    Source: Qwen3 technical report (arXiv 2505.09388) table 2; DeepSeek-V3 report
    (arXiv 2412.19437) section 2; gpt-oss model card (arXiv 2508.10925) table 1.
    """
    inactive = arch.num_experts - arch.num_experts_per_tok
    return num_parameters(arch) - arch.num_moe_layers * inactive * num_parameters_per_expert(arch)


@functools.lru_cache(maxsize=None)  # pure on a frozen arch (see decoder_layer_tensors)
def num_largest_module_parameters(arch: ModelArch) -> int:
    """max over modules of ``sum(p.numel() for p in m.parameters(recurse=False))``.

    DeepSpeed ZeRO-3 gathers at most this many params at once beyond the live set
    (``largest_layer_memory = 4·P_max`` in estimate_zero3_model_states_mem_needs).
    Usually the embedding or lm_head; gpt-oss's fused experts block is larger.
    Source: deepspeed/runtime/zero/stage3.py (estimate_zero3_model_states_mem_needs_all_live).
    Assumes: ModuleList experts (transformers 4.5x) except gpt-oss; with transformers 5's
    fused experts use ``dataclasses.replace(arch, experts_fused=True)``.
    """
    per_module: dict[str, int] = defaultdict(int)
    for t in model_tensors(arch):
        per_module[t.module] += t.numel
    return max(per_module.values())


@functools.lru_cache(maxsize=1024)  # pure on a frozen arch and an int; a run has a few thresholds
def num_small_parameters(arch: ModelArch, threshold: int) -> int:
    """Parameters in tensors of at most ``threshold`` elements (norms, biases, ...).

    ZeRO-3 keeps such tensors whole on every rank (``stage3_param_persistence_threshold``,
    default 1e5; HF "auto" = 10·h). DeepSpeed's test is ``numel <= threshold``.
    Source: deepspeed/runtime/zero/parameter_offload.py (_mark_persistent_parameters).
    Assumes: the ``model_persistence_threshold`` cap (default unlimited) is not reached.
    """
    return sum(t.numel * t.count for t in model_tensors(arch) if t.numel <= threshold)
