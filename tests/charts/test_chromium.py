"""The HTML pages in a real browser: headless Chromium (Debian's `chromium` package, installed
by `.ci/run` when missing) loads them offline and must see no error, no network request, every
panel and bar, and the data block; clicking a legend entry must highlight its blocks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from oomless.charts import write_charts, write_compare_charts
from oomless.charts.run import write_run_chart
from oomless.cli.compare_cmd import build_comparison
from tests.charts.chromium import chromium_path, open_page
from tests.charts.conftest import SEEDS, assert_not_blank, png_pixels

pytestmark = pytest.mark.skipif(
    chromium_path() is None, reason="chromium not installed (Debian: apt-get install -y chromium; .ci/run installs it)"
)

CHECKS = {
    "panels": "document.querySelectorAll('svg.panel').length",
    "bars": "document.querySelectorAll('svg.panel g.bar').length",
    "data": "JSON.parse(document.querySelector(\"script[type='application/json']\").textContent)",
    "window_data": "window.oomlessData",
    "svg_width": "Math.round(document.querySelector('svg.panel').getBoundingClientRect().width)",
    "highlight": """(function () {
        var entry = document.querySelector(".legend li[data-label='vllm.kv_cache']");
        entry.click();
        var segs = Array.prototype.slice.call(document.querySelectorAll('svg .seg'));
        var dim = segs.filter(function (r) { return r.classList.contains('dim'); }).length;
        var lit = segs.filter(function (r) { return r.getAttribute('data-label') === 'vllm.kv_cache'; });
        var litDim = lit.filter(function (r) { return r.classList.contains('dim'); }).length;
        entry.click();
        var after = document.querySelectorAll('svg .seg.dim').length;
        return {dim: dim, total: segs.length, lit: lit.length, litDim: litDim, after: after};
    })()""",
}


def _clean(report: Any, page: Path, min_inked: float = 0.05) -> None:
    assert report.errors == []
    assert report.requests == [page.resolve().as_uri()]  # the page itself, nothing else
    size, _ = png_pixels(report.screenshot_png)
    assert size == (1400, 1000)
    assert_not_blank(report.screenshot_png, min_inked=min_inked)


def _highlight_works(value: dict[str, int]) -> None:
    assert value["lit"] > 0 and value["litDim"] == 0
    assert value["dim"] == value["total"] - value["lit"]
    assert value["after"] == 0


def test_plan_page_renders_without_errors(tmp_path: Path, documents: dict[str, Any]) -> None:
    doc = documents["s0-before"]
    page = tmp_path / "plan.html"
    write_charts(doc, html=page, png=None)
    report = open_page(page, CHECKS)
    _clean(report, page)
    assert report.values["data"] == report.values["window_data"] == json.loads(json.dumps(doc))
    assert report.values["panels"] == len(doc["gpu"]["devices"]) + 1
    phases = sum(len(d["phases"]) for d in doc["gpu"]["devices"]) + len(doc["host"]["phases"])
    assert report.values["bars"] == phases
    assert report.values["svg_width"] > 1000  # the panel scales to the page
    _highlight_works(report.values["highlight"])


def test_compare_page_renders_without_errors(tmp_path: Path) -> None:
    comparison = build_comparison(SEEDS / "s1-before.yaml", SEEDS / "s1-after.yaml")
    page = tmp_path / "compare.html"
    write_compare_charts(comparison, html=page, png=None)
    report = open_page(page, CHECKS)
    _clean(report, page)
    assert report.values["data"] == comparison
    assert report.values["panels"] == 8  # (train, actor+vllm, rollout, host) × (before, after)
    _highlight_works(report.values["highlight"])


def test_run_page_renders_without_errors(tmp_path: Path) -> None:
    records = [{"step": s, "phase": p, "peak_bytes": (s + 10) * 2**30, "planned_bytes": 20 * 2**30}
               for s in range(12) for p in ("rollout", "train")]
    page = tmp_path / "run.html"
    write_run_chart(records, html=page)
    lines = "document.querySelectorAll('svg.run g[id^=\"measured:\"], svg.run g[id^=\"planned:\"]').length"
    report = open_page(page, {"lines": lines, "data": CHECKS["data"]})
    _clean(report, page, min_inked=0.01)  # thin lines on white
    assert report.values["lines"] == 4  # measured and planned, for two phases
    assert report.values["data"] == records


def test_the_browser_check_sees_errors_and_fetches(tmp_path: Path) -> None:
    """The checks above are not vacuous: a script error, a console error and a fetch are seen
    (the fetch goes to a closed local port, never to the network)."""
    page = tmp_path / "bad.html"
    page.write_text('<!DOCTYPE html><html><body><img src="http://127.0.0.1:9/x.png">'
                    '<script>console.error("boom"); undefinedFunction();</script></body></html>', encoding="utf-8")
    report = open_page(page, {})
    assert any("boom" in e for e in report.errors)
    assert any("undefinedFunction" in e for e in report.errors)
    assert "http://127.0.0.1:9/x.png" in report.requests
