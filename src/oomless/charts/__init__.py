"""Charts of plans: one plan (`oomless plan --html/--png`), two plans side by side
(`oomless compare`), and a run's measured against planned peaks (`run.py`).

`model` turns plan documents into panels of stacked bars (pure); `png` draws them with
matplotlib (the `charts` extra, imported only when a chart is asked for) as PNG and as the
inline SVG that `svg` tags and `html` places in a self-contained page (Jinja2 templates in
`templates/`, autoescaped). Paths are checked (`files`) before anything is drawn.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .files import check_outputs, write_atomically


def write_charts(document: dict[str, Any], html: Path | None, png: Path | None, inputs: Iterable[Path] = ()) -> None:
    """Draw one plan document (`planner.report.plan_to_dict`) to the files asked for.

    ``inputs`` are files the charts must never replace (the spec the plan came from)."""
    check_outputs({"--html": html, "--png": png}, inputs)
    from .model import plan_chart

    chart = plan_chart(document)
    if html is not None:
        from .html import plan_html

        write_atomically(Path(html), plan_html(document, chart).encode("utf-8"))
    if png is not None:
        from .png import plan_png

        write_atomically(Path(png), plan_png(chart))


def write_compare_charts(comparison: dict[str, Any], html: Path | None, png: Path | None, inputs: Iterable[Path] = ()) -> None:
    """Draw a comparison document (`compare.compare_documents`) to the files asked for."""
    check_outputs({"--html": html, "--png": png}, inputs)
    from .compare_charts import compare_charts

    charts = compare_charts(comparison)
    if html is not None:
        from .compare_charts import compare_html

        write_atomically(Path(html), compare_html(comparison, charts).encode("utf-8"))
    if png is not None:
        from .compare_charts import compare_png

        write_atomically(Path(png), compare_png(comparison, charts))
