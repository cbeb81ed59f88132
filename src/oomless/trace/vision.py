"""A vision-language model's vision tower on fake tensors, joined to the traced language model
the way transformers joins them.

The tower is transformers' own class built from config.json's ``vision_config`` on the meta
device in the model dtype (`TOWER_CLASSES`: Qwen2-VL, full attention in every block; Qwen2.5-VL,
window attention except the `fullatt_block_indexes` blocks; Qwen3-VL, full attention, a learned
position table and deepstack mergers; each with a 2×2 PatchMerger), put in training mode,
frozen (tower and merger: ms-swift `freeze_vit`, VLM-R1 `freeze_vision_modules`) unless it
trains, its blocks checkpointed as HF Trainer/TRL enable it
(`gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})`), then
made fake like the language model (`model.to_fake`).

Gradient checkpointing makes a frozen tower's output require gradients in transformers >= 5.0:
`_activation_checkpointing_enable` calls `enable_input_require_grads()` whenever the model's
``main_input_name`` is ``input_ids`` (the VLM's, and the tower's own default), and that hooks
the input embeddings of every sub-model, the tower's `patch_embed` included (transformers 5.0.0
and 5.24 `modeling_utils.py`). The frozen tower then keeps its checkpointed block inputs and the
merger's activations, and backward runs through it. transformers 4.51.3 and 4.57.1 call it only
with PEFT loaded, on the language model's embedding alone. The trace follows the installed
version: the hook is on whenever either the language model or the tower is checkpointed.

`ImageJoin` does what `Qwen2_5_VLModel.forward` does between the token embedding and the
decoder (transformers 5.24 `models/qwen2_5_vl/modeling_qwen2_5_vl.py`): `get_image_features`
(pixel values cast to the tower's dtype, the tower, its merged output split per image),
`torch.cat` of the per-image embeddings, the placeholder mask ``input_ids == image_token_id``
and ``inputs_embeds.masked_scatter(mask, image_embeds)``. It runs as a forward hook on the
language model's input embedding, so the log-prob forward runs the tower without gradients
and the training forward with them, and backward flows from the decoder into the tower.

Qwen3-VL's deepstack features (one merger per `deepstack_visual_indexes` block) are added to
the hidden states after the first decoder layers at the image positions, as
`Qwen3VLTextModel._deepstack_process` adds them (`ImageJoin.add_deepstack`, forward hooks on
those layers), so backward reaches their mergers.

The tower's index tensors (rotary position ids, window order, Qwen3-VL's position-table taps,
``cu_seqlens`` of windows and images) depend on ``image_grid_thw``'s values; they are
computed by transformers' own `vision_utils` functions on real tensors and handed to the tower
as the precomputed keyword arguments it accepts (transformers 5.24 `get_vision_*`:
"precomputed before tracing").
``cu_seqlens`` stay real tensors outside the flash path: transformers' per-chunk loop takes
``lengths.tolist()`` of them, which `RealIndexOps` computes for real.

Known limitations: the placeholder-count check of `get_placeholder_mask` (data-dependent) is
skipped; the index tensors are counted as inputs (OTHER), a few bytes per patch (the plan
charges Qwen3-VL's position-table taps to the tower, 48 B per patch); images, not
video; transformers 4.49-4.53's dense vision mask (`vision.dense_attention_mask`) is not traced
(5.24 attends per chunk).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._mode_utils import no_dispatch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from ..errors import InputError
from ..memory.components import Category
from .attention import VISION_IMPLEMENTATIONS, register
from .model import _strip_annotations, to_fake
from .result import TraceSetup, VisionTrace
from .tracker import ACTIVATION_CATEGORIES, StorageTracker, mark_checkpointed_layers


@dataclass(frozen=True)
class TowerClass:
    """transformers' classes of one tower: (module, name) of its config and of its model."""

    config: tuple[str, str]
    model: tuple[str, str]


TOWER_CLASSES = {
    "qwen2_vl": TowerClass(("transformers.models.qwen2_vl.configuration_qwen2_vl", "Qwen2VLVisionConfig"),
                           ("transformers.models.qwen2_vl.modeling_qwen2_vl", "Qwen2VisionTransformerPretrainedModel")),
    "qwen2_5_vl": TowerClass(("transformers.models.qwen2_5_vl.configuration_qwen2_5_vl", "Qwen2_5_VLVisionConfig"),
                             ("transformers.models.qwen2_5_vl.modeling_qwen2_5_vl", "Qwen2_5_VisionTransformerPretrainedModel")),
    "qwen3_vl": TowerClass(("transformers.models.qwen3_vl.configuration_qwen3_vl", "Qwen3VLVisionConfig"),
                           ("transformers.models.qwen3_vl.modeling_qwen3_vl", "Qwen3VLVisionModel")),
}
"""Top-level model_type → the tower's classes. Qwen2-VL: full attention in every block,
LayerNorm, fc1/fc2 MLP, LayerNorm PatchMerger; Qwen3-VL: the same blocks with a learned
position table resampled to each image, and deepstack mergers whose outputs are added to the
first decoder layers' hidden states at the image positions (`Qwen3VLTextModel._deepstack_process`)."""
JOIN_NAME = "ImageJoin"
TOWER_NAME = "visual"
"""The tower's module name, as in `Qwen2_5_VLModel.visual`."""
START, END, BACKWARD_START, BACKWARD_END = "vision_start", "vision_end", "vision_backward_start", "vision_backward_end"


class RealIndexOps(TorchDispatchMode):
    """Operators whose every tensor input is a real (not fake) tensor run for real, outside the
    fake mode and the tracker: the tower's ``cu_seqlens`` arithmetic (a few int32 values per
    window), whose values transformers turns into Python ints."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        from torch._subclasses.fake_tensor import FakeTensor

        flat, _ = tree_flatten((args, kwargs or {}))
        tensors = [t for t in flat if isinstance(t, torch.Tensor)]
        if tensors and not any(isinstance(t, FakeTensor) for t in tensors):
            with no_dispatch():
                return func(*args, **(kwargs or {}))
        return func(*args, **(kwargs or {}))


def _import(module: str, name: str) -> Any:
    import importlib

    return getattr(importlib.import_module(module), name)


def build_tower(config: dict[str, Any], setup: TraceSetup, dtype: torch.dtype, mode: Any) -> torch.nn.Module:
    """The tower of ``config`` on fake CPU tensors of ``mode``, frozen or trained and
    checkpointed as ``setup`` says."""
    model_type = config.get("model_type", "")
    if model_type not in TOWER_CLASSES or not isinstance(config.get("vision_config"), dict):
        raise InputError("model", f"the vision tower of model_type {model_type!r} is not traced; traced: "
                         f"{', '.join(TOWER_CLASSES)}")
    classes = TOWER_CLASSES[model_type]
    register()
    vision_config = _import(*classes.config)(**_strip_annotations(config["vision_config"]))
    implementation = VISION_IMPLEMENTATIONS[setup.attention]
    with torch.device("meta"):
        tower = _import(*classes.model)._from_config(vision_config, dtype=dtype)
        tower.config._attn_implementation = implementation
        tower.train()
        tower.requires_grad_(setup.vision_trains)
        if setup.vision_checkpointing:
            tower.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            mark_checkpointed_layers(tower)
        elif setup.checkpointing:
            tower.enable_input_require_grads()
    to_fake(tower, mode)
    return tower


@dataclass
class ImageBatch:
    """One micro-batch's images: fp32 pixel values as the processor returns them, the grid,
    and the tower's precomputed index tensors (fake, or real where transformers reads values)."""

    pixel_values: torch.Tensor
    grid_thw: torch.Tensor
    precomputed: dict[str, Any]

    def inputs(self) -> list[torch.Tensor]:
        return [self.pixel_values, *(t for t in self.precomputed.values() if isinstance(t, torch.Tensor))]


def _index_tensors(tower: torch.nn.Module, grid: torch.Tensor) -> dict[str, Any]:
    """The tower's data-dependent index tensors and lengths, computed for real by transformers'
    own `vision_utils` functions, under the keyword names its forward pops them by."""
    from transformers import vision_utils as vu

    cfg = tower.config
    cu_seqlens, max_seqlen = vu.get_vision_attention_seqlens(grid, cfg)
    out: dict[str, Any] = {"cu_seqlens": cu_seqlens, "max_seqlen": int((cu_seqlens[1:] - cu_seqlens[:-1]).max()),
                           "position_ids": vu.get_vision_position_ids(grid, cfg.spatial_merge_size)}
    if getattr(cfg, "window_size", 0) and hasattr(cfg, "fullatt_block_indexes"):  # Qwen2.5-VL
        window_index, cu_window = vu.get_vision_window_index(grid, cfg.spatial_merge_size, cfg.window_size, cfg.patch_size)
        cu_window = cu_window.to(torch.int32)
        out.update(window_index=window_index, cu_window_seqlens=cu_window,
                   max_window_seqlen=int((cu_window[1:] - cu_window[:-1]).max()))
    if hasattr(tower, "num_grid_per_side"):  # Qwen3-VL's learned position table
        indices, weights = vu.get_vision_interpolation_indices_and_weights(
            grid, num_grid_per_side=tower.num_grid_per_side, mode=tower.interpolation_mode,
            align_corners=tower.interpolation_align_corners, spatial_merge_size=cfg.spatial_merge_size)
        out.update(interp_indices=indices, interp_weights=weights)
    return out


REAL_OUTSIDE_FLASH = ("cu_seqlens", "cu_window_seqlens")
"""Index tensors whose values transformers reads (`lengths.tolist()` of the per-chunk loop):
real, except on the flash path, which passes them to the kernel."""


def image_batch(tower: torch.nn.Module, setup: TraceSetup, num_sequences: int, mode: Any) -> ImageBatch:
    """``num_sequences`` × ``images_per_sequence`` images of ``setup.image_grid_thw``; call
    outside the fake mode (the index tensors are computed for real, then made fake)."""
    cfg = tower.config
    grid = torch.tensor([setup.image_grid_thw] * (num_sequences * setup.images_per_sequence), dtype=torch.long)
    flash = "flash" in cfg._attn_implementation
    precomputed = {k: v if not isinstance(v, torch.Tensor) or (k in REAL_OUTSIDE_FLASH and not flash) else mode.from_tensor(v)
                   for k, v in _index_tensors(tower, grid).items()}
    num_patches = int(grid.prod(-1).sum())
    width = cfg.in_channels * cfg.temporal_patch_size * cfg.patch_size ** 2
    with mode:
        pixel_values = torch.empty(num_patches, width, dtype=torch.float32)
    return ImageBatch(pixel_values, grid, precomputed)


class ImageJoin(torch.nn.Module):
    """The tower's image embeddings scattered into the token embeddings (see the module doc)."""

    def __init__(self, tower: torch.nn.Module, image_token_id: int) -> None:
        super().__init__()
        self.visual = tower
        self.image_token_id = image_token_id
        self.batch: ImageBatch | None = None
        self.tracker: StorageTracker | None = None
        self.deepstack: list[torch.Tensor] = []
        """Qwen3-VL: the current forward's deepstack features, one per early decoder layer."""

    def forward(self, inputs_embeds: torch.Tensor) -> torch.Tensor:
        """The image embeddings of the current batch, in the language model's dtype
        (`get_image_features` and the `torch.cat` of `Qwen2_5_VLModel.forward`)."""
        assert self.batch is not None and self.tracker is not None
        batch, tracker = self.batch, self.tracker
        tracker.mark(f"{START}:{tracker.region}")
        merge = self.visual.spatial_merge_size ** 2
        pixel_values = batch.pixel_values.type(self.visual.dtype)
        out = self.visual(pixel_values, grid_thw=batch.grid_thw, **dict(batch.precomputed))
        sizes = [int(t * h * w) // merge for t, h, w in batch.grid_thw.tolist()]
        image_embeds = torch.cat(torch.split(out.pooler_output, sizes), dim=0).to(inputs_embeds.device, inputs_embeds.dtype)
        self.deepstack = [torch.cat(torch.split(f, sizes), dim=0) for f in getattr(out, "deepstack_features", None) or ()]
        del out, pixel_values
        if image_embeds.requires_grad:
            image_embeds.register_hook(lambda grad: tracker.mark(BACKWARD_START))
        tracker.mark(f"{END}:{tracker.region}")
        return image_embeds

    def scatter(self, inputs_embeds: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
        """`get_placeholder_mask` and ``masked_scatter``: the language model's input (its bytes
        are the language model's, made outside the join's modules)."""
        image_embeds = self(inputs_embeds)
        mask = (input_ids == self.image_token_id).unsqueeze(-1)
        return inputs_embeds.masked_scatter(mask, image_embeds)

    def add_deepstack(self, layer: int, hidden: torch.Tensor) -> torch.Tensor:
        """`Qwen3VLTextModel._deepstack_process` after decoder layer ``layer``: a clone of the
        hidden states with the layer's deepstack feature added at the image positions (HF
        indexes with the boolean image mask; here with as many fake flat positions, the same
        gather, add and index_put of [image tokens, hidden])."""
        if layer >= len(self.deepstack):
            return hidden
        feature = self.deepstack[layer]
        positions = torch.empty(feature.shape[0], dtype=torch.long, device=hidden.device)
        flat = hidden.clone().view(-1, hidden.shape[-1])
        flat = flat.index_put((positions,), flat.index_select(0, positions) + feature.to(hidden.dtype))
        if layer == len(self.deepstack) - 1:
            self.deepstack = []
        return flat.view(hidden.shape)


def attach(model: torch.nn.Module, join: ImageJoin) -> list[Any]:
    """Run ``join`` on the output of ``model``'s input embedding; returns the hook handles. The
    gradient reaching the patch embedding's output marks the end of the tower's backward (what
    remains is the patch embedding's weight gradient, when it trains)."""
    tracker = join.tracker
    assert tracker is not None

    def mark_end(module: Any, args: Any, out: torch.Tensor) -> None:
        if out.requires_grad:
            out.register_hook(lambda grad: tracker.mark(BACKWARD_END))

    def deepstack(index: int) -> Any:
        def add(module: Any, args: Any, out: Any) -> Any:
            if isinstance(out, tuple):
                return (join.add_deepstack(index, out[0]), *out[1:])
            return join.add_deepstack(index, out)
        return add

    layers = model.get_decoder().layers
    depth = len(getattr(join.visual, "deepstack_visual_indexes", ()) or ())
    return [join.visual.patch_embed.register_forward_hook(mark_end),
            model.get_input_embeddings().register_forward_hook(lambda module, args, out: join.scatter(out, args[0])),
            *(layers[i].register_forward_hook(deepstack(i)) for i in range(min(depth, len(layers))))]


def _is_vision(module: str) -> bool:
    return module == JOIN_NAME or module == TOWER_NAME or module.startswith(TOWER_NAME + ".")


def _replay_peak(events: list[Any], start: int, end: int, counts: Any) -> int:
    """Largest ACT + TEMP alive at a birth in [start, end] among the records ``counts`` accepts,
    replaying ``events`` (`StorageTracker.timeline`)."""
    live = best = 0
    for clock, sign, r in events:
        if clock > end:
            break
        if r.category not in ACTIVATION_CATEGORIES or not counts(r):
            continue
        live += sign * r.num_bytes
        if sign > 0 and clock >= start:
            best = max(best, live)
    return best


def measure(tracker: StorageTracker, setup: TraceSetup) -> VisionTrace:
    """The tower's traced memory, from the marks `ImageJoin` and `attach` left."""
    marks, events = tracker.marks, tracker.timeline()

    def forward_peak(region: str) -> int:
        start, end = marks.get(f"{START}:{region}"), marks.get(f"{END}:{region}")
        if start is None or end is None:
            return 0
        return _replay_peak(events, start, end, lambda r: _is_vision(r.module))

    held = sum(b for m, b in tracker.by_module_at(marks["end_of_forward"]).items() if _is_vision(m))
    backward = 0
    if BACKWARD_START in marks:  # the tower's backward runs before the token embedding's (higher sequence numbers)
        start = marks[BACKWARD_START]
        backward = _replay_peak(events, start, marks.get(BACKWARD_END, tracker.clock),
                                lambda r: _is_vision(r.module) or r.born >= start)
    t, h, w = setup.image_grid_thw
    return VisionTrace(
        num_images=setup.num_sequences * setup.images_per_sequence, num_patches=t * h * w,
        trains=setup.vision_trains, checkpointing=setup.vision_checkpointing,
        held_bytes=held, forward_peak_bytes=forward_peak("forward"), logprob_forward_peak_bytes=forward_peak("logprob"),
        backward_peak_bytes=backward,
    )


def register_inputs(tracker: StorageTracker, *batches: ImageBatch) -> None:
    for batch in batches:
        for t in batch.inputs():
            if isinstance(t, torch.Tensor) and type(t) is not torch.Tensor:  # fake: counted; real index tensors are not
                tracker.register(t, Category.OTHER, "image_inputs")
