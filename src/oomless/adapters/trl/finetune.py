"""TRL's ModelConfig keys of the fine-tuning method (`use_peft`, `load_in_4bit`, LoRA and bitsandbytes
keys) → the spec's `finetune` section, for the GRPO reader and the PPO/RLOO scripts."""

from __future__ import annotations

from typing import Any

from ...catalog.models import ModelArch
from ...errors import InputError

PEFT_DEFAULT_TARGETS = ["q_proj", "v_proj"]
PEFT_DEFAULT_FAMILIES = frozenset({"llama", "qwen2", "qwen3", "mistral", "gemma", "gemma2", "gemma3_text"})
"""peft/utils/constants.py TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING (peft 0.21)."""


def finetune_section(keys: Any, arch: ModelArch) -> dict[str, Any]:
    if keys.bool("load_in_8bit", False):
        raise InputError("load_in_8bit", "an 8-bit base is not planned; allowed: load_in_4bit (QLoRA)")
    four_bit = keys.bool("load_in_4bit", False)
    if not keys.bool("use_peft", False):
        if four_bit:
            raise InputError("load_in_4bit", "a 4-bit base needs use_peft: true")
        for name in ("lora_r", "lora_alpha", "lora_dropout", "lora_target_modules"):
            keys.ignore(name, "no effect: use_peft is false")
        return {"method": "full"}
    if not four_bit:
        for name in ("use_bnb_nested_quant", "bnb_4bit_quant_type"):
            keys.ignore(name, "no effect: load_in_4bit is false")
    keys.get("bnb_4bit_quant_type")  # nf4 or fp4: both 4 bits with the same block constants (bitsandbytes quantize_4bit)
    targets = keys.get("lora_target_modules")
    if isinstance(targets, str):
        targets = [targets]
    if not targets:
        if arch.model_type not in PEFT_DEFAULT_FAMILIES:
            raise InputError("lora_target_modules", f"PEFT has no default targets for {arch.model_type!r}; set them")
        targets = PEFT_DEFAULT_TARGETS
    # TRL's ModelConfig.use_bnb_nested_quant defaults to false (trl/trainer/model_config.py), which
    # `get_quantization_config` passes as bnb_4bit_use_double_quant
    quant = {"double_quant": bool(keys.bool("use_bnb_nested_quant", False))} if four_bit else {}
    return {
        "method": "qlora" if four_bit else "lora",
        **quant,
        "lora_rank": keys.int("lora_r", 16),
        "lora_alpha": keys.float("lora_alpha", 32.0),
        "lora_dropout": keys.float("lora_dropout", 0.05),
        "lora_targets": "all-linear" if "all-linear" in targets else [str(t) for t in targets],
    }
