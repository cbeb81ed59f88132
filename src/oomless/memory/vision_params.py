"""Parameter counts of a ``VisionArch`` tower and its projector: pure functions, integer counts.

Towers are in ``vision_towers`` (one function each); this module adds the projector that
feeds the language model and dispatches on ``VisionArch.model_type``/``projector``. Tensors
are named as their HF (or InternVL remote-code) modules and feed ``params.model_tensors``.

Known limitations: the InternVL remote-code tower is counted from its module code and checked
against its nominal "300M"; the other towers are checked exactly against transformers in
tests/memory/test_params_vs_transformers.py.
"""

from __future__ import annotations

from collections.abc import Callable

from ..catalog.models import ModelArch
from ..catalog.vision import VisionArch
from ..errors import InputError
from .tensors import ParamTensor, num_tensor_parameters
from .vision_towers import (CLASS_TOKENS, clip_tensors, idefics3_vision_tensors,
                            intern_vit_tensors, internvl_vision_tensors, linear, norm,
                            qwen2_5_omni_audio_tensors, qwen2_5_vl_tensors, qwen2_vl_tensors,
                            qwen3_vl_tensors, siglip_tensors)

__all__ = ["CLASS_TOKENS", "num_vision_parameters", "vision_tensors"]

TOWER_TENSORS: dict[str, Callable[[VisionArch], list[ParamTensor]]] = {
    "qwen2_vl": qwen2_vl_tensors,
    "qwen2_5_vl": qwen2_5_vl_tensors,
    "qwen3_vl": qwen3_vl_tensors,
    "intern_vit_6b": intern_vit_tensors,
    "internvl_vision": internvl_vision_tensors,
    "siglip_vision_model": siglip_tensors,
    "clip_vision_model": clip_tensors,
    "idefics3_vision": idefics3_vision_tensors,
}


def _internvl_mlp(prefix: str, names: tuple[str, str, str], v: VisionArch) -> list[ParamTensor]:
    """LayerNorm(m²h) → Linear(m²h, out) → GELU → Linear(out, out), all with bias."""
    h2, out = v.spatial_merge_size ** 2 * v.hidden_size, v.out_hidden_size
    return [*norm(f"{prefix}{names[0]}", h2, "layer_norm"),
            *linear(f"{prefix}{names[1]}", h2, out), *linear(f"{prefix}{names[2]}", out, out)]


def projector_tensors(v: VisionArch) -> list[ParamTensor]:
    """The projector into the language model (Qwen-VL mergers live in the tower).

    internvl_mlp1 (remote code ``mlp1``) and internvl (``multi_modal_projector``):
      LayerNorm(m²h), Linear(m²h→out), Linear(out→out). Source: modeling_internvl_chat.py,
      internvl/modeling_internvl.py (InternVLMultiModalProjector).
    gemma3: ``mm_input_projection_weight`` h·out + RMSNorm(h) ``mm_soft_emb_norm``.
      Source: gemma3/modeling_gemma3.py (Gemma3MultiModalProjector).
    llava: linear_1 (h·F→out), linear_2 (out→out), bias = multimodal_projector_bias, F = the
      number of vision_feature_layer entries. Source: llava/modeling_llava.py.
    idefics3: ``connector.modality_projection.proj`` (h·s²→out, no bias), s = scale_factor.
      Source: idefics3/modeling_idefics3.py (Idefics3Connector, Idefics3SimpleMLP).
    """
    h, out, m2 = v.hidden_size, v.out_hidden_size, v.spatial_merge_size ** 2
    if v.projector == "internvl_mlp1":
        return _internvl_mlp("mlp1.", ("0", "1", "3"), v)
    if v.projector == "internvl":
        return _internvl_mlp("multi_modal_projector.", ("layer_norm", "linear_1", "linear_2"), v)
    if v.projector == "gemma3":
        return [ParamTensor("multi_modal_projector", "mm_input_projection_weight", h * out, 1),
                *norm("multi_modal_projector.mm_soft_emb_norm", h, "rms_norm")]
    if v.projector == "llava":
        return [*linear("multi_modal_projector.linear_1", h * v.num_feature_layers, out,
                        v.projector_bias),
                *linear("multi_modal_projector.linear_2", out, out, v.projector_bias)]
    if v.projector == "idefics3":
        return linear("connector.modality_projection.proj", h * m2, out, bias=False)
    return []


def audio_tensors(arch: ModelArch) -> tuple[ParamTensor, ...]:
    """Parameter tensors of the audio encoder (Qwen2.5-Omni's thinker), () without one.
    Formula and source: ``vision_towers.qwen2_5_omni_audio_tensors``."""
    return () if arch.audio is None else tuple(qwen2_5_omni_audio_tensors(arch.audio))


def vision_tensors(arch: ModelArch) -> tuple[ParamTensor, ...]:
    """Parameter tensors of the encoders that feed the language model: the vision tower and
    its projector, plus the audio encoder where there is one (Qwen2.5-Omni; ms-swift freezes
    both with ``freeze_vit``, its ``vision_tower`` list naming ``audio_tower`` and ``visual``).

    Formulas and sources: the tower functions in ``vision_towers`` and ``projector_tensors``.
    Assumes: N = (image_size/patch)² for fixed-size towers; every tower layer is built
    (LLaVA's vision_feature_layer selects an output, it does not prune layers).
    """
    v = arch.vision
    if v is None:
        return audio_tensors(arch)
    if v.model_type not in TOWER_TENSORS:
        raise InputError("model", f"vision tower {v.model_type!r} of {arch.name!r} is not "
                         f"supported; supported: {', '.join(TOWER_TENSORS)}")
    return tuple(TOWER_TENSORS[v.model_type](v) + projector_tensors(v)) + audio_tensors(arch)


def num_vision_parameters(arch: ModelArch) -> int:
    """Vision tower + projector + audio encoder (0 for text-only models).
    Formula: ``vision_tensors``."""
    return num_tensor_parameters(vision_tensors(arch))
