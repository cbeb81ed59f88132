"""A formula: an arithmetic expression over named inputs, evaluated from its own text.

The expression a reader sees is the expression that is evaluated (a small AST walker:
+ − × / //, unary minus, ``max``, ``min``, ``ceil``, ``floor``), so the text cannot say one
thing while the number says another; `tests/explain` checks that the value equals the
planned bytes. An input may carry its own formula (how it was computed), one level deeper.

Sources are reused from where the memory model already states them: the ``Source:`` part of
a function's docstring (`doc_source`) and the docstring under a constant (`constant_doc`).
Nothing here is imported by the planner; it runs only when an explanation is asked for.
"""

from __future__ import annotations

import ast
import inspect
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

Number = int | float

FUNCTIONS: dict[str, Callable[..., Number]] = {"max": max, "min": min, "ceil": math.ceil, "floor": math.floor}
_OPERATORS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b,
}


@dataclass(frozen=True)
class Input:
    """One symbol of a formula: its value, what it is, and (optionally) how it was computed."""

    symbol: str
    value: Number
    meaning: str
    formula: Formula | None = None
    source: str = ""
    code: str = ""


@dataclass(frozen=True)
class Formula:
    expression: str
    inputs: tuple[Input, ...]
    source: str
    """Where the formula comes from: paper, framework file and version, or a measurement."""
    code: str = ""
    """The oomless function that computes the planned number (module path:line name)."""
    note: str = ""
    _tree: ast.Expression = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        tree = ast.parse(self.expression, mode="eval")
        object.__setattr__(self, "_tree", tree)
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - set(FUNCTIONS)
        missing = names - {i.symbol for i in self.inputs}
        assert not missing, f"formula {self.expression!r} lacks inputs {sorted(missing)}"
        object.__setattr__(self, "inputs", tuple(i for i in self.inputs if i.symbol in names))

    @property
    def values(self) -> dict[str, Number]:
        return {i.symbol: i.value for i in self.inputs}

    @property
    def value(self) -> Number:
        return _evaluate(self._tree.body, self.values)

    def filled(self) -> str:
        """The expression with every symbol replaced by its value (thousands separated)."""
        tree = ast.parse(self.expression, mode="eval")
        values = self.values
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id in values:
                node.id = format_number(values[node.id])
        return ast.unparse(tree)


def format_number(value: Number) -> str:
    if isinstance(value, float) and not value.is_integer():
        return f"{value:g}"
    return f"{int(value):,}"


def _evaluate(node: ast.AST, values: dict[str, Number]) -> Number:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.Name):
        return values[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.left, values), _evaluate(node.right, values))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_evaluate(node.operand, values)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS and not node.keywords:
        return FUNCTIONS[node.func.id](*(_evaluate(a, values) for a in node.args))
    raise ValueError(f"not an arithmetic formula: {ast.unparse(node)}")


# --- provenance reused from the memory model's own text -------------------------------------------

_SOURCE = re.compile(r"Source(?:s)?(?: \([^)]*\))?:\s*(.+?)(?=\n\s*\n|Assumes:|Known limitations|$)", re.S)


@lru_cache(maxsize=None)
def doc_source(fn: Callable[..., Any]) -> str:
    """The ``Source:`` part of ``fn``'s docstring, on one line ('' when it has none)."""
    doc = inspect.getdoc(fn) or ""
    found = _SOURCE.search(doc)
    return " ".join(found.group(1).split()).rstrip(".") if found else ""


@lru_cache(maxsize=None)
def doc_summary(fn: Callable[..., Any]) -> str:
    """The first sentence of ``fn``'s docstring."""
    doc = " ".join((inspect.getdoc(fn) or "").split())
    return doc.split(". ")[0].rstrip(".") if doc else ""


@lru_cache(maxsize=None)
def code_ref(fn: Callable[..., Any]) -> str:
    """``oomless/memory/logits.py:171 training_logits_bytes``."""
    fn = inspect.unwrap(fn)
    path = Path(inspect.getsourcefile(fn) or "")
    parts = path.parts
    rel = "/".join(parts[parts.index("oomless"):]) if "oomless" in parts else path.name
    code = getattr(fn, "__code__", None)
    if code is not None:
        line = code.co_firstlineno
    else:
        try:
            line = inspect.getsourcelines(fn)[1]
        except (OSError, TypeError):
            line = 0
    return f"{rel}:{line} {fn.__qualname__}"


@lru_cache(maxsize=None)
def _constant_docs(module_file: str) -> dict[str, tuple[int, str]]:
    tree = ast.parse(Path(module_file).read_text(encoding="utf-8"))
    out: dict[str, tuple[int, str]] = {}
    body = tree.body
    for stmt, nxt in zip(body, body[1:] + [None]):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            doc = ""
            if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str):
                doc = " ".join(nxt.value.value.split())
            out[stmt.targets[0].id] = (stmt.lineno, doc)
    return out


def constant_doc(module: ModuleType, name: str) -> tuple[str, str]:
    """(docstring under the constant ``name`` in ``module``, ``path:line NAME``)."""
    line, doc = _constant_docs(str(module.__file__)).get(name, (0, ""))
    rel = module.__name__.replace(".", "/") + ".py"
    return doc, f"{rel}:{line} {name}"


def fn_input(symbol: str, value: Number, fn: Callable[..., Any], meaning: str = "") -> Input:
    """An input computed by a memory-model function: its summary, source and code location."""
    return Input(symbol, value, meaning or doc_summary(fn), source=doc_source(fn), code=code_ref(fn))


def constant(module: ModuleType, name: str, symbol: str | None = None) -> Input:
    """An input that is a named constant of the memory model: the first sentence of the
    docstring under it as its meaning, the rest as its source."""
    doc, where = constant_doc(module, name)
    first, _, rest = doc.partition(". ")
    rest = rest.removeprefix("Source: ").rstrip(".")
    return Input(symbol or name, getattr(module, name), first.rstrip(".") or name, source=rest, code=where)


def constant_formula(module: ModuleType, name: str) -> Formula:
    """A component that is one empirical constant: the formula is the constant, its source
    the provenance written under it."""
    doc, where = constant_doc(module, name)
    return Formula(name, (constant(module, name),), source=doc, code=where)
