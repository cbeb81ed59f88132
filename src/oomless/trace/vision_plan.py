"""The images a traced step feeds its vision tower, and the plan's vision terms for the same
images, for comparison. Pure: no torch here.

The trace sees the batch the plan's worst case sees: every sequence of a micro-batch carries
``vision.images_per_prompt`` images with the most tokens the processor's limits allow
(`memory.vision_tokens.max_image_tokens`), i.e. an image the processor keeps at H = a·f,
W = b·f pixels (f = patch × merge = 28 for Qwen2.5-VL), a·b those tokens, as square as
`smart_resize` leaves unchanged. The tower trains, and recomputes its blocks, by the planner's
own rules (`planner.vision_terms.tower_trains`, `tower_checkpointing`): only in full
fine-tuning with ``vision.freeze_tower`` false, tower and merger together.

The plan's terms for the tower: the train phase's ``vision.activations`` (what the tower holds
while the language model trains: its saved activations and the merger's when it trains, at
least its no-grad forward peak) and the log-prob phase's (its no-grad forward peak), with the
`memory.vision` functions they are made of.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..catalog.models import ModelArch
from ..catalog.vision import VisionArch
from ..errors import InputError
from ..memory import vision as VZ
from ..planner import vision_terms as VT
from ..planner.plan import Plan
from ..spec.run import RunSpec

TRACED_TOWERS = frozenset({"qwen2_vl", "qwen2_5_vl", "qwen3_vl"})
"""Models (top-level ``model_type``) whose vision tower the tracer builds (`trace.vision.TOWER_CLASSES`);
others are left out of the trace (Qwen3.5 carries Qwen3-VL's tower on a decoder not traced with it)."""
VISION_COMPONENT = "vision.activations"
"""The plan's component for the tower (`planner/gpu_phases.py`)."""


def tower_traced(arch: ModelArch) -> bool:
    return arch.vision is not None and arch.model_type in TRACED_TOWERS


def resize_limits(spec: RunSpec, arch: ModelArch) -> tuple[int, int]:
    """(min_pixels, max_pixels) of the worst image the plan sizes: the processor's (the spec's,
    else Qwen2.5-VL's defaults), the area capped to what the prompt bound holds when it counts
    the images (`planner.vision_terms.prompt_image_area_cap`, `lengths.max_prompt_counts_images`)."""
    limits = VT.image_limits(spec, arch)
    return limits["min_pixels"], limits["max_pixels"]


def worst_image_grid(v: VisionArch, min_pixels: int, max_pixels: int) -> tuple[int, int, int]:
    """The processor's ``image_grid_thw`` (temporal, height, width in patches) of an image with
    the most tokens the limits allow: the most square a × b grid of ``max_image_tokens`` tokens
    that `smart_resize` returns unchanged. Limits whose worst case is not such a rounded image
    (the sliver and upscale branches of `max_smart_resize_tokens`: max_pixels < 200·f² =
    156,800 px, or min_pixels near max_pixels) fall back to the square image of area
    max_pixels, which has fewer tokens than the plan's worst case (both counts are reported)."""
    f, m = v.patch_size * v.spatial_merge_size, v.spatial_merge_size
    tokens = VZ.max_image_tokens(v, max_pixels=max_pixels, min_pixels=min_pixels)
    for a in range(math.isqrt(tokens), 0, -1):
        if tokens % a:
            continue
        b = tokens // a
        try:
            kept = VZ.smart_resize(a * f, b * f, f, min_pixels, max_pixels) == (a * f, b * f)
        except InputError:  # past the processor's aspect-ratio limit: no squarer grid remains
            break
        if kept:
            return 1, a * m, b * m
    side = math.isqrt(max_pixels)
    h, w = VZ.smart_resize(side, side, f, min_pixels, max_pixels)
    return 1, h // v.patch_size, w // v.patch_size


def vision_setup_fields(spec: RunSpec, arch: ModelArch) -> dict[str, Any]:
    """`TraceSetup`'s image fields for ``spec``: none unless the tower is traced and prompts
    carry images."""
    if not tower_traced(arch) or spec.vision.images_per_prompt == 0:
        return {}
    v = arch.vision
    assert v is not None
    grid = worst_image_grid(v, *resize_limits(spec, arch))
    images = spec.vision.images_per_prompt
    image_tokens = images * (grid[0] * grid[1] * grid[2] // v.spatial_merge_size ** 2)
    fields: dict[str, Any] = {
        "images_per_sequence": images, "image_grid_thw": grid, "image_tokens_per_sequence": image_tokens,
        "vision_trains": VT.tower_trains(spec), "vision_checkpointing": VT.tower_checkpointing(spec, arch),
    }
    if spec.lengths.max_prompt_counts_images:  # the bound holds text and images (`prompt_tokens_with_images`)
        fields["prompt_len"] = max(0, spec.lengths.max_prompt_tokens - image_tokens)
    return fields


@dataclass(frozen=True)
class VisionPrediction:
    """The plan's vision terms on the actor's GPU, and the `memory.vision` parts they are made of."""

    train_bytes: int
    """The train phase's ``vision.activations``."""
    logprob_bytes: int
    """The log-prob phase's ``vision.activations`` (no-grad forward of a log-prob micro-batch)."""
    saved_bytes: int
    """A trained tower's saved activations + the merger's (`vision_training_saved_bytes` +
    `merger_saved_bytes`); 0 for a frozen tower, unless transformers >= 5.0 checkpointing
    hooks it (`VT.frozen_tower_keeps_activations`)."""
    forward_peak_bytes: int
    """No-grad forward peak over the training micro-batch's images (`vision_inference_peak_bytes`)."""
    backward_transient_bytes: int
    """`vision_backward_transient_bytes` of a trained tower (no phase charges it); 0 frozen (same exception)."""
    num_images: int
    num_patches: int
    """Patches per image (the worst case of the limits)."""

    def to_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def _phase_component(plan: Plan, phase_name: str, name: str) -> int:
    group = next(g for g in plan.devices if g.role == "train")
    phase = next((p for p in group.phases if p.name == phase_name), None)
    if phase is None:
        return 0
    return sum(c.num_bytes for c in phase.components if c.name == name)


def predict_vision(plan: Plan) -> VisionPrediction | None:
    """The plan's vision terms, or None when its prompts carry no images."""
    spec, arch = plan.spec, plan.arch
    if not VT.has_images(spec, arch):
        return None
    v = arch.vision
    assert v is not None
    patches = VT.patches_per_image(spec, arch)
    images = plan.shape.train_batch.num_sequences * spec.vision.images_per_prompt
    dense, attention = spec.vision.dense_attention_mask, spec.attention
    trains, checkpointing = VT.tower_trains(spec), VT.tower_checkpointing(spec, arch)
    saved = backward = 0
    if trains or VT.frozen_tower_keeps_activations(spec):
        saved = (VZ.vision_training_saved_bytes(v, patches, images, attention, checkpointing, dense_mask=dense)
                 + VZ.merger_saved_bytes(v, patches, images))
        backward = VZ.vision_backward_transient_bytes(v, patches, images, attention, checkpointing, dense_mask=dense)
    return VisionPrediction(
        train_bytes=_phase_component(plan, "train", VISION_COMPONENT),
        logprob_bytes=_phase_component(plan, "logprob", VISION_COMPONENT),
        saved_bytes=saved,
        forward_peak_bytes=VZ.vision_inference_peak_bytes(v, patches, images, attention, dense_mask=dense),
        backward_transient_bytes=backward, num_images=images, num_patches=patches,
    )
