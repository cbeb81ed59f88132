"""The HTML pages: self-contained, and their embedded data is the plan's JSON document."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from oomless.charts import write_charts, write_compare_charts
from tests.charts.conftest import EXTERNAL, SEEDS, parse_html
from tests.cli.conftest import run_oomless


def _embedded(path: Path, element_id: str) -> Any:
    return json.loads(parse_html(path.read_text(encoding="utf-8")).scripts[element_id])


def test_plan_html_embeds_the_plan_json_printed_by_the_cli(tmp_path: Path) -> None:
    page = tmp_path / "plan.html"
    done = run_oomless("plan", str(SEEDS / "s1-after.yaml"), "--json", "--html", str(page))
    assert done.returncode == 0, done.stderr
    assert _embedded(page, "oomless-plan") == json.loads(done.stdout)


def test_compare_html_embeds_the_comparison_printed_by_the_cli(tmp_path: Path) -> None:
    page = tmp_path / "compare.html"
    done = run_oomless("compare", str(SEEDS / "s0-before.yaml"), str(SEEDS / "s0-after.yaml"), "--json", "--html", str(page))
    assert done.returncode == 0, done.stderr
    assert _embedded(page, "oomless-compare") == json.loads(done.stdout)


def test_drawn_blocks_add_up_to_the_embedded_phase_peaks(tmp_path: Path, documents: dict[str, Any]) -> None:
    page = tmp_path / "plan.html"
    write_charts(documents["s1-before"], html=page, png=None)
    parsed = parse_html(page.read_text(encoding="utf-8"))
    doc = json.loads(parsed.scripts["oomless-plan"])
    drawn: dict[str, list[int]] = defaultdict(list)
    panel = None
    for tag, attrs in parsed.elements:
        if tag == "svg" and attrs.get("data-panel"):
            panel = attrs["data-panel"]
        if tag == "g" and attrs.get("class") == "bar":
            drawn[panel].append(int(attrs["data-peak-bytes"]))
        if attrs.get("class") == "seg":
            drawn[panel][-1] -= int(attrs["data-bytes"])
    expected = {f"gpu:{d['role']}": d["phases"] for d in doc["gpu"]["devices"]} | {"host": doc["host"]["phases"]}
    assert set(drawn) == set(expected)
    for key, phases in expected.items():
        assert drawn[key] == [0] * len(phases), key  # each bar's blocks sum to its peak


def test_pages_fetch_nothing(tmp_path: Path, documents: dict[str, Any]) -> None:
    write_charts(documents["s2-before"], html=tmp_path / "plan.html", png=None)
    text = (tmp_path / "plan.html").read_text(encoding="utf-8")
    assert not EXTERNAL.search(text)
    tags = parse_html(text).elements
    assert not [a for t, a in tags if t in ("script", "img", "iframe", "link") and (a.get("src") or a.get("href"))]


def test_embedded_json_cannot_close_its_script_element(tmp_path: Path, documents: dict[str, Any]) -> None:
    doc = json.loads(json.dumps(documents["s3-after"]))
    doc["warnings"] = ["</script><script>alert(1)</script> & <!-- done"]
    write_charts(doc, html=tmp_path / "x.html", png=None)
    text = (tmp_path / "x.html").read_text(encoding="utf-8")
    assert text.count("</script>") == 2  # the JSON block's and the inline script's own
    assert _embedded(tmp_path / "x.html", "oomless-plan") == doc


def test_compare_page_names_the_differences(tmp_path: Path) -> None:
    page = tmp_path / "c.html"
    from oomless.cli.compare_cmd import build_comparison

    comparison = build_comparison(SEEDS / "s0-before.yaml", SEEDS / "s0-after.yaml")
    write_compare_charts(comparison, html=page, png=None)
    text = page.read_text(encoding="utf-8")
    for needle in ("spec fields that differ", "batch.micro_batch_size", "rollout.gpu_memory_utilization",
                   "peak per phase", "vllm.kv_cache", "DOES NOT FIT", "FITS"):
        assert needle in text
