"""The verdict's wording (issue 16.4): the first line names what breaks first in time with the
shortfall; a phase reads as its total against the capacity with its largest parts (not one
component blamed for the total); no negative size anywhere."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from oomless.cli.render import render_plan
from oomless.planner import verdict as V
from oomless.planner.plan import Plan, make_plan
from oomless.spec.load import load_run
from oomless.units import format_bytes
from tests.helpers import EXAMPLES

SEEDS = sorted((EXAMPLES / "seeds").glob("*.yaml"))
NEGATIVE_SIZE = re.compile(r"-\s?\d[\d,.]*\s?(GiB|MiB|KiB)")

SPENT_BUDGET = {
    "model": "Qwen/Qwen2.5-7B-Instruct",
    "hardware": {"gpu": "RTX-4090", "gpus_per_node": 1, "host_ram_gib": 64},
    "finetune": {"method": "full"},
    "batch": {"micro_batch_size": 4, "gradient_accumulation_steps": 4, "num_generations": 4},
    "lengths": {"max_prompt_tokens": 512, "max_completion_tokens": 1024},
    "rollout": {"engine": "vllm_colocate", "gpu_memory_utilization": 0.3},
}
"""Full fine-tuning of a 7B model on one 24 GB card: what loads before vLLM exceeds the GPU, so
vLLM's free memory at start-up and its KV cache would be negative."""


def _plan(path: Path) -> Plan:
    run = load_run(path)
    return make_plan(run.spec, run.arch, run.gpu, run.archs)


def _text(plan: Plan, width: int = 100) -> str:
    out = io.StringIO()
    render_plan(plan, Console(file=out, width=width, color_system=None))
    return out.getvalue()


def _verdict_paragraph(text: str) -> str:
    """The verdict's first sentence, unwrapped: from its label to the list (or the end)."""
    start = next(i for i, line in enumerate(text.splitlines()) if line.startswith(("FITS", "DOES NOT FIT")))
    lines = []
    for line in text.splitlines()[start:]:
        if lines and (line.startswith("  • ") or "constraint(s) broken" in line or line.startswith("It fits")):
            break
        lines.append(line)
    return " ".join(" ".join(lines).split())


@pytest.fixture(scope="module")
def spent_plan(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    path = tmp_path_factory.mktemp("spent") / "spent.yaml"
    path.write_text(yaml.safe_dump(SPENT_BUDGET), encoding="utf-8")
    return _plan(path)


@pytest.mark.parametrize("seed", SEEDS, ids=lambda p: p.stem)
def test_first_line_names_what_breaks_first_with_the_shortfall(seed: Path) -> None:
    plan = _plan(seed)
    first = _verdict_paragraph(_text(plan))
    b = plan.binding
    assert b.phase in first
    assert (f"one {b.device_role} GPU" if b.device == "gpu" else "the host") in first
    if plan.worst_fits:
        assert first.startswith("FITS — tightest: ") and f"{format_bytes(b.margin_bytes)} to spare" in first
    elif plan.verdict == "does_not_fit":
        assert first.startswith("DOES NOT FIT — breaks first: ")
        assert f"short by {format_bytes(-b.margin_bytes)}" in first


@pytest.mark.parametrize("seed", SEEDS, ids=lambda p: p.stem)
def test_a_phase_reads_as_its_total_against_the_capacity(seed: Path) -> None:
    plan = _plan(seed)
    text = " ".join(_text(plan).split())
    assert "— needs" not in text
    for c in plan.violations:
        if c.kind != "phase_peak":
            continue
        sentence = V.constraint_sentence(plan, c)
        limit = "limit" if c.device == "host" else "capacity"
        assert f"total {format_bytes(c.required_bytes)} over {limit} {format_bytes(c.available_bytes)}" in sentence
        largest = V.phase_of(plan, c).largest()
        assert f"largest parts: {largest.name} {format_bytes(largest.num_bytes)}" in sentence
        assert sentence in text


@pytest.mark.parametrize("seed", SEEDS, ids=lambda p: p.stem)
def test_broken_constraints_are_listed_in_time_order_from_the_binding_one(seed: Path) -> None:
    plan = _plan(seed)
    ordered = V.in_time_order(plan, plan.violations)
    if ordered:
        assert ordered[0] is plan.binding
    text = " ".join(_text(plan).split())
    positions = [text.index(V.constraint_sentence(plan, c)) for c in ordered] if len(ordered) > 1 else []
    assert positions == sorted(positions)


def test_a_spent_budget_reads_zero_left_never_negative(spent_plan: Plan) -> None:
    negative = [c for c in spent_plan.constraints if c.available_bytes < 0]
    assert {c.kind for c in negative} == {"vllm_startup", "vllm_kv"}, "the case must exercise a spent budget"
    text = " ".join(_text(spent_plan).split())
    assert not NEGATIVE_SIZE.search(text), NEGATIVE_SIZE.search(text)
    startup = next(c for c in negative if c.kind == "vllm_startup")
    assert f"0 left after what loads before it; short by {format_bytes(-startup.margin_bytes)}" in text
    assert "KV cache 0 (the other terms exceed the budget by" in text


@pytest.mark.parametrize("seed", SEEDS, ids=lambda p: p.stem)
def test_no_negative_size_in_any_seed(seed: Path) -> None:
    text = _text(_plan(seed), width=80)
    assert not NEGATIVE_SIZE.search(text)
