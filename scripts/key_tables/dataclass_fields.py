"""Dataclass fields (name, type annotation, default) read from source text with `ast`.

A default is the literal value when `ast.literal_eval` can read it (a `field(default_factory=
lambda: [...])` body, `list`/`dict` factories as `[]`/`{}`, `int(1e8)` folded); otherwise the
source text is kept under `default_expr`. A field without a default has neither key.
Inheritance is resolved by class name among the files given: fields of the bases (last base
first, as dataclasses collect them along the MRO), then the class's own; bases that are not
among the files are returned by name (e.g. transformers' `TrainingArguments`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

MISSING = object()


@dataclass
class ClassInfo:
    bases: list[str]
    fields: dict[str, dict[str, Any]] = field(default_factory=dict)


def literal(node: ast.AST) -> Any:
    """The literal value of ``node``, or MISSING."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("int", "float") and len(node.args) == 1:
            inner = literal(node.args[0])
            if isinstance(inner, (int, float)) and not isinstance(inner, bool):
                return int(inner) if node.func.id == "int" else float(inner)
        return MISSING
    return sorted(value, key=str) if isinstance(value, (set, frozenset)) else value


def default_of(node: ast.AST | None) -> dict[str, Any]:
    """{"default": value} or {"default_expr": source text} or {} (no default)."""
    if node is None:
        return {}
    if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "field":
        keywords = {k.arg: k.value for k in node.keywords}
        if "default" in keywords:
            return default_of(keywords["default"])
        factory = keywords.get("default_factory")
        if factory is None:
            return {}
        if isinstance(factory, ast.Lambda):
            return default_of(factory.body)
        if isinstance(factory, ast.Name) and factory.id in ("list", "dict", "set", "tuple"):
            return {"default": {"list": [], "dict": {}, "set": [], "tuple": []}[factory.id]}
        return {"default_expr": ast.unparse(factory) + "()"}
    value = literal(node)
    return {"default_expr": ast.unparse(node)} if value is MISSING else {"default": value}


def _base_name(node: ast.expr) -> str:
    return node.attr if isinstance(node, ast.Attribute) else ast.unparse(node)


def classes_in(sources: dict[str, str]) -> dict[str, ClassInfo]:
    """Every top-level class of every file: its base names and annotated fields."""
    out: dict[str, ClassInfo] = {}
    for text in sources.values():
        for node in ast.parse(text).body:
            if not isinstance(node, ast.ClassDef):
                continue
            info = ClassInfo([_base_name(b) for b in node.bases])
            for item in node.body:
                if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
                    continue
                annotation = ast.unparse(item.annotation)
                if "ClassVar" in annotation or item.target.id.startswith("_"):
                    continue
                info.fields[item.target.id] = {"type": annotation, **default_of(item.value)}
            out[node.name] = info
    return out


def fields_of(classes: dict[str, ClassInfo], name: str) -> tuple[dict[str, dict[str, Any]], set[str]]:
    """(fields of class ``name`` with inherited ones, names of bases outside ``classes``)."""
    seen: set[str] = set()

    def walk(cls: str) -> tuple[dict[str, dict[str, Any]], set[str]]:
        if cls in seen:
            return {}, set()
        seen.add(cls)
        info = classes[cls]
        fields: dict[str, dict[str, Any]] = {}
        external: set[str] = set()
        for base in reversed(info.bases):
            if base in classes:
                inherited, outside = walk(base)
                fields.update(inherited)
                external |= outside
            elif base not in ("object", "ABC", "Generic"):
                external.add(base)
        fields.update(info.fields)
        return fields, external

    return walk(name)
