"""What a checkpoint says beyond its architecture: exact parameter counts, stored quantization.

Pure functions over the dicts and bytes the resolver reads (``catalog.resolve``): the
safetensors header (``parameter_counts_from_header``) and ``quantization_config``
(``quantization_from_config``). No I/O, no torch.

Known limitations: a quantized checkpoint's linears are sized by their stored bits plus the
per-group scales and zero points of the format; embeddings, norms and the LM head are kept in
bf16 (the formats below leave them unquantized by default).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

SAFETENSORS_HEADER_LENGTH_BYTES = 8
"""A safetensors file opens with the header's length as a little-endian u64, then the JSON
header. Source: huggingface/safetensors README, "Format"."""
SAFETENSORS_METADATA_KEY = "__metadata__"
MAX_SAFETENSORS_HEADER_BYTES = 100_000_000
"""safetensors itself refuses headers above 100 MB (safetensors/src/tensor.rs, MAX_HEADER_SIZE)."""

FP16_SCALE_BITS = 16
INT32_BITS = 32


@dataclass(frozen=True)
class Quantization:
    """A pre-quantized checkpoint's stored format (``quantization_config`` in config.json)."""

    method: str
    """bitsandbytes | gptq | awq | fp8 | compressed-tensors | ... as the config names it."""
    bits: int
    """Bits per stored weight of a quantized linear."""
    group_size: int = 0
    """Weights sharing one scale (GPTQ/AWQ ``group_size``); 0 = per output channel / tensor."""
    double_quant: bool = False

    @property
    def bits_per_weight(self) -> float:
        """Stored bits per quantized weight, quantization constants included.

        Source: GPTQ/AWQ packed layout (AutoGPTQ ``QuantLinear``: qweight int32 packs
        32/bits weights, scales fp16 [in/group, out], qzeros int32 packing 32/bits zero points
        [in/group, out]) → bits + (16 + bits) / group; bitsandbytes 4-bit: one fp32 absmax per
        64 weights, or with double quantization an 8-bit absmax per 64 plus fp32 per 256 blocks
        (QLoRA paper §2, bitsandbytes ``Params4bit`` blocksize 64); 8-bit LLM.int8: one fp32
        scale per row, negligible; fp8: one fp32 scale per tensor or channel, negligible.
        """
        if self.method == "bitsandbytes" and self.bits == 4:
            blocksize = 64
            constants = 8 / blocksize + 32 / (blocksize * 256) if self.double_quant else 32 / blocksize
            return self.bits + constants
        if self.group_size > 0:
            return self.bits + (FP16_SCALE_BITS + self.bits) / self.group_size
        return float(self.bits)

    def describe(self) -> str:
        group = f", group {self.group_size}" if self.group_size > 0 else ""
        return f"{self.method} {self.bits}-bit{group}"


@dataclass(frozen=True)
class CheckpointInfo:
    """Where a model's config was found and what came with it."""

    where: str
    """``local:PATH``, ``hf-cache:ID@REV``, ``hub:ID@REV`` or ``catalog:FILE``."""
    parameter_counts: tuple[tuple[str, int], ...] = ()
    """Exact parameter count per stored dtype (safetensors headers), when read; () otherwise."""
    parameter_count_source: str = ""
    quantization: Quantization | None = None
    adapter_of: str = ""
    """Set when the reference named a PEFT adapter folder: the adapter's path (the
    architecture is its ``base_model_name_or_path``)."""
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def exact_num_parameters(self) -> int | None:
        return sum(n for _, n in self.parameter_counts) if self.parameter_counts else None


def _shape_numel(shape: Any) -> int:
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise ValueError(f"bad tensor shape {shape!r}")
    return math.prod(shape)


DECODER_LAYER_INDEX = re.compile(r"(?:^|\.)layers\.(\d+)\.")
"""A language-model decoder layer's index in a tensor name (``model.layers.61.mlp...``)."""


def is_beyond_decoder(name: str, num_layers: int | None) -> bool:
    """A tensor of a decoder layer past ``num_hidden_layers``: DeepSeek-V3's multi-token-
    prediction layer 61 ships in the checkpoint (``num_nextn_predict_layers``) but transformers
    does not build it. Source: transformers/models/deepseek_v3/modeling_deepseek_v3.py
    (``_keys_to_ignore_on_load_unexpected``: ``model.layers.61.*``). Vision towers keep
    their own numbering and are never skipped."""
    if num_layers is None or "vision" in name or "visual" in name:
        return False
    match = DECODER_LAYER_INDEX.search(name)
    return match is not None and int(match.group(1)) >= num_layers


def parameter_counts_from_header(header: dict[str, Any], num_layers: int | None = None) -> dict[str, int]:
    """Parameters per dtype in one safetensors header (``{name: {dtype, shape, ...}}``),
    without tensors of decoder layers past ``num_layers`` (``is_beyond_decoder``)."""
    if not isinstance(header, dict):
        raise ValueError(f"a safetensors header is a JSON object, not {type(header).__name__}")
    counts: dict[str, int] = {}
    for name, entry in header.items():
        if name == SAFETENSORS_METADATA_KEY or is_beyond_decoder(name, num_layers):
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("dtype"), str):
            raise ValueError(f"tensor {name!r} has no dtype")
        counts[entry["dtype"]] = counts.get(entry["dtype"], 0) + _shape_numel(entry.get("shape"))
    return counts


def merge_counts(parts: list[dict[str, int]]) -> tuple[tuple[str, int], ...]:
    total: dict[str, int] = {}
    for part in parts:
        for dtype, n in part.items():
            total[dtype] = total.get(dtype, 0) + n
    return tuple(sorted(total.items()))


def _int(value: Any, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except (TypeError, ValueError):
        return default


def _compressed_tensors_bits(qc: dict[str, Any]) -> int:
    groups = qc.get("config_groups") or {}
    for group in groups.values() if isinstance(groups, dict) else ():
        weights = group.get("weights") if isinstance(group, dict) else None
        if isinstance(weights, dict) and weights.get("num_bits"):
            return _int(weights["num_bits"], 8)
    return 8


def quantization_from_config(config: dict[str, Any]) -> Quantization | None:
    """The stored format from ``quantization_config`` (top level or the text sub-config).

    Source: transformers/utils/quantization_config.py (BitsAndBytesConfig load_in_4bit/8bit,
    bnb_4bit_use_double_quant; GPTQConfig bits/group_size; AwqConfig bits/group_size, AWQ's own
    w_bit/q_group_size; FbgemmFp8Config/FineGrainedFP8Config; compressed-tensors config_groups).
    Unknown methods with a ``bits`` key are read by it; without one, None (planned as bf16).
    """
    qc = config.get("quantization_config")
    if not isinstance(qc, dict):
        text = config.get("text_config")
        qc = text.get("quantization_config") if isinstance(text, dict) else None
    if not isinstance(qc, dict):
        return None
    method = str(qc.get("quant_method", "")).lower()
    if method == "bitsandbytes" or "load_in_4bit" in qc or "load_in_8bit" in qc:
        if qc.get("load_in_4bit"):
            return Quantization("bitsandbytes", 4, double_quant=bool(qc.get("bnb_4bit_use_double_quant")))
        if qc.get("load_in_8bit"):
            return Quantization("bitsandbytes", 8)
        return None
    if method in ("gptq", "awq", "autoround", "auto-round"):
        bits = _int(qc.get("bits", qc.get("w_bit")), 4)
        group = _int(qc.get("group_size", qc.get("q_group_size")), 128)
        return Quantization(method, bits, max(group, 0))
    if "fp8" in method:
        return Quantization(method, 8)
    if method == "compressed-tensors":
        return Quantization(method, _compressed_tensors_bits(qc))
    if "bits" in qc:
        return Quantization(method or "unknown", _int(qc["bits"], 16), max(_int(qc.get("group_size"), 0), 0))
    return None
