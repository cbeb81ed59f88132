"""Qwen2-VL's and Qwen3-VL's vision towers traced inside the step (transformers' own classes on
fake tensors, Qwen3-VL's deepstack features added to the first decoder layers as
`Qwen3VLTextModel._deepstack_process` adds them), against the plan's tower terms: what a
trained tower keeps for backward, with and without checkpointing, under each attention kernel,
and the peak of its no-grad forward. Tower widths are the real ones (Qwen2-VL 1280, Qwen3-VL
1024 with a 4096 MLP); depth and image size are small so the trace stays quick."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from oomless.catalog.models import arch_from_config
from oomless.catalog.vision import VisionArch
from oomless.memory import vision as VZ
from oomless.trace.result import TraceSetup, VisionTrace
from oomless.trace.step import run_trace

pytest.importorskip("transformers.models.qwen3_vl")

QWEN2_VL: dict[str, Any] = {
    "model_type": "qwen2_vl", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1024, "tie_word_embeddings": False,
    "max_position_embeddings": 4096, "image_token_id": 1000, "video_token_id": 1001,
    "vision_config": {"depth": 2, "embed_dim": 1280, "mlp_ratio": 4, "num_heads": 16, "in_chans": 3,
                      "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2, "hidden_size": 64},
}
"""Qwen2-VL's hub config leaves hidden_act out: quick_gelu, the config class's default."""
QWEN3_VL: dict[str, Any] = {
    "model_type": "qwen3_vl", "image_token_id": 1000, "video_token_id": 1001, "tie_word_embeddings": False,
    "text_config": {"model_type": "qwen3_vl_text", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 4,
                    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 1024,
                    "max_position_embeddings": 4096, "tie_word_embeddings": False, "rope_theta": 5000000},
    "vision_config": {"model_type": "qwen3_vl", "depth": 3, "hidden_size": 1024, "intermediate_size": 4096,
                      "num_heads": 16, "hidden_act": "gelu_pytorch_tanh", "in_channels": 3, "patch_size": 16,
                      "spatial_merge_size": 2, "temporal_patch_size": 2, "out_hidden_size": 64,
                      "num_position_embeddings": 2304, "deepstack_visual_indexes": [0, 1]},
}
MODELS = {"qwen2_vl": QWEN2_VL, "qwen3_vl": QWEN3_VL}
GRID = (1, 16, 24)
IMAGES = 2
"""Two sequences of one 16 × 24-patch image each."""
_CACHE: dict[tuple[str, TraceSetup], VisionTrace] = {}


def _setup(trains: bool = True, checkpointing: bool = False, attention: str = "sdpa") -> TraceSetup:
    return TraceSetup(
        model="tiny", model_type="tiny", num_sequences=IMAGES, logprob_sequences=IMAGES, prompt_len=16,
        completion_len=16, attention=attention, checkpointing=checkpointing, logits="full_bf16", optimizer="adamw",
        precision="bf16_mixed", kl_beta=0.04, images_per_sequence=1, image_grid_thw=GRID,
        image_tokens_per_sequence=GRID[1] * GRID[2] // 4, vision_trains=trains, vision_checkpointing=checkpointing)


def _trace(name: str, setup: TraceSetup) -> VisionTrace:
    if (name, setup) not in _CACHE:
        vision = run_trace(copy.deepcopy(MODELS[name]), setup).vision
        assert vision is not None
        _CACHE[(name, setup)] = vision
    return _CACHE[(name, setup)]


def _tower(name: str) -> VisionArch:
    v = arch_from_config(MODELS[name], "tiny").vision
    assert v is not None
    return v


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize(("attention", "checkpointing"),
                         [("sdpa", False), ("sdpa", True), ("flash_attention_2", False), ("eager", False)])
def test_trained_tower_keeps_what_the_plan_says(name: str, attention: str, checkpointing: bool) -> None:
    v, patches = _tower(name), GRID[1] * GRID[2]
    planned = (VZ.vision_training_saved_bytes(v, patches, IMAGES, attention, checkpointing)
               + VZ.merger_saved_bytes(v, patches, IMAGES))
    held = _trace(name, _setup(checkpointing=checkpointing, attention=attention)).held_bytes
    assert abs(planned - held) / held <= 0.01, (planned, held)


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("attention", ["sdpa", "flash_attention_2"])
def test_no_grad_forward_peak_is_the_plans(name: str, attention: str) -> None:
    v = _tower(name)
    planned = VZ.vision_inference_peak_bytes(v, GRID[1] * GRID[2], IMAGES, attention)
    traced = _trace(name, _setup(attention=attention)).logprob_forward_peak_bytes
    assert abs(planned - traced) / traced <= 0.01, (planned, traced)


def test_mlp_kinds_follow_the_configs_activation() -> None:
    assert (_tower("qwen2_vl").hidden_act, VZ.mlp_kind(_tower("qwen2_vl"))) == ("quick_gelu", VZ.QUICK_GELU)
    assert VZ.mlp_kind(_tower("qwen3_vl")) == VZ.GELU
    h, i = 1280, 5120
    assert VZ.vision_mlp_saved_bytes_per_patch(_tower("qwen2_vl")) == 2 * h + 6 * i


def test_deepstack_mergers_train_through_the_decoder() -> None:
    """Without the deepstack features reaching the decoder their mergers would keep nothing:
    the trained tower holds each merger's 6h per patch beyond the main merger's."""
    v = _tower("qwen3_vl")
    with_deepstack = _trace("qwen3_vl", _setup()).held_bytes
    alone = copy.deepcopy(QWEN3_VL)
    alone["vision_config"]["deepstack_visual_indexes"] = []
    vision = run_trace(alone, _setup()).vision
    assert vision is not None
    per_merger = 3 * 2 * v.hidden_size * GRID[1] * GRID[2] * IMAGES
    assert with_deepstack - vision.held_bytes >= 2 * per_merger
