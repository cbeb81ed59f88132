"""Vision-tower terms of a plan: the spec's image limits turned into tokens and bytes.

Text-only models (no `vision` in their config) and prompts without images contribute zero.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..catalog.models import ModelArch
from ..spec.run import RunSpec

if TYPE_CHECKING:
    from .shape import RunShape


def image_tokens_per_prompt(spec: RunSpec, arch: ModelArch) -> int:
    return 0


def inference_bytes(spec: RunSpec, shape: RunShape, arch: ModelArch, num_sequences: int) -> int:
    return 0


def training_bytes(spec: RunSpec, shape: RunShape, arch: ModelArch, num_sequences: int) -> int:
    return 0


def engine_encoder_bytes(spec: RunSpec, shape: RunShape, arch: ModelArch) -> int:
    return 0
