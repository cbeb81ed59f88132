"""Component name → the function that writes its formula.

Names are matched as regular expressions over the whole name (``(policy|critic)\\.grads``);
each explainer receives the phase's context and the name and returns a `Formula` whose value
must equal the planned bytes (`tests/explain` checks it on many plans, and that every name the
planner can emit has an entry here).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .context import Ctx
from .formula import Formula

Explainer = Callable[[Ctx, str], Formula]

GPU: list[tuple[re.Pattern[str], Explainer]] = []
HOST: list[tuple[re.Pattern[str], Explainer]] = []


def gpu(pattern: str) -> Callable[[Explainer], Explainer]:
    def add(fn: Explainer) -> Explainer:
        GPU.append((re.compile(pattern), fn))
        return fn

    return add


def host(pattern: str) -> Callable[[Explainer], Explainer]:
    def add(fn: Explainer) -> Explainer:
        HOST.append((re.compile(pattern), fn))
        return fn

    return add


def find(table: list[tuple[re.Pattern[str], Explainer]], name: str) -> Explainer | None:
    for pattern, fn in table:
        if pattern.fullmatch(name):
            return fn
    return None


def load() -> None:
    """Import the modules that register explainers (once; importing registers)."""
    import importlib

    for module in TERM_MODULES:
        importlib.import_module(f"{__package__}.{module}")


TERM_MODULES = ("state_terms", "overhead_terms", "engine_terms", "work_terms", "host_terms")
