"""The picture of a plan as plain data: panels of stacked bars, limit lines and marks.

Pure: plan documents (`planner/report.py`) in, frozen dataclasses of integer bytes out. The
SVG renderer (HTML) and the matplotlib renderer (PNG) both draw this model, so the two files
show the same bars, colours, lines and marks.

Per phase a bar stacks the phase's components bottom to top in `groups.GPU_GROUPS` order.
The largest components of the chart (by their largest value in any phase) are named and get
their own shade; the rest of each group is one pale "other <group>" block.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from ..units import GiB, format_bytes
from . import groups as G

NUM_NAMED_GPU_COMPONENTS = 10
NUM_NAMED_HOST_COMPONENTS = 6
HEADROOM = 1.12
"""The y axis reaches 12 % above the tallest bar or line, room for the peak labels."""

Document = dict[str, Any]


@dataclass(frozen=True)
class Segment:
    label: str
    """A component's name, or "other <group>" for the unnamed rest of a group."""
    group: str
    num_bytes: int
    colour: str
    hatched: bool
    members: tuple[tuple[str, int], ...]
    """The plan's components summed into this block, largest first."""


@dataclass(frozen=True)
class Bracket:
    bottom_bytes: int
    top_bytes: int
    label: str


@dataclass(frozen=True)
class Bar:
    phase: str
    segments: tuple[Segment, ...]
    peak_bytes: int
    over: bool
    """Above the panel's hard limit (GPU capacity, host limit)."""
    mark: str | None
    """"binding" (the run breaks here first), "tightest" (fits, smallest margin) or None."""
    bracket: Bracket | None
    """vLLM's resident block on this bar."""


@dataclass(frozen=True)
class Line:
    num_bytes: int
    label: str
    hard: bool
    """True for the limit a phase must stay under (drawn red), False for context (grey)."""


@dataclass(frozen=True)
class Panel:
    key: str
    title: str
    bars: tuple[Bar, ...]
    lines: tuple[Line, ...]
    note: str
    ymax_bytes: int


@dataclass(frozen=True)
class LegendEntry:
    label: str
    colour: str
    hatched: bool
    group_label: str


@dataclass(frozen=True)
class PlanChart:
    title: str
    verdict: str
    fits: bool
    gpu_panels: tuple[Panel, ...]
    host_panel: Panel
    legend: tuple[LegendEntry, ...]


@dataclass(frozen=True)
class Palette:
    """Which components are named, so several charts (before/after) share colours."""

    named_gpu: tuple[str, ...]
    named_host: tuple[str, ...]


def _gpu_phases(doc: Document) -> Iterable[dict[str, Any]]:
    for device in doc["gpu"]["devices"]:
        yield from device["phases"]


def _largest(phases: Iterable[dict[str, Any]], limit: int) -> tuple[str, ...]:
    best: dict[str, int] = {}
    for phase in phases:
        for name, num_bytes in phase["components"].items():
            best[name] = max(best.get(name, 0), num_bytes)
    ranked = sorted((n for n in best if best[n] > 0), key=lambda n: (-best[n], n))
    return tuple(ranked[:limit])


def palette_for(docs: Iterable[Document]) -> Palette:
    docs = list(docs)
    return Palette(
        named_gpu=_largest((p for d in docs for p in _gpu_phases(d)), NUM_NAMED_GPU_COMPONENTS),
        named_host=_largest((p for d in docs for p in d["host"]["phases"]), NUM_NAMED_HOST_COMPONENTS),
    )


def _colours(named: tuple[str, ...], group_of: Callable[[str], G.Group]) -> dict[str, str]:
    count: dict[str, int] = {}
    out = {}
    for name in named:
        group = group_of(name)
        out[name] = G.shade(group, count.get(group.key, 0))
        count[group.key] = count.get(group.key, 0) + 1
    return out


def _stack(
    components: dict[str, int], named: tuple[str, ...], order: tuple[G.Group, ...], group_of: Callable[[str], G.Group]
) -> tuple[Segment, ...]:
    colours = _colours(named, group_of)
    out = []
    for group in order:
        mine = {n: b for n, b in components.items() if group_of(n) == group and b > 0}
        hatched = group is G.VLLM
        for name in (n for n in named if n in mine):
            out.append(Segment(name, group.key, mine[name], colours[name], hatched, ((name, mine[name]),)))
        rest = tuple(sorted(((n, b) for n, b in mine.items() if n not in named), key=lambda nb: (-nb[1], nb[0])))
        if rest:
            colour = G.mix(group.colour, G.OTHER_TINT)
            out.append(Segment(f"other {group.label.lower()}", group.key, sum(b for _, b in rest), colour, hatched, rest))
    return tuple(out)


def _bracket(segments: tuple[Segment, ...]) -> Bracket | None:
    engine = sum(s.num_bytes for s in segments if s.group == G.VLLM.key)
    if not engine:
        return None
    bottom = sum(s.num_bytes for s in segments if s.group != G.VLLM.key)
    return Bracket(bottom, bottom + engine, f"vLLM {format_bytes(engine)}")


def _mark(doc: Document, device: str, role: str | None, phase: str) -> str | None:
    b = doc["binding"]
    if b["device"] == device and b["phase"] == phase and (device == "host" or b["device_role"] == role):
        return "tightest" if doc["fits"] else "binding"
    return None


def _ymax(bars: Iterable[Bar], lines: Iterable[Line]) -> int:
    tallest = max([b.peak_bytes for b in bars] + [ln.num_bytes for ln in lines] + [1])
    return int(tallest * HEADROOM)


def _gpu_panel(doc: Document, device: dict[str, Any], palette: Palette) -> Panel:
    gpu, role = doc["gpu"], device["role"]
    capacity = gpu["capacity_bytes"]
    bars = []
    for phase in device["phases"]:
        segments = _stack(phase["components"], palette.named_gpu, G.GPU_GROUPS, G.gpu_group)
        bars.append(Bar(
            phase["name"], segments, phase["peak_bytes"], phase["peak_bytes"] > capacity,
            _mark(doc, "gpu", role, phase["name"]), _bracket(segments),
        ))
    lines = (Line(capacity, f"{gpu['name'] or 'GPU'} usable\n{format_bytes(capacity)}", True),)
    note = ""
    if "vllm" in device["roles"] and doc.get("vllm"):
        v = doc["vllm"]
        note = (f"vLLM budget {format_bytes(v['requested_bytes'])} per GPU (hatched), "
                f"KV cache {format_bytes(v['kv_cache_bytes'])} = {v['kv_cache_tokens']:,} tokens")
    title = f"{role} GPUs ({device['num_gpus_per_node']} per node: {', '.join(device['roles'])})"
    return Panel(f"gpu:{role}", title, tuple(bars), lines, note, _ymax(bars, lines))


def _host_lines(capacity: int | None, limit: int | None) -> tuple[Line, ...]:
    if limit is None:
        return ()
    if capacity is not None and limit < capacity:
        return (
            Line(capacity, f"host RAM\n{format_bytes(capacity)}", False),
            Line(limit, f"Ray kill threshold\n{limit / capacity:.0%}: {format_bytes(limit)}", True),
        )
    return (Line(limit, f"host RAM\n{format_bytes(limit)}", True),)


def _host_panel(doc: Document, palette: Palette) -> Panel:
    host = doc["host"]
    limit = host["limit_bytes"]
    bars = []
    for phase in host["phases"]:
        segments = _stack(phase["components"], palette.named_host, G.HOST_GROUPS, G.host_group)
        over = limit is not None and phase["peak_bytes"] > limit
        bars.append(Bar(phase["name"], segments, phase["peak_bytes"], over, _mark(doc, "host", None, phase["name"]), None))
    lines = _host_lines(host["capacity_bytes"], limit)
    note = "" if limit is not None else "hardware.host_ram_gib not given: host RAM not judged"
    return Panel("host", "host RAM per node", tuple(bars), lines, note, _ymax(bars, lines))


def legend(palette: Palette, charts: Iterable[PlanChart]) -> tuple[LegendEntry, ...]:
    """Every distinct block drawn in ``charts``, in stacking order (GPU groups, then host)."""
    gpu_labels = {g.key: g.label for g in G.GPU_GROUPS}
    host_labels = {g.key: "host: " + g.label for g in G.HOST_GROUPS}
    seen: dict[tuple[str, str], LegendEntry] = {}
    for chart in charts:
        for panel in (*chart.gpu_panels, chart.host_panel):
            labels = host_labels if panel.key == "host" else gpu_labels
            for s in (s for bar in panel.bars for s in bar.segments):
                seen.setdefault((labels[s.group], s.label), LegendEntry(s.label, s.colour, s.hatched, labels[s.group]))
    rank = {g.label: i for i, g in enumerate(G.GPU_GROUPS)}
    rank.update({"host: " + g.label: len(G.GPU_GROUPS) + i for i, g in enumerate(G.HOST_GROUPS)})
    return tuple(sorted(seen.values(), key=lambda e: (rank[e.group_label], e.label.startswith("other "), e.label)))


def binding_text(binding: dict[str, Any], fits: bool) -> str:
    """One line for the binding constraint: where, what, needed vs available, the component."""
    b = binding
    where = f"{b['device_role']} GPU" if b["device"] == "gpu" else "host"
    what = b["message"] if b["message"].startswith(b["phase"]) else f"{b['phase']} on the {where}, {b['message']}"
    margin = f"margin {format_bytes(b['margin_bytes'])}" if b["ok"] else f"short by {format_bytes(-b['margin_bytes'])}"
    head = "FITS — tightest" if fits else "DOES NOT FIT — breaks first"
    available = format_bytes(b["available_bytes"]) if b["available_bytes"] > 0 else "0 left"  # never a negative size
    blamed = "" if b.get("kind", "phase_peak") in ("phase_peak", "host_peak") else f"; component {b['component']}"
    return f"{head}: {what}: needs {format_bytes(b['required_bytes'])} of {available} ({margin}){blamed}"


def _title(doc: Document) -> str:
    num_gpus = sum(d["num_gpus_per_node"] for d in doc["gpu"]["devices"])
    return f"{doc['model']['id']} · {doc['algorithm'].upper()} · {num_gpus} × {doc['gpu']['name'] or 'GPU'} per node"


def plan_chart(doc: Document, palette: Palette | None = None) -> PlanChart:
    palette = palette or palette_for([doc])
    chart = PlanChart(
        _title(doc), binding_text(doc["binding"], doc["fits"]), doc["fits"],
        tuple(_gpu_panel(doc, d, palette) for d in doc["gpu"]["devices"]), _host_panel(doc, palette), (),
    )
    return replace(chart, legend=legend(palette, [chart]))


def empty_panel(key: str, title: str, note: str) -> Panel:
    return Panel(key, title, (), (), note, 1)


def aligned_rows(before: PlanChart, after: PlanChart) -> list[tuple[Panel, Panel]]:
    """GPU panels of two charts paired by device role (an absent role gets an empty panel),
    then the host panels; each pair shares one y scale so bar heights compare by eye."""
    roles = [p.key for p in before.gpu_panels] + [p.key for p in after.gpu_panels]
    rows = []
    for key in dict.fromkeys(roles):
        pair = []
        for chart in (before, after):
            found = [p for p in chart.gpu_panels if p.key == key]
            role = key.split(":", 1)[1]
            pair.append(found[0] if found else empty_panel(key, f"{role} GPUs", f"no {role} GPUs in this plan"))
        rows.append((pair[0], pair[1]))
    rows.append((before.host_panel, after.host_panel))
    out = []
    for a, b in rows:
        top = max(a.ymax_bytes, b.ymax_bytes)
        out.append((replace(a, ymax_bytes=top), replace(b, ymax_bytes=top)))
    return out


FONT_WIDTH_EM = 0.58
"""Average glyph width of DejaVu/Helvetica-like sans in em, to decide whether a label fits."""


def size_label(num_bytes: int) -> str:
    return "0" if num_bytes == 0 else format_bytes(num_bytes)


def segment_text(segment: Segment, width_px: float, height_px: float, font_px: float) -> list[str]:
    """Lines to print inside a block: its name (split after the first dot when too wide) and
    size when they fit, else the size alone, else nothing."""
    size = size_label(segment.num_bytes)
    line_px = font_px * 1.25

    def fits(lines: list[str]) -> bool:
        wide = max(len(t) for t in lines) * font_px * FONT_WIDTH_EM <= width_px - 4
        return wide and height_px >= len(lines) * line_px + 2

    head, dot, tail = segment.label.partition(".")
    for lines in ([segment.label, size], [head + dot, tail, size] if dot else [], [size]):
        if lines and fits(lines):
            return lines
    return []
