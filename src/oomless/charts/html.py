"""Self-contained HTML pages: inline SVG panels, tables, and the plan's JSON document.

Nothing is fetched: no CDN, no fonts, no images; the page opens offline. The document a page
draws is embedded verbatim in `<script type="application/json" id="oomless-plan">` (or
`oomless-compare`, `oomless-run`), so tests and users can check the drawing against it; the
small inline script only highlights one component across bars when its legend entry is clicked.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from html import escape
from typing import Any

from ..units import format_bytes
from .model import LegendEntry, Panel, PlanChart
from .svg import panel_svg

PANEL_WIDTH_PX = {1: 1200, 2: 820}
"""viewBox width of a panel by columns on the page: sets the text size relative to the bars."""
GPU_PANEL_HEIGHT_PX, HOST_PANEL_HEIGHT_PX = 440, 340
NUM_TABLE_COMPONENTS = 5

CSS = """
body{font-family:system-ui,"DejaVu Sans",Helvetica,Arial,sans-serif;color:#222;margin:24px auto;max-width:1500px;padding:0 16px}
h1{font-size:20px;margin:0 0 6px} h2{font-size:16px;margin:28px 0 8px} h3{font-size:14px;margin:16px 0 6px}
.verdict{font-weight:bold;margin:4px 0} .fits{color:#1e7b34} .oom{color:#c0392b}
.panels{display:grid;grid-template-columns:repeat(var(--cols),minmax(0,1fr));gap:12px 20px}
.panels svg{width:100%;height:auto;display:block;border:1px solid #eee;border-radius:4px}
svg.run{width:100%;height:auto;display:block}
.colhead{font-weight:bold;font-size:14px}
.legend{columns:4 240px;padding:0;list-style:none;font-size:13px}
.legend li{cursor:pointer;display:flex;align-items:center;gap:6px;padding:2px 4px;border-radius:3px;break-inside:avoid}
.legend li.on{background:#fff3c4} .legend .grp{font-weight:bold;cursor:default;margin-top:6px;break-after:avoid}
.sw{width:14px;height:14px;border:1px solid #0003;display:inline-block}
.seg{cursor:pointer} .seg.dim{opacity:.18}
table{border-collapse:collapse;font-size:13px;margin:4px 0 12px} td,th{border-bottom:1px solid #e3e3e3;padding:3px 10px;text-align:left}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap} tr.bad td{color:#c0392b}
footer{color:#777;font-size:12px;margin-top:32px}
.explain details{margin:2px 0 2px 8px;font-size:13px} .explain summary{cursor:pointer}
.explain code{font-size:12px;background:#f6f6f6;padding:1px 3px;border-radius:3px;overflow-wrap:anywhere}
.explain .src{color:#555;margin:2px 0 8px 16px} .explain .same{color:#777;font-size:13px;margin:2px 0 2px 8px}
"""

SCRIPT = """
(function () {
  "use strict";
  var holder = document.querySelector("script[type='application/json']");
  window.oomlessData = JSON.parse(holder.textContent);
  var segments = Array.prototype.slice.call(document.querySelectorAll("svg .seg"));
  var entries = Array.prototype.slice.call(document.querySelectorAll(".legend li[data-label]"));
  var active = null;
  function highlight(label) {
    active = active === label ? null : label;
    segments.forEach(function (r) {
      r.classList.toggle("dim", active !== null && r.getAttribute("data-label") !== active);
    });
    entries.forEach(function (li) { li.classList.toggle("on", li.getAttribute("data-label") === active); });
  }
  entries.concat(segments).forEach(function (el) {
    el.addEventListener("click", function () { highlight(el.getAttribute("data-label")); });
  });
})();
"""


def embed_json(data: Any) -> str:
    """JSON that cannot end its `<script>` element early; `JSON.parse`/`json.loads` read it back equal."""
    text = json.dumps(data, indent=1, ensure_ascii=False)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def page(title: str, body: str, json_id: str, data: Any, version: str) -> str:
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>\n{body}\n"
        f"<footer>oomless {escape(version)} · the data drawn here is in the page as JSON "
        f"(<code>#{json_id}</code>, also <code>window.oomlessData</code>)</footer>\n"
        f"<script type=\"application/json\" id=\"{json_id}\">{embed_json(data)}</script>\n"
        f"<script>{SCRIPT}</script>\n</body></html>\n"
    )


def _swatch(entry: LegendEntry) -> str:
    if entry.hatched:
        style = f"background:repeating-linear-gradient(45deg,{entry.colour} 0 4px,#ffffffa0 4px 6px)"
    else:
        style = f"background:{entry.colour}"
    return f'<span class="sw" style="{style}"></span>'


def legend_html(entries: tuple[LegendEntry, ...]) -> str:
    out, group = ['<ul class="legend">'], None
    for e in entries:
        if e.group_label != group:
            group = e.group_label
            out.append(f'<li class="grp">{escape(group)}</li>')
        out.append(f'<li data-label="{escape(e.label)}">{_swatch(e)}{escape(e.label)}</li>')
    out.append("</ul>")
    return "".join(out)


def panels_grid(rows: list[tuple[Panel, ...]], uid: str, heads: tuple[str, ...] = ()) -> str:
    cols = max(len(r) for r in rows)
    out = [f'<div class="panels" style="--cols:{cols}">']
    out += [f'<div class="colhead">{h}</div>' for h in heads]
    for i, row in enumerate(rows):
        for j, panel in enumerate(row):
            height = HOST_PANEL_HEIGHT_PX if panel.key == "host" else GPU_PANEL_HEIGHT_PX
            out.append(panel_svg(panel, PANEL_WIDTH_PX[cols], height, uid=f"{uid}{i}-{j}"))
    out.append("</div>")
    return "".join(out)


def table(head: list[str], rows: list[list[str]], numeric: Collection[int] = (), bad: list[bool] | None = None) -> str:
    def cell(tag: str, i: int, text: str) -> str:
        return f'<{tag}{" class=num" if i in numeric else ""}>{escape(text)}</{tag}>'

    out = ["<table><tr>" + "".join(cell("th", i, h) for i, h in enumerate(head)) + "</tr>"]
    for k, row in enumerate(rows):
        cls = ' class="bad"' if bad and bad[k] else ""
        out.append(f"<tr{cls}>" + "".join(cell("td", i, t) for i, t in enumerate(row)) + "</tr>")
    out.append("</table>")
    return "".join(out)


def _pct(part: int, whole: int | None) -> str:
    return f"{100 * part / whole:.0f} %" if whole else "—"


def _largest(components: dict[str, int]) -> str:
    top = sorted(components.items(), key=lambda nb: -nb[1])[:NUM_TABLE_COMPONENTS]
    return ", ".join(f"{n} {format_bytes(b)}" for n, b in top) or "—"


def plan_tables(doc: dict[str, Any]) -> str:
    """Per device group and host: each phase's peak and largest components; vLLM; every check."""
    out, capacity = [], doc["gpu"]["capacity_bytes"]
    for device in doc["gpu"]["devices"]:
        rows = [[p["name"], format_bytes(p["peak_bytes"]), _pct(p["peak_bytes"], capacity), _largest(p["components"])]
                for p in device["phases"]]
        out.append(f"<h3>{escape(device['role'])} GPUs</h3>")
        out.append(table(["phase", "peak", "of GPU", "largest components"], rows, {1, 2},
                         [p["peak_bytes"] > capacity for p in device["phases"]]))
    host, limit = doc["host"], doc["host"]["limit_bytes"]
    rows = [[p["name"], format_bytes(p["peak_bytes"]), _pct(p["peak_bytes"], limit), _largest(p["components"])]
            for p in host["phases"]]
    out.append("<h3>host RAM per node</h3>" + table(["phase", "peak", "of limit", "components"], rows, {1, 2}))
    if doc.get("vllm"):
        v = doc["vllm"]
        keys = ("requested_bytes", "weight_bytes", "profile_activation_bytes", "non_torch_bytes", "cuda_graph_bytes", "kv_cache_bytes")
        rows = [[k.removesuffix("_bytes").replace("_", " "), format_bytes(v[k])] for k in keys]
        rows.append(["KV cache tokens", f"{v['kv_cache_tokens']:,} (max concurrency {v['max_concurrency']})"])
        out.append("<h3>vLLM budget per GPU</h3>" + table(["", "bytes"], rows, {1}))
    rows = [[c["phase"], c["device"] + (f" ({c['device_role']})" if c["device"] == "gpu" else ""), c["message"],
             format_bytes(c["required_bytes"]), format_bytes(c["available_bytes"]), format_bytes(c["margin_bytes"])]
            for c in doc["constraints"]]
    out.append("<h3>every check</h3>" + table(["phase", "device", "check", "needs", "has", "margin"], rows, {3, 4, 5},
                                              [not c["ok"] for c in doc["constraints"]]))
    return "".join(out)


def _number(value: float) -> str:
    return f"{value:,}" if isinstance(value, int) or float(value).is_integer() else f"{value:g}"


def _inputs_table(inputs: list[dict[str, Any]]) -> str:
    rows = []
    for i in inputs:
        how = f"{i['formula']['expression']} = {i['formula']['filled']}" if i.get("formula") else ""
        rows.append([i["symbol"], _number(i["value"]), i["meaning"], how, i.get("source", "")])
    return table(["symbol", "value", "meaning", "computed as", "source"], rows, {1})


def _formula_html(f: dict[str, Any]) -> str:
    value = _number(f["value"])
    lines = [f"= {f['expression']}"] + ([f"= {f['filled']}"] if f["filled"] not in (f["expression"], value) else []) + [f"= {value} B"]
    note = f"<div class=src>{escape(f['note'])}</div>" if f.get("note") else ""
    return ("<div>" + "<br>".join(f"<code>{escape(x)}</code>" for x in lines) + "</div>" + _inputs_table(f["inputs"]) + note
            + f"<div class=src>source: {escape(f['source'])}<br>code: <code>{escape(f['code'])}</code></div>")


def _check_rows(checks: list[dict[str, Any]]) -> str:
    rows, bad = [], []
    for c in checks:
        where = f"{c['device_role']} GPU" if c["device"] == "gpu" else "host"
        cells = [" = ".join(dict.fromkeys([c[k]["expression"], c[k]["filled"], _number(c[k]["value"])])) + " B"
                 for k in ("required", "available")]
        rows.append([c["phase"], where, c["message"], *cells, f"{c['required']['source']} / {c['available']['source']}"])
        bad.append(c["required_bytes"] > c["available_bytes"])
    return "<h3>checks: what each needs and what it has</h3>" + table(["phase", "device", "check", "needs", "has", "sources"], rows, bad=bad)


def explain_html(explained: dict[str, Any]) -> str:
    """"Where the numbers come from": per device group and phase, each component's formula,
    its inputs filled in, the result and the source (`oomless.explain.to_dicts`), then every
    check's; a component already shown in an earlier phase of the group with the same formula
    is one line."""
    out, heading, shown = ['<div class="explain">'], None, {}
    for e in explained["components"]:
        where = f"{e['group']} GPUs" if e["device"] == "gpu" else "host RAM per node"
        if (where, e["phase"]) != heading:
            heading = (where, e["phase"])
            out.append(f"<h3>{escape(where)} · {escape(e['phase'])}</h3>")
        f = e.get("formula")
        key = (e["device"], e["group"], e["name"], e["num_bytes"], f["filled"] if f else e.get("error", ""))
        head = f"{escape(e['name'])} = {escape(format_bytes(e['num_bytes']))} ({escape(e['category'])})"
        if key in shown:
            out.append(f'<div class="same">{head} — as in {escape(shown[key])}</div>')
            continue
        shown[key] = e["phase"]
        body = _formula_html(f) if f else f"<div class=src>no explanation: {escape(e.get('error', ''))}</div>"
        summary = f" <code>= {escape(f['expression'])}</code>" if f else ""
        out.append(f"<details><summary>{head}{summary}</summary>{body}</details>")
    out.append(_check_rows(explained.get("checks", [])) + "</div>")
    return "".join(out)


def verdict_html(text: str, fits: bool) -> str:
    return f'<p class="verdict {"fits" if fits else "oom"}">{escape(text)}</p>'


def plan_html(doc: dict[str, Any], chart: PlanChart) -> str:
    rows = [(p,) for p in chart.gpu_panels] + [(chart.host_panel,)]
    body = (
        f"<h1>{escape(chart.title)}</h1>{verdict_html(chart.verdict, chart.fits)}"
        f"<h2>Memory per phase</h2>{panels_grid(rows, 'p')}{legend_html(chart.legend)}"
        f"<h2>Details</h2>{plan_tables(doc)}"
    )
    if doc.get("explain"):  # drawn, not embedded: the embedded document stays `oomless plan --json`'s
        body += f"<h2>Where the numbers come from</h2>{explain_html(doc['explain'])}"
    data = {k: v for k, v in doc.items() if k != "explain"}
    return page(f"oomless plan — {chart.title}", body, "oomless-plan", data, doc["oomless_version"])
