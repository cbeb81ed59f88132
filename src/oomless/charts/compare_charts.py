"""Charts of a comparison (`compare.compare_documents`): two plans side by side.

Both plans share one palette (a component has one colour on both sides) and each row of panels
one y scale, so bar heights compare by eye. The page and the PNG name the differences that
the comparison document lists: verdicts, binding constraints, spec fields, peaks, components.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import png as P
from .compare import binding_line, headline, show_value, signed_bytes, summary_lines, verdict_word
from .model import LegendEntry, Panel, PlanChart, aligned_rows, legend, palette_for, plan_chart, size_label

NUM_HTML_COMPONENTS = 15


@dataclass(frozen=True)
class CompareCharts:
    before: PlanChart
    after: PlanChart
    rows: list[tuple[Panel, Panel]]
    legend: tuple[LegendEntry, ...]


def compare_charts(comparison: dict[str, Any]) -> CompareCharts:
    before, after = comparison["before"]["plan"], comparison["after"]["plan"]
    palette = palette_for([before, after])
    b, a = plan_chart(before, palette), plan_chart(after, palette)
    return CompareCharts(b, a, aligned_rows(b, a), legend(palette, [b, a]))


def shared_title(charts: CompareCharts) -> str:
    b, a = charts.before.title, charts.after.title
    return b if b == a else f"{b}  →  {a}"


def _side_head(comparison: dict[str, Any], side: str) -> str:
    fits = comparison["differences"]["verdict"][side]
    return f"{side}: {comparison[side]['spec']} — {verdict_word(fits)}"


def _differences(comparison: dict[str, Any]) -> dict[str, Any]:
    """What `compare.html.j2` shows under "What changed": each side's verdict and binding
    constraint, the spec fields that differ, each phase's peak, the components that moved most."""
    from .html import Table

    d = comparison["differences"]
    verdicts = []
    for side in ("before", "after"):
        b = d["binding"][side]
        verdicts.append((f"{side}: {verdict_word(b['fits'])} — {binding_line(b)}", b["fits"]))
    fields = Table(["field", "before", "after"], [[r["field"], show_value(r["before"]), show_value(r["after"])]
                                                  for r in d["spec_fields"]])
    capacity = {s: comparison[s]["plan"]["gpu"]["capacity_bytes"] for s in ("before", "after")}

    def size(n: int | None) -> str:
        return "—" if n is None else size_label(n)

    rows, bad = [], []
    for r in d["phase_peaks"]:
        where = f"{r['device_role']} GPU" if r["device"] == "gpu" else "host"
        rows.append([where, r["phase"], size(r["before_bytes"]), size(r["after_bytes"]), signed_bytes(r["delta_bytes"])])
        bad.append(r["device"] == "gpu" and (r["after_bytes"] or 0) > capacity["after"])
    peaks = Table(["device", "phase", "before", "after", "Δ"], rows, {2, 3, 4}, bad)
    rows = [[r["name"], size_label(r["before_bytes"]), size_label(r["after_bytes"]), signed_bytes(r["delta_bytes"])]
            for r in d["components"][:NUM_HTML_COMPONENTS]]
    components = Table(["component", "before", "after", "Δ"], rows, {1, 2, 3})
    return {"verdicts": verdicts, "spec_fields": fields, "phase_peaks": peaks, "components": components}


def compare_html(comparison: dict[str, Any], charts: CompareCharts) -> str:
    from .html import page, panel_grid, plan_tables

    before, after = comparison["before"], comparison["after"]
    return page(
        "compare.html.j2", f"oomless compare — {before['spec']} → {after['spec']}", "oomless-compare", comparison,
        after["plan"]["oomless_version"], before=before["spec"], after=after["spec"], subtitle=shared_title(charts),
        heads=[_side_head(comparison, s) for s in ("before", "after")], grid=panel_grid(charts.rows, "c"),
        legend_entries=charts.legend, before_tables=plan_tables(before["plan"]), after_tables=plan_tables(after["plan"]),
        **_differences(comparison),
    )


def compare_png_size(charts: CompareCharts) -> tuple[int, int]:
    gpu_rows = len(charts.rows) - 1
    height = P.COMPARE_HEADER_PX + gpu_rows * P.COMPARE_GPU_ROW_PX + P.COMPARE_HOST_ROW_PX + P.COMPARE_BOTTOM_PX
    return P.COMPARE_WIDTH_PX, height


def _text_block(fig: Any, x: float, y: float, title: str, lines: list[str]) -> None:
    fig.text(x / fig.bbox.width, 1 - y / fig.bbox.height, title, fontsize=P.FONT_PT + 1.5, fontweight="bold",
             color=P.INK, va="top")
    fig.text(x / fig.bbox.width, 1 - (y + 22) / fig.bbox.height, "\n".join(lines), fontsize=P.FONT_PT + 1,
             color=P.INK, va="top", linespacing=1.45)


def compare_png(comparison: dict[str, Any], charts: CompareCharts) -> bytes:
    """Before on the left, after on the right; one row per device role, then host RAM; at the
    bottom the legend and the differences."""
    width, height = compare_png_size(charts)
    fig = P.new_figure(width, height)
    first, second = headline(comparison)
    d = comparison["differences"]
    P.header(fig, [
        (shared_title(charts), P.INK, 12, "bold"),
        (first, P.verdict_colour(d["verdict"]["before"]), 9.5, "bold"),
        (second, P.verdict_colour(d["verdict"]["after"]), 9.5, "bold"),
    ])
    column = width / 2
    y = P.COMPARE_HEADER_PX
    for before, after in charts.rows:
        row_height = P.COMPARE_HOST_ROW_PX if before.key == "host" else P.COMPARE_GPU_ROW_PX
        for k, panel in enumerate((before, after)):
            P.draw_panel(P.place(fig, k * column, y, column, row_height), panel)
        y += row_height
    for k, side in enumerate(("before", "after")):
        fig.text((k * column + 12) / width, 1 - (P.COMPARE_HEADER_PX - 14) / height, side.upper(),
                 fontsize=11, fontweight="bold", color="#555555")
    legend_width = width * 0.42
    P.draw_legend(fig, charts.legend, 12, y + 16, legend_width, P.COMPARE_BOTTOM_PX - 28, 2)
    fields, changes = summary_lines(comparison)
    _text_block(fig, legend_width + 40, y + 18, "Spec fields that differ", fields)
    _text_block(fig, legend_width + 40 + (width - legend_width - 40) / 2, y + 18,
                "What changed (per GPU, largest in any phase)", changes)
    return P.png_bytes(fig)
