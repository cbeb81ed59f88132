"""The chart model against the plan it draws: every byte of every phase, in the right place."""

from __future__ import annotations

from typing import Any

import pytest

from oomless.charts import groups as G
from oomless.charts.model import (
    Segment, aligned_rows, palette_for, plan_chart, segment_text,
)
from oomless.units import GiB


def test_every_component_of_every_example_has_a_readable_group(documents: dict[str, dict[str, Any]]) -> None:
    for stem, doc in documents.items():
        for device in doc["gpu"]["devices"]:
            for phase in device["phases"]:
                unknown = [n for n in phase["components"] if G.gpu_group(n) is G.OTHER]
                assert not unknown, f"{stem} {device['role']} {phase['name']}: add {unknown} to charts/groups.py"
        for phase in doc["host"]["phases"]:
            unknown = [n for n in phase["components"] if G.host_group(n) is G.OTHER]
            assert not unknown, f"{stem} host {phase['name']}: add {unknown} to charts/groups.py"


def test_groups_by_hand() -> None:
    assert G.gpu_group("vllm.weights") is G.VLLM  # the engine's, not "weights"
    assert G.gpu_group("policy.weights") is G.WEIGHTS
    assert G.gpu_group("critic.optimizer_states") is G.OPTIMIZER
    assert G.gpu_group("optimizer.fp32_grads") is G.GRADS
    assert G.gpu_group("generate.kv_cache") is G.ACTIVATIONS  # HF generate's cache, not vLLM's
    assert G.gpu_group("reference.cuda_context") is G.RUNTIME
    assert G.host_group("moved_to_cpu.actor.weights") is G.HOST_MOVED
    assert G.host_group("vllm.sleep_weights_pinned") is G.HOST_SLEEP


def test_bars_stack_exactly_the_phase_components(documents: dict[str, dict[str, Any]]) -> None:
    for stem, doc in documents.items():
        chart = plan_chart(doc)
        planned = [d["phases"] for d in doc["gpu"]["devices"]] + [doc["host"]["phases"]]
        drawn = [p.bars for p in chart.gpu_panels] + [chart.host_panel.bars]
        for phases, bars in zip(planned, drawn, strict=True):
            assert [b.phase for b in bars] == [p["name"] for p in phases]
            for phase, bar in zip(phases, bars):
                members = {n: b for s in bar.segments for n, b in s.members}
                assert members == {n: b for n, b in phase["components"].items() if b > 0}, (stem, bar.phase)
                assert all(s.num_bytes == sum(b for _, b in s.members) for s in bar.segments)
                assert sum(s.num_bytes for s in bar.segments) == bar.peak_bytes == phase["peak_bytes"]


def test_capacity_line_over_flags_and_binding_mark_s0_before(documents: dict[str, dict[str, Any]]) -> None:
    doc = documents["s0-before"]
    chart = plan_chart(doc)
    (train,) = chart.gpu_panels
    assert [ln.num_bytes for ln in train.lines] == [doc["gpu"]["capacity_bytes"]]
    assert all(b.over for b in train.bars)  # S0 before: every phase is above the H20's capacity
    marks = [(p.key, b.phase, b.mark) for p in (*chart.gpu_panels, chart.host_panel) for b in p.bars if b.mark]
    assert marks == [("gpu:train", "load", "binding")]
    assert chart.verdict.startswith("DOES NOT FIT")
    assert train.ymax_bytes >= max(b.peak_bytes for b in train.bars)


def test_vllm_bracket_spans_the_engine_blocks_only_where_vllm_runs(documents: dict[str, dict[str, Any]]) -> None:
    doc = documents["s1-after"]  # training on 3 GPUs, vLLM alone on the 4th
    chart = plan_chart(doc)
    panels = {p.key: p for p in chart.gpu_panels}
    assert all(b.bracket is None for b in panels["gpu:train"].bars)
    for bar, phase in zip(panels["gpu:rollout"].bars, doc["gpu"]["devices"][1]["phases"]):
        engine = sum(b for n, b in phase["components"].items() if n.startswith("vllm."))
        assert bar.bracket.top_bytes - bar.bracket.bottom_bytes == engine
        assert bar.bracket.top_bytes == bar.peak_bytes  # the engine is stacked last
    assert "vLLM budget" in panels["gpu:rollout"].note


def test_host_lines_ray_threshold_below_ram(documents: dict[str, dict[str, Any]]) -> None:
    doc = documents["s2-before"]  # Ray enabled, threshold 0.95
    host = plan_chart(doc).host_panel
    soft, hard = host.lines
    assert (soft.num_bytes, soft.hard) == (doc["host"]["capacity_bytes"], False)
    assert (hard.num_bytes, hard.hard) == (doc["host"]["limit_bytes"], True)
    assert "Ray kill threshold" in hard.label and "95%" in hard.label


def test_host_without_ram_has_no_line_and_says_so(documents: dict[str, dict[str, Any]]) -> None:
    host = plan_chart(documents["s0-before"]).host_panel
    assert host.lines == ()
    assert "not judged" in host.note
    assert not any(b.over for b in host.bars)


def test_named_components_are_the_largest_and_share_colours_across_plans(documents: dict[str, dict[str, Any]]) -> None:
    before, after = documents["s0-before"], documents["s0-after"]
    palette = palette_for([before, after])
    assert palette.named_gpu[0] == "vllm.kv_cache"  # 75 GiB per GPU before the fix
    colours: dict[str, set[str]] = {}
    for doc in (before, after):
        for panel in plan_chart(doc, palette).gpu_panels:
            for bar in panel.bars:
                for s in bar.segments:
                    colours.setdefault(s.label, set()).add(s.colour)
    assert all(len(c) == 1 for c in colours.values()), colours


def test_aligned_rows_pair_roles_and_share_the_scale(documents: dict[str, dict[str, Any]]) -> None:
    before, after = documents["s1-before"], documents["s1-after"]  # vLLM colocated on one GPU → its own GPU
    palette = palette_for([before, after])
    rows = aligned_rows(plan_chart(before, palette), plan_chart(after, palette))
    assert [(a.key, b.key) for a, b in rows] == [
        ("gpu:train", "gpu:train"), ("gpu:actor+vllm", "gpu:actor+vllm"), ("gpu:rollout", "gpu:rollout"), ("host", "host"),
    ]
    assert rows[1][1].bars == () and "no actor+vllm GPUs" in rows[1][1].note
    assert rows[2][0].bars == () and "no rollout GPUs" in rows[2][0].note
    assert all(a.ymax_bytes == b.ymax_bytes for a, b in rows)


def test_segment_text_shrinks_to_what_fits() -> None:
    s = Segment("vllm.kv_cache", "vllm", 75 * GiB, "#cc79a7", True, (("vllm.kv_cache", 75 * GiB),))
    assert segment_text(s, 200, 100, 10) == ["vllm.kv_cache", "75.00 GiB"]
    assert segment_text(s, 70, 100, 10) == ["vllm.", "kv_cache", "75.00 GiB"]  # split after the dot
    assert segment_text(s, 70, 20, 10) == ["75.00 GiB"]
    assert segment_text(s, 70, 5, 10) == []


@pytest.mark.parametrize("stem", ["s3-before", "s4-before"])
def test_examples_without_vllm_or_with_a_critic_chart(stem: str, documents: dict[str, dict[str, Any]]) -> None:
    chart = plan_chart(documents[stem])
    assert chart.legend and all(p.bars for p in chart.gpu_panels)
