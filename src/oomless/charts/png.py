"""Draw charts (`model.PlanChart`) with matplotlib: PNG through the Agg canvas, and the HTML
page's inline SVG from the same drawing (`svg_text`, tagged by `svg.panel_svg`).

matplotlib is the optional `charts` extra and is imported only here, inside the functions, so
planning never loads it. No pyplot: each figure is its own `Figure` on a `FigureCanvasAgg`, so
nothing global changes and no display is needed. Sizes are in pixels at `DPI`; every panel is
placed at an exact pixel rectangle, so the PNG's size is a function of the layout alone.
"""

from __future__ import annotations

from io import BytesIO
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from ..units import GiB
from .model import LegendEntry, Panel, PlanChart, segment_text, size_label

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

DPI = 100
FONT_PT = 7.5
BAR_WIDTH = 0.6
"""Bar width in phase slots; the rest leaves room for vLLM's bracket."""
RED, GREY, INK = "#c0392b", "#8a8a8a", "#222222"
AXES_MARGIN_PX = (62, 130, 64, 34)
"""left, right, top, bottom: room for tick labels, the panel's title and note, phase names."""
PLAN_WIDTH_PX, PLAN_HEADER_PX, PLAN_GPU_ROW_PX, PLAN_BOTTOM_PX = 1300, 100, 450, 400
COMPARE_WIDTH_PX, COMPARE_HEADER_PX, COMPARE_GPU_ROW_PX, COMPARE_HOST_ROW_PX, COMPARE_BOTTOM_PX = 1800, 150, 450, 350, 400


def text_colour(fill: str) -> str:
    """Black or white, whichever reads better on ``fill`` (ITU-R BT.601 luma)."""
    r, g, b = (int(fill[i : i + 2], 16) for i in (1, 3, 5))
    return INK if 0.299 * r + 0.587 * g + 0.114 * b > 140 else "#ffffff"


def line_offsets(panel: Panel) -> list[float]:
    """Vertical placement of each line's label, in lines of text relative to the line: centred
    when alone; with two lines, the soft one's label above and the hard one's below."""
    if len(panel.lines) < 2:
        return [0.0] * len(panel.lines)
    return [0.5 if line.hard else -0.5 - line.label.count("\n") for line in panel.lines]


def new_figure(width_px: int, height_px: int, flag: str = "--png") -> Figure:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        kind = "HTML" if flag == "--html" else "PNG"
        raise InputError(flag, f"{kind} charts need matplotlib: pip install 'oomless[charts]'") from None
    fig = Figure(figsize=(width_px / DPI, height_px / DPI), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def png_bytes(fig: Figure) -> bytes:
    out = BytesIO()
    fig.savefig(out, format="png", dpi=DPI, facecolor="white")
    return out.getvalue()


SVG_HASH_SALT = "oomless"
"""matplotlib names the SVG's clip paths and markers from a hash; a fixed salt makes the same
chart the same bytes."""


def svg_text(fig: Figure, css_class: str, salt: str = SVG_HASH_SALT, root_attrs: str = "") -> str:
    """The figure as an inline `<svg>` element scaled by CSS (no fixed width/height, the pixel
    layout kept as its viewBox). Text stays text (`svg.fonttype: none`: selectable, no glyph
    definitions whose ids would repeat across the panels of a page); ``salt`` makes the ids
    matplotlib derives (clip paths, hatches) unique on the page and the same for the same chart."""
    import re

    from matplotlib import rc_context

    out = BytesIO()
    with rc_context({"svg.hashsalt": salt, "svg.fonttype": "none"}):
        fig.savefig(out, format="svg", dpi=DPI, facecolor="white", metadata={"Date": None})
    text = out.getvalue().decode("utf-8")
    start = text.index("<svg")
    end = text.index(">", start)
    root = re.sub(r'\s(?:width|height)="[^"]*"', "", text[start:end])
    return f'{root} class="{css_class}"{" " + root_attrs if root_attrs else ""}{text[end:]}'


def place(fig: Figure, x: float, y: float, w: float, h: float, margins: tuple[int, int, int, int] = AXES_MARGIN_PX) -> Axes:
    """Axes at pixel rectangle (x, y from the figure's top-left; w, h), ``margins`` (left,
    right, top, bottom) inside it."""
    width, height = fig.bbox.width, fig.bbox.height
    left, right, top, bottom = margins
    return fig.add_axes((
        (x + left) / width, 1 - (y + h - bottom) / height, (w - left - right) / width, (h - top - bottom) / height,
    ))


def _px(ax: Axes) -> tuple[float, float]:
    box = ax.get_position()
    return box.width * ax.figure.bbox.width, box.height * ax.figure.bbox.height


def _points(x_px: float, y_px: float) -> tuple[float, float]:
    """A pixel offset at `DPI` in points: points scale with the figure when matplotlib writes
    SVG (at 72 dpi), pixels would not."""
    return x_px * 72 / DPI, y_px * 72 / DPI


def _heading(ax: Axes, title: str, note: str) -> None:
    ax.annotate(title, (0, 1), xycoords="axes fraction", xytext=_points(-50, 44), textcoords="offset points",
                fontsize=FONT_PT + 2, fontweight="bold", color=INK)
    if note:
        ax.annotate(note, (0, 1), xycoords="axes fraction", xytext=_points(-50, 26), textcoords="offset points",
                    fontsize=FONT_PT, color="#555555")


def _bar(ax: Axes, i: int, bar: Any, width_px: float, px_per_gib: float, tags: Any = None) -> None:
    bottom = 0.0
    font_px = FONT_PT * DPI / 72
    if tags is not None:  # an empty, invisible patch whose SVG group carries the bar's data
        from matplotlib.patches import Rectangle

        ax.add_patch(Rectangle((i - BAR_WIDTH / 2, 0), BAR_WIDTH, 0, fill=False, linewidth=0, gid=tags.bar(bar)))
    for s in bar.segments:
        height = s.num_bytes / GiB
        drawn = ax.bar(i, height, BAR_WIDTH, bottom, color=s.colour, edgecolor="white", linewidth=0.6,
                       hatch="///" if s.hatched else None)
        if tags is not None:
            drawn.patches[0].set_gid(tags.segment(bar, s))
        lines = segment_text(s, width_px, height * px_per_gib, font_px)
        if lines:
            box = {"facecolor": "white", "edgecolor": "none", "alpha": 0.75, "pad": 0.6} if s.hatched else None
            ax.text(i, bottom + height / 2, "\n".join(lines), ha="center", va="center", fontsize=FONT_PT,
                    color=INK if s.hatched else text_colour(s.colour), linespacing=1.1, bbox=box)
        bottom += height
    peak = bar.peak_bytes / GiB
    ax.annotate(size_label(bar.peak_bytes), (i, peak), xytext=_points(0, 4), textcoords="offset points", ha="center",
                fontsize=FONT_PT + 0.5, fontweight="bold", color=RED if bar.over else INK)
    if bar.mark:
        ax.annotate(bar.mark, (i, peak), xytext=_points(0, 18), textcoords="offset points", ha="center", fontsize=FONT_PT,
                    style="italic", color=RED if bar.mark == "binding" else "#b35900")
    if bar.bracket:
        x = i + BAR_WIDTH / 2 + 0.03
        lo, hi = bar.bracket.bottom_bytes / GiB, bar.bracket.top_bytes / GiB
        ax.plot([x - 0.02, x, x, x - 0.02], [hi, hi, lo, lo], color="#7a3d63", linewidth=1.1)
        if (hi - lo) * px_per_gib > len(bar.bracket.label) * font_px * 0.6:
            ax.text(x + 0.05, (lo + hi) / 2, bar.bracket.label, rotation=90, ha="center", va="center",
                    fontsize=FONT_PT - 0.5, color="#7a3d63")


def draw_panel(ax: Axes, panel: Panel, tags: Any = None) -> None:
    """One panel's bars, limit lines and labels; ``tags`` (`svg.SvgTags`) names each bar and
    block for the SVG."""
    _heading(ax, panel.title, panel.note)
    if not panel.bars:
        ax.set_axis_off()
        return
    n, ymax = len(panel.bars), panel.ymax_bytes / GiB
    width_px, height_px = _px(ax)
    ax.set_xlim(-0.5, n - 0.5)
    ax.set_ylim(0, ymax)
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(nbins=6, steps=[1, 2, 2.5, 5, 10]))
    ax.set_ylabel("GiB", fontsize=FONT_PT + 1, color="#555555")
    ax.tick_params(labelsize=FONT_PT + 0.5, colors="#444444")
    ax.grid(axis="y", color="#e6e6e6", linewidth=0.8)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    for i, bar in enumerate(panel.bars):
        _bar(ax, i, bar, width_px / n * BAR_WIDTH, height_px / ymax, tags)
    for line, offset in zip(panel.lines, line_offsets(panel)):
        colour = RED if line.hard else GREY
        ax.axhline(line.num_bytes / GiB, color=colour, linewidth=1.4, linestyle=(0, (6, 4)) if line.hard else ":")
        va = "center" if offset == 0 else "top" if offset > 0 else "bottom"
        ax.annotate(line.label, (1, line.num_bytes / GiB), xycoords=("axes fraction", "data"), xytext=_points(6, 0),
                    textcoords="offset points", ha="left", va=va, fontsize=FONT_PT, color=colour, linespacing=1.1,
                    annotation_clip=False)
    ax.set_xticks(range(n), [b.phase for b in panel.bars])
    for label, bar in zip(ax.get_xticklabels(), panel.bars):
        if bar.mark == "binding":
            label.set_color(RED)
            label.set_fontweight("bold")


def draw_legend(fig: Figure, entries: tuple[LegendEntry, ...], x: float, y: float, w: float, h: float, columns: int) -> None:
    from matplotlib.patches import Rectangle

    ax = fig.add_axes((x / fig.bbox.width, 1 - (y + h) / fig.bbox.height, w / fig.bbox.width, h / fig.bbox.height))
    ax.set_axis_off()
    ax.set_xlim(0, w)
    ax.set_ylim(h, 0)
    items: list[tuple[str, LegendEntry | None]] = []
    group = None
    for e in entries:
        if e.group_label != group:
            group = e.group_label
            items.append((group, None))
        items.append((e.label, e))
    rows = -(-len(items) // columns) + 1
    row_px, col_px = min(18.0, (h - 8) / rows), w / columns
    for (text, entry), (col, row) in zip(items, legend_cells(items, rows)):
        cx, cy = col * col_px, 4 + row * row_px
        if entry is None:
            ax.text(cx, cy + row_px / 2, text, va="center", fontsize=FONT_PT + 0.5, fontweight="bold", color=INK)
            continue
        ax.add_patch(Rectangle((cx + 4, cy + 3), 14, row_px - 6, facecolor=entry.colour, edgecolor="white",
                               hatch="///" if entry.hatched else None, linewidth=0.5))
        ax.text(cx + 24, cy + row_px / 2, text, va="center", fontsize=FONT_PT + 0.5, color=INK)


def legend_cells(items: list[tuple[str, LegendEntry | None]], rows: int) -> list[tuple[int, int]]:
    """(column, row) of each legend item, top to bottom then left to right; a group's heading
    never ends a column (it moves to the next one with its entries)."""
    out, col, row = [], 0, 0
    for _, entry in items:
        if row >= rows or entry is None and row >= rows - 1:
            col, row = col + 1, 0
        out.append((col, row))
        row += 1
    return out


def header(fig: Figure, lines: list[tuple[str, str, float, str]]) -> None:
    """Text lines at the top: (text, colour, size in pt, weight)."""
    y = 14.0
    for text, colour, size, weight in lines:
        fig.text(16 / fig.bbox.width, 1 - (y + size * DPI / 72) / fig.bbox.height, text, fontsize=size,
                 color=colour, fontweight=weight)
        y += size * DPI / 72 * 1.6


def verdict_colour(fits: bool) -> str:
    return "#1e7b34" if fits else RED


def plan_png(chart: PlanChart) -> bytes:
    """The plan: one row per device group, then host RAM beside the legend."""
    rows = len(chart.gpu_panels)
    height = PLAN_HEADER_PX + rows * PLAN_GPU_ROW_PX + PLAN_BOTTOM_PX
    fig = new_figure(PLAN_WIDTH_PX, height)
    header(fig, [(chart.title, INK, 12, "bold"), (chart.verdict, verdict_colour(chart.fits), 9.5, "bold")])
    for i, panel in enumerate(chart.gpu_panels):
        draw_panel(place(fig, 0, PLAN_HEADER_PX + i * PLAN_GPU_ROW_PX, PLAN_WIDTH_PX, PLAN_GPU_ROW_PX), panel)
    top = PLAN_HEADER_PX + rows * PLAN_GPU_ROW_PX
    host_width = PLAN_WIDTH_PX * 0.45
    draw_panel(place(fig, 0, top, host_width, PLAN_BOTTOM_PX), chart.host_panel)
    draw_legend(fig, chart.legend, host_width + 20, top + 30, PLAN_WIDTH_PX - host_width - 30, PLAN_BOTTOM_PX - 40, 2)
    return png_bytes(fig)


def plan_png_size(chart: PlanChart) -> tuple[int, int]:
    return PLAN_WIDTH_PX, PLAN_HEADER_PX + len(chart.gpu_panels) * PLAN_GPU_ROW_PX + PLAN_BOTTOM_PX
