"""The vision tower traced inside the step: a tiny Qwen2.5-VL-shaped model (2 vision blocks, the
second full attention) built with transformers' own tower class. Its traced memory is positive,
grows with the images and their pixels, is smaller frozen than trained, agrees with the plan's
saved-activation formula when trained, and `oomless trace` reports it as its own component."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from oomless.catalog.models import arch_from_config
from oomless.cli.main import app
from oomless.memory import vision as VZ
from oomless.trace.result import TraceSetup, VisionTrace
from oomless.trace.step import run_trace
from oomless.trace.vision_plan import worst_image_grid
from tests.helpers import BASE_SPEC, merged

TINY_VL: dict[str, Any] = {
    "model_type": "qwen2_5_vl", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1024, "tie_word_embeddings": False,
    "max_position_embeddings": 4096, "image_token_id": 1000, "video_token_id": 1001,
    "vision_config": {"model_type": "qwen2_5_vl", "depth": 2, "hidden_size": 32, "intermediate_size": 64,
                      "num_heads": 2, "hidden_act": "silu", "in_chans": 3, "patch_size": 14, "spatial_merge_size": 2,
                      "temporal_patch_size": 2, "window_size": 112, "fullatt_block_indexes": [1],
                      "out_hidden_size": 64},
}
"""Language model h=64, 2 layers; tower h=32, 2 heads, 2 blocks (block 0 windowed, block 1 full)."""
GRID = (1, 16, 24)
"""16 × 24 patches (224 × 336 px): 96 image tokens, six 8 × 8-patch windows."""


def _setup(images: int = 1, grid: tuple[int, int, int] = GRID, trains: bool = True, checkpointing: bool = False,
           attention: str = "sdpa") -> TraceSetup:
    return TraceSetup(
        model="tiny-vl", model_type="qwen2", num_sequences=2, logprob_sequences=2, prompt_len=16, completion_len=16,
        attention=attention, checkpointing=checkpointing, logits="full_bf16", optimizer="adamw", precision="bf16_mixed",
        kl_beta=0.04, images_per_sequence=images, image_grid_thw=grid,
        image_tokens_per_sequence=images * grid[0] * grid[1] * grid[2] // 4, vision_trains=trains,
        vision_checkpointing=checkpointing,
    )


_CACHE: dict[TraceSetup, VisionTrace] = {}


def _vision(setup: TraceSetup) -> VisionTrace:
    if setup not in _CACHE:
        vision = run_trace(TINY_VL, setup).vision
        assert vision is not None
        _CACHE[setup] = vision
    return _CACHE[setup]


def test_traced_tower_memory_is_positive() -> None:
    v = _vision(_setup())
    assert v.num_images == 2 and v.num_patches == 16 * 24
    assert v.held_bytes > 0 and v.forward_peak_bytes > 0 and v.logprob_forward_peak_bytes > 0 and v.backward_peak_bytes > 0


@pytest.mark.parametrize("bigger", [{"images": 2}, {"grid": (1, 32, 24)}])
def test_tower_memory_grows_with_images_and_pixels(bigger: dict[str, Any]) -> None:
    small, large = _vision(_setup()), _vision(_setup(**bigger))
    for field in ("held_bytes", "forward_peak_bytes", "logprob_forward_peak_bytes", "backward_peak_bytes"):
        assert getattr(large, field) > 1.5 * getattr(small, field), field


@pytest.mark.parametrize("checkpointing", [False, True])
def test_frozen_tower_holds_less_than_a_trained_one(checkpointing: bool) -> None:
    trained, frozen = _vision(_setup(checkpointing=checkpointing)), _vision(_setup(trains=False, checkpointing=checkpointing))
    assert frozen.held_bytes < trained.held_bytes
    assert frozen.logprob_forward_peak_bytes == trained.logprob_forward_peak_bytes  # the same no-grad forward
    if not checkpointing:  # nothing in the frozen tower needs gradients: it saves nothing, has no backward
        assert frozen.held_bytes < trained.held_bytes / 100 and frozen.backward_peak_bytes == 0
        assert frozen.charged_bytes < trained.charged_bytes


def test_checkpointing_makes_a_frozen_tower_keep_its_block_inputs() -> None:
    """transformers >= 5.0: `gradient_checkpointing_enable` hooks the tower's patch_embed to make its
    output require grad, so the frozen tower's checkpointed blocks keep their bf16 inputs (2h per
    patch each) and the merger its activations (12h per patch: RMSNorm 6h, 3 bf16 inputs 2h)."""
    transformers = pytest.importorskip("transformers")
    if int(transformers.__version__.split(".")[0]) < 5:
        pytest.skip("transformers < 5 hooks only the language model's embedding, and only with PEFT")
    frozen = _vision(_setup(trains=False, checkpointing=True))
    h, depth, patches = 32, 2, 2 * GRID[1] * GRID[2]
    assert frozen.held_bytes >= (depth * 2 * h + 12 * h) * patches
    assert frozen.backward_peak_bytes > frozen.held_bytes


def test_checkpointed_tower_holds_less_than_a_saving_one() -> None:
    assert _vision(_setup(checkpointing=True)).held_bytes < _vision(_setup()).held_bytes


@pytest.mark.parametrize(("attention", "checkpointing"),
                         [("sdpa", False), ("sdpa", True), ("flash_attention_2", False), ("eager", False)])
def test_trained_tower_holds_what_the_plan_says_it_saves(attention: str, checkpointing: bool) -> None:
    """sdpa: transformers' per-window loop (real cu_seqlens); flash: one varlen call; eager: scores."""
    v = arch_from_config(TINY_VL, "tiny-vl").vision
    assert v is not None
    patches, images = GRID[1] * GRID[2], 2
    planned = (VZ.vision_training_saved_bytes(v, patches, images, attention, checkpointing)
               + VZ.merger_saved_bytes(v, patches, images))
    held = _vision(_setup(checkpointing=checkpointing, attention=attention)).held_bytes
    assert abs(planned - held) / held <= 0.02, (planned, held)


def test_worst_image_grid_has_the_plans_worst_tokens() -> None:
    v = arch_from_config(TINY_VL, "tiny-vl").vision
    assert v is not None
    for max_pixels in (602112, 12845056, 200704):
        t, h, w = worst_image_grid(v, 3136, max_pixels)
        assert t * h * w == VZ.max_image_patches(v, max_pixels=max_pixels, min_pixels=3136)


def test_trace_names_the_vision_component(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(TINY_VL), encoding="utf-8")
    spec = merged(BASE_SPEC, model=str(tmp_path / "config.json"),
                  **{"batch.micro_batch_size": 2, "lengths.max_prompt_tokens": 16, "lengths.max_completion_tokens": 16,
                     "vision": {"images_per_prompt": 1, "max_pixels": 200704},  # 16 × 16 tokens
                     "hardware": {"gpu_capacity_gib": 80, "gpus_per_node": 1}, "rollout": {"engine": "hf"},
                     "distribution": {"strategy": "ddp"}})
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    text = CliRunner().invoke(app, ["trace", str(path)])
    assert text.exit_code == 0, text.output
    assert "+ 256 image +" in text.output.splitlines()[0]
    assert "Vision tower (trained" in text.output and "Plan (train phase vision.activations)" in text.output
    assert "not traced" not in text.output
    done = CliRunner().invoke(app, ["trace", str(path), "--json"])
    assert done.exit_code == 0, done.output
    doc = json.loads(done.stdout)
    assert doc["vision"]["held_bytes"] > 0 and doc["plan"]["vision"]["train_bytes"] > 0
    assert doc["setup"]["image_grid_thw"] == [1, 32, 32]


def test_text_only_setup_traces_no_tower() -> None:
    setup = dataclasses.replace(_setup(), images_per_sequence=0, image_tokens_per_sequence=0)
    tiny_text = {k: v for k, v in TINY_VL.items() if k != "vision_config"} | {"model_type": "qwen2"}
    assert run_trace(tiny_text, setup).vision is None


@pytest.mark.parametrize("counts_images", [False, True])
def test_traced_prompt_and_images_are_the_plans(counts_images: bool) -> None:
    """The traced sequence holds the plan's prompt (text + image tokens, or the bound when it
    counts the images and caps their area) and each image the plan's worst patches."""
    from oomless.planner.plan import make_plan
    from oomless.spec.load import parse_spec, resolve
    from oomless.trace.compare import setup_from_spec
    from oomless.trace.vision_plan import predict_vision

    data = merged(BASE_SPEC, model="Qwen/Qwen2.5-VL-3B-Instruct",
                  **{"vision": {"images_per_prompt": 2, "max_pixels": 12845056},
                     "lengths.max_prompt_tokens": 1024, "lengths.max_prompt_counts_images": counts_images})
    run = resolve(parse_spec(data))
    setup, plan = setup_from_spec(run.spec, run.arch), make_plan(run.spec, run.arch, run.gpu)
    vision = predict_vision(plan)
    assert vision is not None
    t, h, w = setup.image_grid_thw
    assert t * h * w == vision.num_patches and setup.images_per_sequence == 2
    assert setup.prompt_len + setup.image_tokens_per_sequence == plan.shape.prompt_len
    assert (setup.prompt_len + setup.image_tokens_per_sequence <= 1024) == counts_images
