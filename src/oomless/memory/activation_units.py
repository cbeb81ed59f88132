"""Units and widths shared by the activation terms (`activations.py` and its component modules).

Symbols: q = heads·head_dim, kv = kv_heads·head_dim. Pure: no torch.
Source: PyTorch c10/cuda/CUDACachingAllocator.cpp (512-B minimum block); the family
coefficients from `activation_calibration.py`.
"""

from __future__ import annotations

from ..catalog.models import ModelArch
from . import constants as C
from .activation_calibration import FamilyCoefficients, family_coefficients

B = C.BF16_BYTES
F = C.FP32_BYTES
INDEX_BYTES = 8
"""int64 indices (positions, flash's unpad indices, MoE routing)."""
SMALL_TENSOR_BYTES = C.CUDA_MIN_BLOCK_BYTES
"""A scalar or tiny tensor still takes one 512-B block of the caching allocator."""
GRAD_IN_BYTES_PER_ELEMENT = B
"""The gradient of a layer's output (the residual stream), alive through the layer's backward."""


def coefficients(arch: ModelArch) -> FamilyCoefficients:
    """The family's traced coefficients (`activation_calibration.family_coefficients`)."""
    return family_coefficients(arch.text_model_type)


def query_width(arch: ModelArch) -> int:
    """q = heads · head_dim: the width of the query projection's output."""
    return arch.num_attention_heads * arch.head_dim


def kv_width(arch: ModelArch) -> int:
    """kv = kv_heads · head_dim: the width of the key (or value) projection's output."""
    return arch.num_kv_heads * arch.head_dim
