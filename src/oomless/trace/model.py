"""Build a Hugging Face causal LM from its config.json on fake tensors, as the trainer would.

The config comes from the shipped catalog or a local file (`ModelArch.source`); nothing is
downloaded. The model is built on the meta device with
`AutoModelForCausalLM.from_config(..., dtype=bf16)` (no weights), put in training mode, given
LoRA adapters by PEFT when the spec asks, then every tensor is replaced by a fake CPU tensor of
the tracer's `FakeTensorMode` (meta + fake: PEFT cannot move fake parameters). Active dropout
(LoRA's) runs as CUDA's fused kernel (`FusedDropout`: a bool mask, not CPU's float one). Gradient
checkpointing is enabled exactly as TRL/HF Trainer enable it:
`model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})`
(transformers `modeling_utils.PreTrainedModel.gradient_checkpointing_enable`, which checkpoints
every `GradientCheckpointingLayer`, i.e. every decoder layer).

Multimodal configs are traced through their language model: Gemma 3's nested ``text_config``
(`gemma3_text`), and Qwen2.5-VL's text decoder as a Qwen2 decoder of the same dimensions (the
same layer; Qwen2.5-VL's M-RoPE changes only the cos/sin tables), Qwen2-VL's likewise and
Qwen3-VL's ``text_config`` as a Qwen3 decoder. Their vision towers are built apart from
``vision_config`` with transformers' own classes and joined to this decoder's token embeddings
(`trace.vision`); other towers (InternViT, SigLIP, Qwen3.5's) are not traced.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import torch

from ..catalog.models import ModelArch
from ..errors import InputError
from .attention import IMPLEMENTATIONS, register
from .tracker import mark_checkpointed_layers

CATALOG_PREFIX = "catalog:"
TEXT_ONLY_TYPES = {"qwen2_5_vl": "qwen2", "qwen2_vl": "qwen2", "qwen3_vl_text": "qwen3"}
"""VLM families whose language model is traced as this text family (same decoder layer; the
M-RoPE of Qwen2-VL, Qwen2.5-VL and Qwen3-VL changes only the cos/sin tables)."""
VLM_ONLY_KEYS = ("vision_config", "rope_scaling", "rope_parameters", "image_token_id", "video_token_id",
                 "vision_start_token_id", "vision_end_token_id", "vision_token_id")
SUBCONFIG_KEYS = ("text_config", "llm_config")


def raw_config(arch: ModelArch) -> dict[str, Any]:
    """The config.json dict a ``ModelArch`` was read from."""
    src = arch.source
    if src.startswith(CATALOG_PREFIX):
        text = (resources.files("oomless.catalog") / "data" / "models" / src[len(CATALOG_PREFIX):]).read_text("utf-8")
    else:
        text = Path(src).read_text(encoding="utf-8")
    return json.loads(text)


def _strip_annotations(config: dict[str, Any]) -> dict[str, Any]:
    """Drop the catalog's ``_``-prefixed notes (transformers fills its own defaults)."""
    return {k: _strip_annotations(v) if isinstance(v, dict) else v for k, v in config.items() if not k.startswith("_")}


def text_config(config: dict[str, Any]) -> dict[str, Any]:
    """The language model's config as transformers' CausalLM class for it expects."""
    config = _strip_annotations(config)
    for key in SUBCONFIG_KEYS:
        sub = config.get(key)
        if isinstance(sub, dict) and sub.get("model_type"):
            base = {k: v for k, v in config.items() if k not in SUBCONFIG_KEYS and k != "vision_config"}
            return _as_text_family({**base, **sub})
    return _as_text_family(config)


def _as_text_family(config: dict[str, Any]) -> dict[str, Any]:
    model_type = config.get("model_type", "")
    if model_type in TEXT_ONLY_TYPES:
        out = {k: v for k, v in config.items() if k not in VLM_ONLY_KEYS}
        out["model_type"] = TEXT_ONLY_TYPES[model_type]
        out.pop("architectures", None)
        return out
    return config


def hf_config(config: dict[str, Any], attention: str) -> Any:
    from transformers import AutoConfig

    text = dict(text_config(config))
    model_type = text.pop("model_type", None)
    text.pop("architectures", None)
    if not model_type:
        raise InputError("model", "config has no model_type; cannot build it with transformers")
    try:
        hf = AutoConfig.for_model(model_type, **text)
    except (KeyError, ValueError) as err:
        raise InputError("model", f"transformers cannot build model_type {model_type!r}: {err}") from None
    hf._attn_implementation = IMPLEMENTATIONS[attention]
    hf.use_cache = False
    return hf


def _fake_copy(tensor: torch.Tensor, mode: Any) -> torch.Tensor:
    with mode:
        fake = torch.empty(tensor.shape, dtype=tensor.dtype, device="cpu")
    if isinstance(tensor, torch.nn.Parameter):
        return torch.nn.Parameter(fake, requires_grad=tensor.requires_grad)
    return fake


def to_fake(model: torch.nn.Module, mode: Any) -> None:
    """Replace every meta parameter, buffer and tensor attribute by a fake CPU tensor of the
    same shape and dtype, keeping tied tensors tied (one fake per meta tensor)."""
    memo: dict[int, torch.Tensor] = {}

    def convert(t: torch.Tensor) -> torch.Tensor:
        if id(t) not in memo:
            memo[id(t)] = _fake_copy(t, mode)
        return memo[id(t)]

    for module in model.modules():
        for table in (module._parameters, module._buffers):
            for key, t in list(table.items()):
                if t is not None:
                    table[key] = convert(t)
        for key, value in list(vars(module).items()):
            if isinstance(value, torch.Tensor) and value.device.type == "meta":
                setattr(module, key, convert(value))


class FusedDropout(torch.nn.Module):
    """Dropout as CUDA runs it: ATen's `dropout` calls the fused `native_dropout` kernel on CUDA
    (`is_fused_kernel_acceptable`), which keeps a bool mask (1 B/element) for backward; on CPU
    it decomposes into a float mask (4 B/element). Source: aten/src/ATen/native/Dropout.cpp."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0:
            return x
        return torch.ops.aten.native_dropout(x, self.p, True)[0]


def use_fused_dropout(model: torch.nn.Module) -> None:
    """Replace every active `nn.Dropout` (LoRA's) by `FusedDropout`."""
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, torch.nn.Dropout) and child.p > 0:
                setattr(module, name, FusedDropout(child.p))


def add_lora(model: torch.nn.Module, rank: int, alpha: float, dropout: float, targets: list[str] | str) -> torch.nn.Module:
    """PEFT LoRA adapters as TRL/ms-swift add them (`get_peft_model`, fp32 adapters:
    autocast_adapter_dtype=True); the base weights are frozen."""
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        raise InputError("finetune.method", "tracing LoRA needs peft: pip install 'oomless[train]'") from None

    config = LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=dropout, target_modules=targets)
    return get_peft_model(model, config)


def build_model(
    config: dict[str, Any], attention: str, checkpointing: bool, dtype: torch.dtype, mode: Any,
    lora: dict[str, Any] | None = None,
) -> torch.nn.Module:
    """The CausalLM for ``config`` with fake CPU tensors of ``mode``: built on the meta device
    (no weights are initialised), adapters added, then every tensor made fake."""
    from transformers import AutoModelForCausalLM

    register()
    hf = hf_config(config, attention)
    with torch.device("meta"):
        try:
            model = AutoModelForCausalLM.from_config(hf, dtype=dtype, attn_implementation=IMPLEMENTATIONS[attention])
        except ValueError as err:  # e.g. a family transformers does not run with sdpa
            raise InputError("attention", f"transformers cannot build {hf.model_type} with {attention}: "
                             f"{str(err).splitlines()[0]}") from None
        model.train()
        if checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            mark_checkpointed_layers(model)
        if lora is not None:
            model = add_lora(model, **lora)
        use_fused_dropout(model)
    to_fake(model, mode)
    return model
