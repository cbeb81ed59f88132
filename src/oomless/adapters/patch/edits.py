"""Edits of a user's file as (start, end, replacement) spans of its text: everything outside the
spans stays byte-identical. Shared by the shell and Python patchers."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Edit:
    start: int
    end: int
    text: str


def apply_edits(text: str, edits: list[Edit]) -> str:
    """``text`` with every edit applied; edits at one position keep their order, overlapping
    spans are an internal error (each key is edited once)."""
    ordered = sorted(enumerate(edits), key=lambda ie: (ie[1].start, ie[0]))
    out, at = [], 0
    for _, edit in ordered:
        assert edit.start >= at, f"overlapping edits at {edit.start}"
        out.append(text[at:edit.start])
        out.append(edit.text)
        at = edit.end
    out.append(text[at:])
    return "".join(out)


def line_indent(text: str, pos: int) -> str:
    """The leading whitespace of the line holding ``pos``."""
    start = text.rfind("\n", 0, pos) + 1
    line = text[start:pos]
    return line[:len(line) - len(line.lstrip())]
