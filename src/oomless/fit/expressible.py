"""The search restricted to what a framework's own files can say (`fit --from FW FILE`).

A framework's writer names the spec values it cannot write (a ZeRO stage it has no config for,
vLLM for a trainer that generates with transformers, a logits kernel it does not ship). `fit`
never imports an adapter: the CLI passes the writer's check as a predicate on specs
(`FitOptions.expressible`), and the search applies it three times: a layout whose base spec
the framework cannot say is not searched, a factor keeps only the options it can say on that
base (the factors set disjoint fields, so a combination of sayable options is sayable unless
the writer relates fields across factors), and every re-checked answer is tested whole, which
catches such relations.
"""

from __future__ import annotations

from collections.abc import Callable

from ..spec.run import RunSpec
from .overrides import apply
from .space import Factor

Expressible = Callable[[RunSpec], bool]
"""True when the framework's files can say every value of the spec that its input could."""


def sayable_factors(base: RunSpec, factors: tuple[Factor, ...], expressible: Expressible) -> tuple[Factor, ...] | None:
    """``factors`` with only the options ``expressible`` accepts on ``base``; None when a factor
    has none left (the region holds no configuration the framework can say)."""
    out = []
    for f in factors:
        options = tuple(o for o in f.options if expressible(apply(base, o.overrides)))
        if not options:
            return None
        out.append(Factor(f.name, f.side, options))
    return tuple(out)
