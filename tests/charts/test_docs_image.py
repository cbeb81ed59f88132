"""The README's chart (docs/img/s0-compare.*) is the s0 before/after comparison, drawn by

    oomless compare examples/seeds/s0-before.yaml examples/seeds/s0-after.yaml \
        --html docs/img/s0-compare.html --png docs/img/s0-compare.png

(rerun it when the memory model changes; tests/charts/test_png.py draws the same comparison
afresh and checks it)."""

from __future__ import annotations

import json

from tests.charts.conftest import parse_html, png_pixels
from tests.helpers import ROOT

IMG = ROOT / "docs" / "img"


def test_readme_chart_is_the_s0_comparison() -> None:
    size, _ = png_pixels((IMG / "s0-compare.png").read_bytes())
    assert size == (1800, 1350)
    page = parse_html((IMG / "s0-compare.html").read_text(encoding="utf-8"))
    comparison = json.loads(page.scripts["oomless-compare"])
    assert comparison["before"]["spec"] == "examples/seeds/s0-before.yaml"
    assert comparison["after"]["spec"] == "examples/seeds/s0-after.yaml"
