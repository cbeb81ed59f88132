"""The storage tracker on hand-derived cases: views count once, 512-B blocks, a tiny Qwen2 layer
derived tensor by tensor, and the categories of a whole step."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from oomless.memory.components import Category
from oomless.trace.result import TraceSetup
from oomless.trace.step import run_trace
from oomless.trace.tracker import StorageTracker, allocated_bytes

# h=64, I=128, 4 heads of head_dim 16, 2 KV heads, 2 layers, V=1024, untied; 2 sequences of
# 48 + 16 tokens: s = 64, T = 128 tokens. Every size below is a multiple of 512 B.
TINY_QWEN2: dict[str, Any] = {
    "model_type": "qwen2", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1024, "tie_word_embeddings": False,
    "max_position_embeddings": 512,
}
SETUP = TraceSetup(model="tiny", model_type="qwen2", num_sequences=2, logprob_sequences=2, prompt_len=48,
                   completion_len=16, attention="sdpa", checkpointing=False, logits="full_bf16", optimizer="adamw",
                   precision="bf16_mixed", kl_beta=0.04)


def test_allocator_rounding() -> None:
    assert [allocated_bytes(n) for n in (0, 1, 512, 513, 4000)] == [0, 512, 512, 1024, 4096]


def test_views_and_in_place_results_count_once() -> None:
    with FakeTensorMode():
        tracker = StorageTracker()
        with tracker:
            x = torch.empty(1000)  # 4000 B -> 4096
            views = (x[10:], x.view(10, 100), x.t() if x.dim() == 2 else x.unsqueeze(0))
            x.add_(1.0)
            y = torch.empty(25, dtype=torch.bfloat16)  # 50 B -> 512
    assert [r.num_bytes for r in tracker.records] == [4096, 512]
    assert len(views) == 3 and y.numel() == 25


def _trace() -> tuple[Any, StorageTracker]:
    box: dict[str, StorageTracker] = {}
    result = run_trace(TINY_QWEN2, SETUP, inspect=lambda tr: box.update(tracker=tr))
    return result, box["tracker"]


def _alive_by_prefix(tracker: StorageTracker, prefix: str) -> int:
    clock = tracker.marks["end_of_forward"]
    return sum(r.num_bytes for r in tracker.alive_at(clock) if r.module.startswith(prefix) and r.category == Category.ACT)


def test_tiny_qwen2_layer_saved_bytes_by_hand() -> None:
    _, tracker = _trace()
    t, h, i = 128, 64, 128
    norm = 4 * t * h + 512 + 2 * t * h + 2 * t * h  # fp32 upcast, rsqrt [2, 64, 1], bf16 cast, output
    # sdpa (memory-efficient): q, expanded k and v, output (2·T·64 each), bf16 bias [2, 1, 64, 64],
    # fp32 LSE [2, 4, 64], rng seed and offset (512 B each).
    attention = 4 * 2 * t * 64 + 2 * 2 * 64 * 64 + 4 * 2 * 4 * 64 + 2 * 512
    mlp = 4 * 2 * t * i  # gate, activation, up, product
    layer = 2 * norm + attention + mlp
    assert layer == 348160
    assert _alive_by_prefix(tracker, "model.layers.0.") == layer
    assert _alive_by_prefix(tracker, "model.layers.1.") == layer
    # final norm: fp32 upcast + rsqrt + bf16 cast (its output is freed: the head copied 2 × 17 rows)
    assert _alive_by_prefix(tracker, "model.norm") == 4 * t * h + 512 + 2 * t * h
    assert _alive_by_prefix(tracker, "lm_head") == allocated_bytes(2 * 2 * 17 * h)


def test_categories_of_a_whole_step() -> None:
    result, tracker = _trace()
    params = [r for r in tracker.records if r.category == Category.PARAM]
    weights = sum(r.num_bytes for r in params)
    grads = sum(r.num_bytes for r in tracker.records if r.category == Category.GRAD and r.region == "backward")
    assert grads == weights  # one bf16 gradient per bf16 weight
    fp32 = sum(allocated_bytes(4 * math.prod(r.shape)) for r in params)
    # AdamW on fp32 masters: master + exp_avg + exp_avg_sq, each fp32 per weight.
    assert sum(r.num_bytes for r in tracker.records if r.category == Category.OPT) == 3 * fp32
    assert result.peak.region == "optimizer"
    assert result.activation_peak.region in ("forward", "loss", "backward")


def test_foreach_adamw_holds_one_copy_of_the_stepped_parameters() -> None:
    """torch's foreach AdamW (`_foreach_sqrt` of every exp_avg_sq at once) traced on the tiny
    model: the optimizer step's temporaries are one fp32 copy of the masters it steps, the
    plan's `optimizer.step_temporaries`; the per-tensor loop twice the largest; fused none."""
    import dataclasses

    def temp_at_step_peak(implementation: str) -> tuple[int, list[int]]:
        box: dict[str, StorageTracker] = {}
        result = run_trace(TINY_QWEN2, dataclasses.replace(SETUP, optimizer_implementation=implementation),
                           inspect=lambda tr: box.update(tracker=tr))
        params = [r for r in box["tracker"].records if r.category == Category.PARAM]
        fp32 = [allocated_bytes(4 * math.prod(r.shape)) for r in params]
        return result.region_peaks["optimizer"].by_category.get(Category.TEMP.value, 0), fp32

    foreach, fp32 = temp_at_step_peak("foreach")
    assert foreach == sum(fp32)
    loop, _ = temp_at_step_peak("for_loop")
    # sqrt and quotient of the largest (the untied head or embedding, 1024 × 64) and a 0-d scalar
    assert 2 * max(fp32) <= loop <= 2 * max(fp32) + 512 < foreach
    fused, _ = temp_at_step_peak("fused")
    assert fused == 0
