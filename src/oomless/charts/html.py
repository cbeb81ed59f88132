"""Self-contained HTML pages from Jinja2 templates (`templates/*.html.j2`, package data).

Every page extends `base.html.j2`: nothing is fetched (no CDN, no fonts, no images), so the
page opens offline. The document a page draws is embedded by Jinja2's `tojson` (HTML-safe) in
`<script type="application/json" id="oomless-plan">` (or `oomless-compare`, `oomless-run`), so
tests and users can check the drawing against it; the small inline script only highlights one
component across bars when its legend entry is clicked.

Autoescaping is on: every string from a spec, a plan or a path (model names, file names,
component names) is escaped by the template. The only markup passed in is matplotlib's SVG
(`svg.panel_svg`, `png.svg_text`), marked safe here. This module prepares plain rows of text;
the templates lay them out. Jinja2 is imported on the first page rendered, never by planning.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from ..units import format_bytes
from .model import Panel, PlanChart
from .svg import panel_svg

if TYPE_CHECKING:
    from jinja2 import Environment

PANEL_WIDTH_PX = {1: 1200, 2: 820}
"""viewBox width of a panel by columns on the page: sets the text size relative to the bars."""
GPU_PANEL_HEIGHT_PX, HOST_PANEL_HEIGHT_PX = 440, 340
NUM_TABLE_COMPONENTS = 5
JSON_INDENT = 1


@lru_cache(maxsize=1)
def _environment() -> Environment:
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(
        loader=PackageLoader("oomless.charts", "templates"), autoescape=True, undefined=StrictUndefined,
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
    )
    # `tojson` keeps the document's key order and its text as written (the default sorts keys)
    env.policies["json.dumps_kwargs"] = {"indent": JSON_INDENT, "ensure_ascii": False}
    return env


def render(template: str, **context: Any) -> str:
    """``template`` (a file name under `templates/`) filled with ``context``, escaped."""
    return _environment().get_template(template).render(**context)


def safe_svg(svg: str) -> Any:
    """matplotlib's SVG, inserted into a page as it is (`markupsafe.Markup`)."""
    from markupsafe import Markup

    return Markup(svg)


@dataclass(frozen=True)
class Table:
    """One HTML table: text cells, the columns right-aligned as numbers, the rows shown red."""

    head: Sequence[str]
    rows: Sequence[Sequence[str]]
    numeric: Collection[int] = frozenset()
    bad: Sequence[bool] = field(default_factory=tuple)


@dataclass(frozen=True)
class PanelGrid:
    cols: int
    svgs: list[Any]


def panel_grid(rows: list[tuple[Panel, ...]], uid: str) -> PanelGrid:
    """Every panel of ``rows`` as inline SVG, row by row, on a grid as wide as the widest row."""
    cols = max(len(r) for r in rows)
    svgs = []
    for i, row in enumerate(rows):
        for j, panel in enumerate(row):
            height = HOST_PANEL_HEIGHT_PX if panel.key == "host" else GPU_PANEL_HEIGHT_PX
            svgs.append(safe_svg(panel_svg(panel, PANEL_WIDTH_PX[cols], height, uid=f"{uid}{i}-{j}")))
    return PanelGrid(cols, svgs)


def _pct(part: int, whole: int | None) -> str:
    return f"{100 * part / whole:.0f} %" if whole else "—"


def _largest(components: dict[str, int]) -> str:
    top = sorted(components.items(), key=lambda nb: -nb[1])[:NUM_TABLE_COMPONENTS]
    return ", ".join(f"{n} {format_bytes(b)}" for n, b in top) or "—"


def plan_tables(doc: dict[str, Any]) -> list[tuple[str, Table]]:
    """(heading, table) per device group and host: each phase's peak and largest components;
    vLLM's budget; every check."""
    out, capacity = [], doc["gpu"]["capacity_bytes"]
    for device in doc["gpu"]["devices"]:
        rows = [[p["name"], format_bytes(p["peak_bytes"]), _pct(p["peak_bytes"], capacity), _largest(p["components"])]
                for p in device["phases"]]
        out.append((f"{device['role']} GPUs", Table(["phase", "peak", "of GPU", "largest components"], rows, {1, 2},
                                                     [p["peak_bytes"] > capacity for p in device["phases"]])))
    host, limit = doc["host"], doc["host"]["limit_bytes"]
    rows = [[p["name"], format_bytes(p["peak_bytes"]), _pct(p["peak_bytes"], limit), _largest(p["components"])]
            for p in host["phases"]]
    out.append(("host RAM per node", Table(["phase", "peak", "of limit", "components"], rows, {1, 2})))
    if doc.get("vllm"):
        v = doc["vllm"]
        keys = ("requested_bytes", "weight_bytes", "profile_activation_bytes", "non_torch_bytes", "cuda_graph_bytes", "kv_cache_bytes")
        rows = [[k.removesuffix("_bytes").replace("_", " "), format_bytes(v[k])] for k in keys]
        rows.append(["KV cache tokens", f"{v['kv_cache_tokens']:,} (max concurrency {v['max_concurrency']})"])
        out.append(("vLLM budget per GPU", Table(["", "bytes"], rows, {1})))
    rows = [[c["phase"], c["device"] + (f" ({c['device_role']})" if c["device"] == "gpu" else ""), c["message"],
             format_bytes(c["required_bytes"]), format_bytes(c["available_bytes"]), format_bytes(c["margin_bytes"])]
            for c in doc["constraints"]]
    out.append(("every check", Table(["phase", "device", "check", "needs", "has", "margin"], rows, {3, 4, 5},
                                     [not c["ok"] for c in doc["constraints"]])))
    return out


def _number(value: float) -> str:
    return f"{value:,}" if isinstance(value, int) or float(value).is_integer() else f"{value:g}"


def _inputs_table(inputs: list[dict[str, Any]]) -> Table:
    rows = []
    for i in inputs:
        how = f"{i['formula']['expression']} = {i['formula']['filled']}" if i.get("formula") else ""
        rows.append([i["symbol"], _number(i["value"]), i["meaning"], how, i.get("source", "")])
    return Table(["symbol", "value", "meaning", "computed as", "source"], rows, {1})


def _formula_lines(f: dict[str, Any]) -> list[str]:
    """The expression, its inputs filled in (when that reads differently), the value in bytes."""
    value = _number(f["value"])
    filled = [f"= {f['filled']}"] if f["filled"] not in (f["expression"], value) else []
    return [f"= {f['expression']}", *filled, f"= {value} B"]


def _checks_table(checks: list[dict[str, Any]]) -> Table:
    rows, bad = [], []
    for c in checks:
        where = f"{c['device_role']} GPU" if c["device"] == "gpu" else "host"
        cells = [" = ".join(dict.fromkeys([c[k]["expression"], c[k]["filled"], _number(c[k]["value"])])) + " B"
                 for k in ("required", "available")]
        rows.append([c["phase"], where, c["message"], *cells, f"{c['required']['source']} / {c['available']['source']}"])
        bad.append(c["required_bytes"] > c["available_bytes"])
    return Table(["phase", "device", "check", "needs", "has", "sources"], rows, bad=bad)


def explain_view(explained: dict[str, Any]) -> dict[str, Any]:
    """"Where the numbers come from" (`oomless.explain.to_dicts`) as items for `_explain.html.j2`:
    per device group and phase a heading, then each component's formula, its inputs filled in,
    the result and the source; a component already shown in an earlier phase of the group with
    the same formula is one line ("same"). Then every check's table."""
    items: list[dict[str, Any]] = []
    heading, shown = None, {}
    for e in explained["components"]:
        where = f"{e['group']} GPUs" if e["device"] == "gpu" else "host RAM per node"
        if (where, e["phase"]) != heading:
            heading = (where, e["phase"])
            items.append({"kind": "heading", "where": where, "phase": e["phase"]})
        f = e.get("formula")
        key = (e["device"], e["group"], e["name"], e["num_bytes"], f["filled"] if f else e.get("error", ""))
        head = f"{e['name']} = {format_bytes(e['num_bytes'])} ({e['category']})"
        if key in shown:
            items.append({"kind": "same", "head": head, "first_phase": shown[key]})
            continue
        shown[key] = e["phase"]
        items.append({"kind": "formula", "head": head, "formula": f, "error": e.get("error", ""),
                      "note": f.get("note", "") if f else "",
                      "lines": _formula_lines(f) if f else [], "inputs": _inputs_table(f["inputs"]) if f else None})
    return {"components": items, "checks": _checks_table(explained.get("checks", []))}


def page(template: str, title: str, json_id: str, data: Any, version: str, **context: Any) -> str:
    """A page extending `base.html.j2`: ``data`` is the document embedded under ``json_id``."""
    return render(template, title=title, json_id=json_id, data=data, version=version, **context)


def plan_html(doc: dict[str, Any], chart: PlanChart) -> str:
    rows = [(p,) for p in chart.gpu_panels] + [(chart.host_panel,)]
    explain = explain_view(doc["explain"]) if doc.get("explain") else None
    data = {k: v for k, v in doc.items() if k != "explain"}  # drawn, not embedded: the document stays `plan --json`'s
    return page("plan.html.j2", f"oomless plan — {chart.title}", "oomless-plan", data, doc["oomless_version"],
                chart=chart, grid=panel_grid(rows, "p"), tables=plan_tables(doc), explain=explain)
