"""Draw a chart panel (`model.Panel`) as an SVG string: stacked bars, limit lines, marks.

No dependencies; the HTML page inlines the result. Every block is a `<rect class="seg">`
carrying `data-phase`, `data-label` and `data-bytes`, with a `<title>` tooltip listing the plan
components it sums, so the drawing can be checked against the plan document.
"""

from __future__ import annotations

from html import escape

from ..units import GiB, format_bytes
from .model import Bar, Line, Panel, nice_ticks, segment_text, size_label

FONT_PX = 11
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 56, 126, 62, 28
BAR_FRACTION = 0.6
"""Bar width as a fraction of its phase's slot; the rest leaves room for vLLM's bracket."""
RED, GREY, INK = "#c0392b", "#8a8a8a", "#222222"
HATCH_PX = 7


def _attrs(**kw: object) -> str:
    return " ".join(f'{k.rstrip("_").replace("_", "-")}="{escape(str(v))}"' for k, v in kw.items())


def _text(x: float, y: float, text: str, **kw: object) -> str:
    return f"<text {_attrs(x=f'{x:.1f}', y=f'{y:.1f}', **kw)}>{escape(text)}</text>"


def text_colour(fill: str) -> str:
    """Black or white, whichever reads better on ``fill`` (ITU-R BT.601 luma)."""
    r, g, b = (int(fill[i : i + 2], 16) for i in (1, 3, 5))
    return INK if 0.299 * r + 0.587 * g + 0.114 * b > 140 else "#ffffff"


class _Frame:
    """Pixel geometry of one panel."""

    def __init__(self, panel: Panel, width: int, height: int) -> None:
        self.left, self.top = MARGIN_LEFT, MARGIN_TOP
        self.width = width - MARGIN_LEFT - MARGIN_RIGHT
        self.height = height - MARGIN_TOP - MARGIN_BOTTOM
        self.ymax = max(panel.ymax_bytes, 1)
        self.slot = self.width / max(len(panel.bars), 1)
        self.bar_width = min(self.slot * BAR_FRACTION, 150)

    def y(self, num_bytes: float) -> float:
        return self.top + self.height * (1 - num_bytes / self.ymax)

    def bar_x(self, index: int) -> float:
        return self.left + self.slot * index + (self.slot - self.bar_width) / 2 - 6


def _patterns(panel: Panel, uid: str) -> str:
    colours = sorted({s.colour for b in panel.bars for s in b.segments if s.hatched})
    return "".join(
        f'<pattern id="{uid}-h{c[1:]}" patternUnits="userSpaceOnUse" width="{HATCH_PX}" height="{HATCH_PX}" '
        f'patternTransform="rotate(45)"><rect width="{HATCH_PX}" height="{HATCH_PX}" fill="{c}"/>'
        f'<line x1="0" y1="0" x2="0" y2="{HATCH_PX}" stroke="#ffffff" stroke-width="2" stroke-opacity="0.55"/></pattern>'
        for c in colours
    )


def _axes(panel: Panel, f: _Frame) -> list[str]:
    out = []
    for tick in nice_ticks(f.ymax):
        y = f.y(tick)
        out.append(f'<line x1="{f.left}" x2="{f.left + f.width}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e6e6e6"/>')
        out.append(_text(f.left - 6, y + 4, f"{tick / GiB:g}", text_anchor="end", fill="#555"))
    mid = f.top + f.height / 2
    out.append(_text(14, mid, "GiB", text_anchor="middle", fill="#555", transform=f"rotate(-90 14 {mid:.1f})"))
    base = f.y(0)
    out.append(f'<line x1="{f.left}" x2="{f.left + f.width}" y1="{base:.1f}" y2="{base:.1f}" stroke="#555"/>')
    return out


def _bar(bar: Bar, index: int, f: _Frame, uid: str) -> list[str]:
    x, w = f.bar_x(index), f.bar_width
    out = [f'<g class="bar" {_attrs(data_phase=bar.phase, data_peak_bytes=bar.peak_bytes)}>']
    bottom = 0
    for s in bar.segments:
        y0, y1 = f.y(bottom + s.num_bytes), f.y(bottom)
        fill = f"url(#{uid}-h{s.colour[1:]})" if s.hatched else s.colour
        members = [f"  {n} {format_bytes(b)}" for n, b in s.members] if len(s.members) > 1 else []
        tip = "\n".join([f"{bar.phase}: {s.label} {format_bytes(s.num_bytes)}", *members])
        out.append(
            f'<rect class="seg" {_attrs(x=f"{x:.1f}", y=f"{y0:.1f}", width=f"{w:.1f}", height=f"{max(y1 - y0, 0):.2f}", fill=fill, stroke="#ffffff", stroke_width="0.6", data_phase=bar.phase, data_label=s.label, data_bytes=s.num_bytes)}>'
            f"<title>{escape(tip)}</title></rect>"
        )
        lines = segment_text(s, w, y1 - y0, FONT_PX - 1)
        for i, line in enumerate(lines):
            ty = (y0 + y1) / 2 + (i - (len(lines) - 1) / 2) * (FONT_PX * 1.15) + 4
            halo = {"paint_order": "stroke", "stroke": "#ffffff", "stroke_width": "2.5"} if s.hatched else {}
            out.append(_text(x + w / 2, ty, line, text_anchor="middle", font_size=FONT_PX - 1,
                             fill=INK if s.hatched else text_colour(s.colour), pointer_events="none", **halo))
        bottom += s.num_bytes
    top = f.y(bar.peak_bytes)
    colour = RED if bar.over else INK
    out.append(_text(x + w / 2, top - 5, size_label(bar.peak_bytes), text_anchor="middle", font_weight="bold", fill=colour))
    if bar.mark:
        out.append(_text(x + w / 2, top - 5 - FONT_PX * 1.3, bar.mark, text_anchor="middle", font_style="italic",
                         fill=RED if bar.mark == "binding" else "#b35900", class_="mark"))
    if bar.bracket:
        bx, b0, b1 = x + w + 3, f.y(bar.bracket.bottom_bytes), f.y(bar.bracket.top_bytes)
        out.append(f'<path d="M{bx - 2:.1f},{b1:.1f} H{bx:.1f} V{b0:.1f} H{bx - 2:.1f}" fill="none" stroke="#7a3d63" stroke-width="1.2"/>')
        if b0 - b1 > len(bar.bracket.label) * (FONT_PX - 2) * 0.6:
            mid = (b0 + b1) / 2
            out.append(_text(bx + 10, mid, bar.bracket.label, text_anchor="middle", font_size=FONT_PX - 2,
                             fill="#7a3d63", transform=f"rotate(-90 {bx + 10:.1f} {mid:.1f})"))
    weight = "bold" if bar.mark == "binding" else "normal"
    out.append(_text(x + w / 2, f.y(0) + 17, bar.phase, text_anchor="middle", font_weight=weight,
                     fill=RED if bar.mark == "binding" else INK))
    out.append("</g>")
    return out


def line_offsets(panel: Panel) -> list[float]:
    """Vertical placement of each line's label, in lines of text relative to the line: centred
    when alone; with two lines, the soft one's label above and the hard one's below."""
    if len(panel.lines) < 2:
        return [0.0] * len(panel.lines)
    return [0.5 if line.hard else -0.5 - line.label.count("\n") for line in panel.lines]


def _line(line: Line, offset: float, f: _Frame) -> list[str]:
    y, colour = f.y(line.num_bytes), RED if line.hard else GREY
    dash = "6 4" if line.hard else "2 3"
    out = [f'<line class="limit" {_attrs(x1=f.left, x2=f.left + f.width, y1=f"{y:.1f}", y2=f"{y:.1f}", stroke=colour, stroke_width="1.6", stroke_dasharray=dash, data_bytes=line.num_bytes)}/>']
    rows = line.label.split("\n")
    step = FONT_PX * 1.15
    first = y + 4 + (offset - (len(rows) - 1) / 2 if offset == 0 else offset) * step
    for i, row in enumerate(rows):
        out.append(_text(f.left + f.width + 6, first + i * step, row, fill=colour, font_size=FONT_PX - 1))
    return out


def panel_svg(panel: Panel, width: int, height: int, uid: str) -> str:
    """One panel as an `<svg>` element scaling to its container's width."""
    f = _Frame(panel, width, height)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="panel" viewBox="0 0 {width} {height}" '
        f'{_attrs(data_panel=panel.key, font_family="DejaVu Sans, Helvetica, Arial, sans-serif", font_size=FONT_PX, role="img")}>',
        f"<defs>{_patterns(panel, uid)}</defs>",
        _text(8, 18, panel.title, font_weight="bold", font_size=FONT_PX + 2, fill=INK),
    ]
    if panel.note:
        parts.append(_text(8, 36, panel.note, fill="#555", font_size=FONT_PX - 1))
    if not panel.bars:
        parts.append("</svg>")
        return "".join(parts)
    parts += _axes(panel, f)
    for i, bar in enumerate(panel.bars):
        parts += _bar(bar, i, f, uid)
    for line, offset in zip(panel.lines, line_offsets(panel)):
        parts += _line(line, offset, f)
    parts.append("</svg>")
    return "".join(parts)
