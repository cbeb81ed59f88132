"""The published-figures set: well-formed entries with a source and a quote, results.json and the doc
in step with figures.yaml and with the planner (two entries planned again), and the comparison
rules (`compare`) checked on a hand-made plan."""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import published_figures as pf  # noqa: E402  (scripts/ is not a package)

FIGURES = pf.load_figures()
RESULTS = json.loads(pf.RESULTS.read_text(encoding="utf-8"))
COMPARE = re.compile(r"^(gpu_peak|torch_reserved_peak|torch_reserved:[a-z_]+|vllm:[a-z_]+_bytes)$")
REPLANNED = ("trl-notebook-qlora-qwen2-7b-t4-peak", "swift-ppo-lora-llama3.1-8b")
"""One framework config (TRL, through the adapter) and one spec (PPO), planned again below."""


def _ids(figures: list[dict[str, Any]]) -> list[str]:
    return [f["id"] for f in figures]


def test_ids_are_unique() -> None:
    assert len(set(_ids(FIGURES))) == len(FIGURES)


@pytest.mark.parametrize("figure", FIGURES, ids=_ids(FIGURES))
def test_entry_has_source_quote_and_measurement(figure: dict[str, Any]) -> None:
    source = figure["source"]
    assert source["url"].startswith("https://"), figure["id"]
    assert (source.get("path") and source.get("repo")) or source.get("title"), (
        f"{figure['id']}: name the repository file, or the page's title")
    if "commit" in source:
        assert re.fullmatch(r"[0-9a-f]{40}", source["commit"]), figure["id"]
    assert figure["quote"].strip() and figure["quantity"].strip() and figure["config"].strip()
    assert isinstance(figure["informative"], bool)
    assert figure["measured_gib"] >= 0
    if figure["informative"]:
        assert figure["measured_gib"] > 0 and "plan" in figure and COMPARE.match(figure["compare"])
        assert "excluded" not in figure
    else:
        assert len(figure["excluded"]) > 20, f"{figure['id']}: say why it is excluded"


@pytest.mark.parametrize("figure", [f for f in FIGURES if "plan" in f], ids=_ids([f for f in FIGURES if "plan" in f]))
def test_planned_file_exists_and_carries_its_source(figure: dict[str, Any]) -> None:
    plan = figure["plan"]
    path = pf.FIGURES_DIR / plan["file"]
    assert path.is_file(), path
    assert plan["from"] in ("spec", "swift", "trl", "verl", "easyr1", "openrlhf", "orz", "vlmr1")
    text = path.read_text(encoding="utf-8")
    if plan["file"].startswith("configs/"):
        # Our restatements cite what they restate: the source's path (or notebook) is named.
        assert Path(figure["source"]["path"]).name in text, f"{path.name} does not name its source"
    if plan["from"] == "swift":
        # ms-swift scripts are verbatim copies: the memory comment quoted is in the planned file.
        assert figure["quote"] in text, f"{path.name} lacks the quoted line {figure['quote']!r}"


def test_results_follow_the_figures_file() -> None:
    results = RESULTS["results"]
    assert [r["id"] for r in results] == _ids(FIGURES)
    for figure, result in zip(FIGURES, results):
        assert result["measured_gib"] == pytest.approx(float(figure["measured_gib"]))
        assert result["informative"] == figure["informative"]
        assert (result["command"] is None) == ("plan" not in figure)
        if figure["informative"]:
            assert result["planned_bytes"] and result["problem"] is None, figure["id"]
            expected = 100 * (result["planned_bytes"] / 1024**3 - result["measured_gib"]) / result["measured_gib"]
            assert result["error_pct"] == pytest.approx(expected, abs=0.05)


def test_summary_is_the_median_of_the_rows() -> None:
    scored = [r for r in RESULTS["results"] if r["informative"]]
    summary = RESULTS["summary"]
    assert summary["scored"] == len(scored) >= 8
    assert summary["median_abs_error_pct"] == pytest.approx(
        statistics.median(abs(r["error_pct"]) for r in scored), abs=0.1)  # rows and summary are each rounded to 0.1
    assert summary["whole_gpu"]["count"] + summary["engine_terms"]["count"] == len(scored)


@pytest.mark.parametrize("figure_id", REPLANNED)
def test_results_are_what_the_planner_gives_today(figure_id: str) -> None:
    figure = next(f for f in FIGURES if f["id"] == figure_id)
    stored = next(r for r in RESULTS["results"] if r["id"] == figure_id)
    fresh = pf.evaluate(figure)
    assert fresh.planned_bytes == stored["planned_bytes"], (
        f"{figure_id}: the planner now gives {fresh.planned_bytes}, results.json has "
        f"{stored['planned_bytes']}; run {pf.COMMAND}")


def test_doc_is_rendered_from_results() -> None:
    results = [pf.Result(**r) for r in RESULTS["results"]]
    assert pf.DOC.read_text(encoding="utf-8") == pf.render_doc(FIGURES, results)


def _plan_document() -> dict[str, Any]:
    """A hand-made plan: one train GPU, two phases; 1 GiB = 2**30."""
    g = 2**30
    load = {"name": "load", "peak_bytes": 5 * g,
            "components": {"cuda_context": g // 2, "nccl": g // 4, "policy.weights": 4 * g + g // 4}}
    train = {"name": "train", "peak_bytes": 9 * g,
             "components": {"cuda_context": g // 2, "policy.weights": 4 * g + g // 4,
                            "activations": 4 * g + g // 4}}
    return {"gpu": {"peak_bytes": 9 * g, "phases": [load, train],
                    "devices": [{"role": "train", "phases": [load, train], "peak_bytes": 9 * g}]},
            "vllm": {"cuda_graph_bytes": g}}


def test_compare_rules_on_a_hand_made_plan() -> None:
    g = 2**30
    doc = _plan_document()
    assert pf.planned_bytes(doc, "gpu_peak") == 9 * g
    assert pf.planned_bytes(doc, "torch_reserved:load") == 5 * g - g // 2 - g // 4
    assert pf.planned_bytes(doc, "torch_reserved_peak") == 9 * g - g // 2
    assert pf.planned_bytes(doc, "vllm:cuda_graph_bytes") == g
    for bad in ("torch_reserved:rollout", "nvidia_smi", "vllm:kv_cache_bytes"):
        with pytest.raises((ValueError, KeyError)):
            pf.planned_bytes(doc, bad)


def test_plan_arguments_keep_framework_and_hardware() -> None:
    args = pf.plan_args({"from": "swift", "file": "configs/x.sh", "gpu": "A100-80GB", "gpus_per_node": 4})
    assert args == ["plan", "--from", "swift", "configs/x.sh", "--gpu", "A100-80GB", "--gpus-per-node", "4", "--json"]
    assert pf.plan_args({"from": "spec", "file": "configs/y.yaml"}) == ["plan", "configs/y.yaml", "--json"]
