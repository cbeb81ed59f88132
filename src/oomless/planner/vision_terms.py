"""Vision-tower terms of a plan: the spec's image limits turned into tokens and bytes.

Images in the training and log-prob batches have the area and count of the planned batch
(`RunShape.lengths`): the worst case the declared limits allow (`vision.max_pixels`,
`vision.max_tiles`) unless a typical batch is planned; vLLM's profile always uses the limits. Text-only models (no `vision` in their config) and prompts without images contribute
zero. The tower trains only in full fine-tuning with `vision.freeze_tower` false; otherwise it
runs without saving activations (nothing in it needs gradients) and its no-grad peak counts,
except on transformers >= 5.0 with gradient checkpointing (`frozen_tower_keeps_activations`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..catalog.models import ModelArch
from ..memory import constants as C
from ..memory import vision as VZ
from ..spec.releases import in_releases
from ..spec.run import AttentionImpl, RunSpec

if TYPE_CHECKING:
    from .shape import RunShape


def _limits(spec: RunSpec, pixels: int | None = None, arch: ModelArch | None = None) -> dict[str, int]:
    """The processor's resize limits; ``pixels`` (an image area within them) replaces
    max_pixels to size an image of that area instead of the largest allowed. With ``arch``
    the area is also capped to the data's largest image (`vision.data_max_pixels`) and, with
    `lengths.max_prompt_counts_images`, to what the prompt bound holds (`prompt_image_area_cap`);
    vLLM's profile passes no ``arch``: it sizes images by the processor's limits alone."""
    v = spec.vision
    largest = v.max_pixels or C.QWEN_VL_MAX_PIXELS
    smallest = v.min_pixels or C.QWEN_VL_MIN_PIXELS
    area = min(pixels, largest) if pixels is not None else largest
    if arch is not None and v.data_max_pixels is not None:  # the data's own filter (training side only)
        area = max(smallest, min(area, v.data_max_pixels))
    cap = prompt_image_area_cap(spec, arch) if arch is not None else None
    if cap is not None:
        area = max(smallest, min(area, cap))
    return {"max_pixels": area, "min_pixels": smallest, "max_tiles": v.max_tiles}


def prompt_token_cap(spec: RunSpec) -> int | None:
    """LLM tokens one image may take when the prompt bound counts them: the bound less one
    text token, shared by the prompt's images; None when images come on top of the bound."""
    images = spec.vision.images_per_prompt
    if not spec.lengths.max_prompt_counts_images or images == 0:
        return None
    return max(1, (spec.lengths.max_prompt_tokens - 1) // images)


def prompt_image_area_cap(spec: RunSpec, arch: ModelArch) -> int | None:
    """The largest image area whose tokens fit `prompt_token_cap` for towers that size tokens
    by area (Qwen2/2.5-VL: one LLM token per (patch × merge)² pixels, the processor's resize
    factor); None for tile and fixed-size towers, whose tokens are capped directly.
    Source: verl `RLHFDataset` (filter_overlong_prompts on the processor's input_ids), EasyR1
    `RLHFDataset` (the same; early 2025: truncation 'error')."""
    cap = prompt_token_cap(spec)
    v = arch.vision
    if cap is None or v is None or v.spatial_merge_size < 2:
        return None
    return cap * (v.patch_size * v.spatial_merge_size) ** 2


def has_images(spec: RunSpec, arch: ModelArch) -> bool:
    return arch.vision is not None and spec.vision.images_per_prompt > 0


def image_tokens_per_prompt(spec: RunSpec, arch: ModelArch) -> int:
    """LLM tokens the images of one prompt add, worst case."""
    return image_tokens(spec, arch, None, spec.vision.images_per_prompt)


def image_tokens(spec: RunSpec, arch: ModelArch, pixels: int | None, images_per_prompt: int) -> int:
    """LLM tokens of ``images_per_prompt`` images of ``pixels`` area (None: max_pixels)."""
    if not has_images(spec, arch):
        return 0
    per_image = VZ.max_image_tokens(arch.vision, **image_limits(spec, arch, pixels))
    cap = prompt_token_cap(spec)
    return images_per_prompt * (min(per_image, cap) if cap is not None else per_image)


def prompt_tokens_with_images(spec: RunSpec, text_or_bound: int, image_tokens: int) -> int:
    """A prompt's tokens: the bound itself when it counts the images (they fit inside it),
    else the text plus the images."""
    return text_or_bound if spec.lengths.max_prompt_counts_images else text_or_bound + image_tokens


def patches_per_image(spec: RunSpec, arch: ModelArch, pixels: int | None = None) -> int:
    """Tower patches of the worst image of ``pixels`` area (None: the limits) the prompt can hold."""
    return VZ.max_image_patches(arch.vision, **image_limits(spec, arch, pixels))


def image_limits(spec: RunSpec, arch: ModelArch, pixels: int | None = None) -> dict[str, int]:
    """The resize limits the training side sizes images by (`_limits` with the prompt-bound cap)."""
    return _limits(spec, pixels, arch)


def tower_trains(spec: RunSpec) -> bool:
    return spec.tower_trains


CHECKPOINTING_HOOKS_TOWER = ">=5.0.0.dev0"
"""transformers releases whose gradient checkpointing makes every sub-model's input embedding
require grad, the vision tower's `patch_embed` included.
Source: transformers v5.0.0 modeling_utils.py `gradient_checkpointing_enable`
(`needs_embedding_grads = self.main_input_name == "input_ids"` → `enable_input_require_grads`,
which hooks `get_input_embeddings()` of every PreTrainedModel sub-module) and
qwen2_5_vl/modeling_qwen2_5_vl.py (`_input_embed_layer = "patch_embed"` on the vision model);
v4.57.1 calls `enable_input_require_grads` only for PEFT models, on the top model's embedding."""


def frozen_tower_keeps_activations(spec: RunSpec) -> bool:
    """A tower that does not train still records its forward for backward: gradient
    checkpointing on transformers >= 5.0 (`CHECKPOINTING_HOOKS_TOWER`) makes its patch
    embedding's output require grad, so every block (checkpointed as the LLM's are) keeps its
    input and the merger its activations, and backward runs through the tower. False when the
    version is unknown (planned as before 5.0; `spec.load` warns)."""
    if tower_trains(spec) or not spec.gradient_checkpointing:
        return False
    return in_releases(spec.transformers_version, CHECKPOINTING_HOOKS_TOWER)


def tower_checkpointing(spec: RunSpec, arch: ModelArch) -> bool:
    """ms-swift's vit_gradient_checkpointing follows gradient_checkpointing unless set;
    InternViT checkpoints by default (`tower_checkpoints_by_default`)."""
    if spec.vision.tower_gradient_checkpointing is not None:
        return spec.vision.tower_gradient_checkpointing
    return spec.gradient_checkpointing or VZ.tower_checkpoints_by_default(arch.vision)


def inference_bytes(spec: RunSpec, shape: RunShape, arch: ModelArch, num_sequences: int) -> int:
    """No-grad tower forward over the images of ``num_sequences`` prompts (log-prob passes,
    HF generate's prefill)."""
    if not has_images(spec, arch):
        return 0
    images = num_sequences * shape.lengths.images_per_prompt
    return VZ.vision_inference_peak_bytes(
        arch.vision, patches_per_image(spec, arch, shape.lengths.image_pixels), images, spec.attention,
        dense_mask=spec.vision.dense_attention_mask,
    )


def training_bytes(spec: RunSpec, shape: RunShape, arch: ModelArch, num_sequences: int) -> int:
    """What the tower holds while the language model trains on the same micro-batch: its saved
    activations and the projector's when it trains, else its no-grad forward peak.

    A trained tower is charged at least the frozen one's no-grad forward peak: it runs the
    same forward, and inside its largest block the same transients (eager scores) are alive
    beside what earlier blocks saved; with checkpointing a block's forward still materialises
    them before keeping only its input (issue 15: a frozen tower once cost more, +413 GiB for
    Qwen2.5-VL eager at 12.8 MP).
    Source: torch/utils/checkpoint.py (the checkpointed function runs unchanged in forward;
    only what it saves for backward is dropped)."""
    if not has_images(spec, arch):
        return 0
    v, images = arch.vision, num_sequences * shape.lengths.images_per_prompt
    patches = patches_per_image(spec, arch, shape.lengths.image_pixels)
    forward_peak = inference_bytes(spec, shape, arch, num_sequences)
    if not tower_trains(spec) and not frozen_tower_keeps_activations(spec):
        return forward_peak
    saved = VZ.vision_training_saved_bytes(
        v, patches, images, spec.attention, tower_checkpointing(spec, arch), dense_mask=spec.vision.dense_attention_mask
    )
    return max(saved + VZ.merger_saved_bytes(v, patches, images), forward_peak)


def engine_encoder_bytes(spec: RunSpec, shape: RunShape, arch: ModelArch) -> int:
    """vLLM's multimodal profile: the encoder runs on as many worst-case images as its budget
    holds (flash attention kernels) and keeps their outputs in the encoder cache.
    Source: vllm/v1/worker/gpu_model_runner.py `profile_run` (dummy encoder batch),
    `encoder_cache_manager.compute_mm_encoder_budget`."""
    if not has_images(spec, arch):
        return 0
    v = arch.vision
    tokens = VZ.max_image_tokens(v, **_limits(spec))
    limit = spec.rollout.limit_images_per_prompt or spec.vision.images_per_prompt
    budget = VZ.vllm_encoder_budget_tokens(shape.vllm_max_num_batched_tokens, tokens)
    images = VZ.num_vllm_profile_images(budget, tokens, limit, shape.vllm_max_model_len, shape.vllm_max_num_seqs)
    forward = VZ.vision_inference_peak_bytes(v, VZ.max_image_patches(v, **_limits(spec)), images, AttentionImpl.flash_attention_2)
    return forward + VZ.encoder_cache_bytes(v, tokens * images)
