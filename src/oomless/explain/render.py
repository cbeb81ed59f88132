"""Plain-text explanation for the terminal: per device group and phase, each component's
formula, the formula with its inputs filled in, the result, each input's meaning (and how it
was computed), the source and the oomless code that computes it. A component already shown
in an earlier phase of the same group with the same formula and value is one line."""

from __future__ import annotations

import shutil
import textwrap

from ..units import format_bytes
from . import Explained
from .formula import Formula, Input, format_number

INDENT = "    "


def _wrap(text: str, width: int, first: str, rest: str | None = None) -> list[str]:
    return textwrap.wrap(text, width=max(width, 40), initial_indent=first, subsequent_indent=rest or " " * len(first),
                         break_on_hyphens=False, break_long_words=True) or [first.rstrip()]


def _input_lines(i: Input, width: int, pad: str, shown_source: str) -> list[str]:
    out = _wrap(f"{i.symbol} = {format_number(i.value)}  {i.meaning}", width, pad, pad + INDENT)
    if i.formula is not None:
        out += _wrap(f"= {i.formula.expression} = {i.formula.filled()}", width, pad + INDENT)
    if i.source and i.source not in shown_source:
        out += _wrap(f"source: {i.source}", width, pad + INDENT)
    return out


def formula_lines(f: Formula, width: int, pad: str = INDENT) -> list[str]:
    out = _wrap(f"= {f.expression}", width, pad, pad + "  ")
    filled, value = f.filled(), format_number(f.value)
    if filled not in (f.expression, value):
        out += _wrap(f"= {filled}", width, pad, pad + "  ")
    out += _wrap(f"= {value} B", width, pad)
    for i in f.inputs:
        out += _input_lines(i, width, pad + "  ", f.source)
    if f.note:
        out += _wrap(f"note: {f.note}", width, pad)
    out += _wrap(f"source: {f.source}", width, pad, pad + "        ")
    out += _wrap(f"code: {f.code}", width, pad, pad + "      ")
    return out


def _heading(e: Explained) -> str:
    where = f"{e.group} GPUs" if e.device == "gpu" else "host RAM per node"
    return f"{where} · {e.phase}"


def render_text(explained: list[Explained], title: str = "", width: int | None = None) -> str:
    width = width or shutil.get_terminal_size((100, 24)).columns
    out = _wrap(title.strip(), width, "") if title.strip() else []
    out = ([""] if title.startswith("\n") else []) + out
    shown: dict[tuple[str, str, str, int, str], str] = {}
    heading = None
    for e in explained:
        if _heading(e) != heading:
            heading = _heading(e)
            out += ["", heading]
        head = f"  {e.name} = {format_bytes(e.num_bytes)} ({e.category})"
        key = (e.device, e.group, e.name, e.num_bytes, e.formula.filled() if e.formula else e.error)
        if key in shown:
            out.append(f"{head} — as in {shown[key]}")
            continue
        shown[key] = e.phase
        out.append(head)
        if e.formula is None:
            out += _wrap(f"no explanation: {e.error}", width, INDENT)
        else:
            out += formula_lines(e.formula, width)
            if not e.agrees:
                out += _wrap(f"warning: the formula gives {format_number(e.formula.value)} B, the plan "
                             f"{format_number(e.num_bytes)} B (a bug in oomless: report it)", width, INDENT)
    return "\n".join(out) + "\n"


def render_checks(checks: list, width: int | None = None) -> str:
    """Each check of the plan: what it requires and what is available, each with its formula."""
    width = width or shutil.get_terminal_size((100, 24)).columns
    out = ["", "Checks: what each needs and what it has"]
    for ch in checks:
        c = ch.constraint
        where = f"{c.device_role} GPU" if c.device == "gpu" else "host"
        verdict = "ok" if c.ok else "BREAKS"
        out += _wrap(f"{c.phase} on {where}: {c.message} — {verdict}, margin {format_bytes(c.margin_bytes)}", width, "  ", "    ")
        for label, f in (("needs", ch.required), ("has", ch.available)):
            out.append(f"    {label} {format_bytes(int(f.value))}")
            out += formula_lines(f, width, INDENT + "  ")
    return "\n".join(out) + "\n"
