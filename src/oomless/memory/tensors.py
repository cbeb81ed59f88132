"""The parameter-tensor inventory's vocabulary, shared by ``params`` and ``vision_params``.

A model is counted as a list of ``ParamTensor``s built from ``LinearShape``s (and norms etc.);
summing that one list gives every total, so the terms built on it agree with each other.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LinearShape:
    """One linear map of a decoder layer, named as its HF module under ``self_attn``/``mlp``.

    ``num_per_layer`` is the number of such maps per layer (E for routed experts). The
    weight has in_features x out_features elements, the bias out_features.
    """

    name: str
    in_features: int
    out_features: int
    bias: bool
    num_per_layer: int = 1


@dataclass(frozen=True)
class ParamTensor:
    """``count`` parameter tensors of ``numel`` elements each, owned by ``module``.

    ``module`` is a pattern: ``model.layers.<kind>.`` stands for every layer of that kind and
    ``*`` for every expert/block index. Each module instance owns one of each of its tensors.
    """

    module: str
    name: str
    numel: int
    count: int


def is_expert(shape: LinearShape) -> bool:
    """A routed-expert linear (``experts.*``), one per expert."""
    return shape.name.startswith("experts.")


def linear_tensors(prefix: str, shape: LinearShape, fused: bool) -> tuple[ParamTensor, ...]:
    """The weight (and bias) tensors of ``shape`` under module ``prefix``.

    Routed experts are ``experts.*.<name>`` per expert, or, when ``fused`` (gpt-oss), one 3-D
    ``experts.<name>`` parameter (+ ``<name>_bias``) holding all E experts.
    Source: gpt_oss/modeling_gpt_oss.py (GptOssExperts), qwen3_moe/modeling_qwen3_moe.py.
    """
    weight = shape.in_features * shape.out_features
    if fused and is_expert(shape):
        parent, leaf = shape.name.rsplit(".", 1)
        module, n = f"{prefix}{parent}", shape.num_per_layer
        out = (ParamTensor(module, leaf, n * weight, 1),)
        return out + ((ParamTensor(module, f"{leaf}_bias", n * shape.out_features, 1),)
                      if shape.bias else ())
    name = shape.name.replace("experts.", "experts.*.") if is_expert(shape) else shape.name
    module = f"{prefix}{name}"
    out = (ParamTensor(module, "weight", weight, shape.num_per_layer),)
    return out + ((ParamTensor(module, "bias", shape.out_features, shape.num_per_layer),)
                  if shape.bias else ())


def num_tensor_parameters(tensors: tuple[ParamTensor, ...]) -> int:
    """Σ numel x count over an inventory."""
    return sum(t.numel * t.count for t in tensors)
