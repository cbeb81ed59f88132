"""Set fields of an experiment's config dataclass in a Python file (Open-Reasoner-Zero's
`PPOExpConfig`): only the source span of each changed value is replaced by a literal, located
with `ast` positions; the file is parsed, never executed. A field the class does not set is
added after its last field."""

from __future__ import annotations

import ast
from typing import Any

from ...errors import InputError
from .edits import Edit, apply_edits, line_indent

_ANNOTATIONS = {bool: "bool", int: "int", float: "float", str: "str"}


def _offsets(text: str) -> list[int]:
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def _config_class(tree: ast.Module, where: str) -> ast.ClassDef:
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    named = [c for c in classes if c.name == "PPOExpConfig" or any(ast.unparse(b).endswith("PPOExpConfig") for b in c.bases)]
    if not named:
        raise InputError(where, "no config class to patch (expected `class PPOExpConfig(BasePPOExpConfig)`)")
    return named[-1]


def field_nodes(text: str, where: str) -> tuple[ast.ClassDef, dict[str, ast.expr]]:
    try:
        tree = ast.parse(text)
    except SyntaxError as err:
        raise InputError(f"{where}:{err.lineno}", f"not valid Python: {err.msg}") from None
    cls = _config_class(tree, where)
    fields = {}
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            fields[node.target.id] = node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            fields[node.targets[0].id] = node.value
    return cls, fields


def source_of(text: str, node: ast.expr) -> str:
    starts = _offsets(text)
    return text[starts[node.lineno - 1] + node.col_offset:starts[node.end_lineno - 1] + node.end_col_offset]


def patch_python(text: str, values: dict[str, Any], where: str) -> str:
    """``text`` with each field's value replaced by ``repr(value)``; a field left out is added."""
    cls, fields = field_nodes(text, where)
    starts = _offsets(text)
    edits, added = [], []
    for name, value in values.items():
        node = fields.get(name)
        if node is not None and value is None:
            continue  # a field the writer leaves out keeps the user's value (the read-back names any difference)
        if node is not None:
            start = starts[node.lineno - 1] + node.col_offset
            edits.append(Edit(start, starts[node.end_lineno - 1] + node.end_col_offset, repr(value)))
        elif value is not None:
            annotation = _ANNOTATIONS.get(type(value), "Any")
            added.append(f"{name}: {annotation} = {value!r}")
    if added:
        last = cls.body[-1]
        end = starts[last.end_lineno - 1] + last.end_col_offset
        indent = line_indent(text, starts[last.lineno - 1] + last.col_offset)
        edits.append(Edit(end, end, "".join(f"\n{indent}{line}" for line in added)))
    return apply_edits(text, edits)
