"""A chart panel (`model.Panel`) as an inline `<svg>` for the HTML page, drawn by matplotlib.

The drawing is `png.draw_panel`'s, the same as the PNG's; matplotlib writes it as SVG and this
module tags what the page needs: the `<svg class="panel" data-panel=KEY>` root, one
`<g class="bar" data-phase data-peak-bytes>` before each bar's blocks and one
`<g class="seg" data-phase data-label data-bytes>` per block with a `<title>` tooltip listing
the plan components it sums, so the drawing can be checked against the plan document and the
legend can highlight a component. matplotlib names an artist's SVG group by its gid; the gids
are unique per panel (``uid``) and replaced by the tags here.
"""

from __future__ import annotations

import re
from html import escape
from typing import Any

from ..units import format_bytes
from .model import Panel


def _attrs(**kw: object) -> str:
    return " ".join(f'{k.replace("_", "-")}="{escape(str(v))}"' for k, v in kw.items())


class SvgTags:
    """Gids handed to matplotlib while drawing, and the attributes each stands for."""

    def __init__(self, uid: str) -> None:
        self.uid = uid
        self.tags: dict[str, tuple[str, str]] = {}
        """gid → (attributes of its group, a tooltip or "")."""

    def _add(self, kind: str, attrs: str, tip: str = "") -> str:
        gid = f"{self.uid}-{kind}{len(self.tags)}"
        self.tags[gid] = (f'class="{kind}" {attrs}', tip)
        return gid

    def bar(self, bar: Any) -> str:
        return self._add("bar", _attrs(data_phase=bar.phase, data_peak_bytes=bar.peak_bytes))

    def segment(self, bar: Any, s: Any) -> str:
        members = [f"  {n} {format_bytes(b)}" for n, b in s.members] if len(s.members) > 1 else []
        tip = "\n".join([f"{bar.phase}: {s.label} {format_bytes(s.num_bytes)}", *members])
        return self._add("seg", _attrs(data_phase=bar.phase, data_label=s.label, data_bytes=s.num_bytes), tip)

    def apply(self, svg: str) -> str:
        """Every tagged group of matplotlib's SVG given its class, data and tooltip."""
        def tagged(match: re.Match[str]) -> str:
            attrs, tip = self.tags[match.group(1)]
            return f'<g id="{match.group(1)}" {attrs}>' + (f"<title>{escape(tip)}</title>" if tip else "")

        out, count = re.subn(r'<g id="(' + re.escape(self.uid) + r'-(?:bar|seg)\d+)">', tagged, svg)
        assert count == len(self.tags), f"{count} of {len(self.tags)} tagged groups found in the SVG"
        return out


def panel_svg(panel: Panel, width: int, height: int, uid: str) -> str:
    """One panel as an `<svg>` element scaling to its container's width."""
    from .png import draw_panel, new_figure, place, svg_text

    fig = new_figure(width, height, flag="--html")
    tags = SvgTags(uid)
    draw_panel(place(fig, 0, 0, width, height), panel, tags)
    return tags.apply(svg_text(fig, "panel", salt=uid, root_attrs=_attrs(data_panel=panel.key, role="img")))
