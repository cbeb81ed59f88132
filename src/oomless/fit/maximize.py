"""`fit --maximize PATH`: the largest value of one numeric spec field that fits with the margin.

Two answers: with everything else held as given (a bisection over `make_plan`), and with the
fastest memory knobs that fit at that value (a bisection over `fit`, starting from the first
answer). Both rest on the field's peaks never falling as it grows, which holds for the lengths,
batch sizes, completions per prompt and image sizes of the planner (a property tested in
tests/memory and tests/fit); for a field where it does not, the answers are values that fit,
not necessarily the largest.

Integer fields are bisected to the unit with everything held, and to `KNOB_RESOLUTION` of the
value with knobs (each step there is a whole `fit`); float fields to `FLOAT_RESOLUTION`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..errors import InputError
from ..planner.plan import Plan, make_plan
from ..planner.data_bound import data_capped
from ..spec.load import ResolvedRun, parse_spec
from ..spec.run import RunSpec
from .overrides import value_at
from .probe import slack_vector
from .search import Choice, FitOptions, fit, set_paths

FLOAT_RESOLUTION = 0.01
KNOB_RESOLUTION = 1 / 64
"""With knobs each probe is a whole `fit`: integer values stop within 1/64 of the value."""
INT_CEILING = 2**31
"""Upper bound for an integer field without one of its own."""
Number = int | float


@dataclass(frozen=True)
class Held:
    value: int | float | None
    """Largest value that fits with everything else as given; None: not even the smallest."""
    plan: Plan | None


@dataclass(frozen=True)
class MaximizeResult:
    path: str
    input_value: int | float
    held: Held
    with_knobs: int | float | None
    """Largest value found at which `fit` finds a configuration (None: none at the held value)."""
    choice: Choice | None
    """The fastest configuration `fit` found at ``with_knobs``."""
    resolution: int | float
    """How close ``with_knobs`` is to the boundary: the next value up may fit."""
    num_plans: int
    num_fits: int
    seconds: float


def _bounds(path: str) -> tuple[float, float, bool]:
    """(lowest allowed, highest allowed, lowest is exclusive) from the field's constraints."""
    model: Any = RunSpec
    *sections, leaf = path.split(".")
    for section in sections:
        model = model.model_fields[section].annotation
    info = model.model_fields[leaf]
    low, high, exclusive = -float("inf"), float("inf"), False
    for m in info.metadata:  # pydantic's Field(ge=…, gt=…, le=…, lt=…) constraints
        if getattr(m, "ge", None) is not None:
            low = m.ge
        elif getattr(m, "gt", None) is not None:
            low, exclusive = m.gt, True
        elif getattr(m, "le", None) is not None:
            high = m.le
        elif getattr(m, "lt", None) is not None:
            high = m.lt
    return low, high, exclusive


def _check_path(spec: RunSpec, path: str) -> int | float:
    try:
        value = value_at(spec, path)
    except AttributeError:
        raise InputError("--maximize", f"{path!r} is not a spec field; give a dotted path such as lengths.max_completion_tokens") from None
    if isinstance(value, BaseModel) or isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError("--maximize", f"{path} is not a number ({type(value).__name__}); allowed: an integer or float spec field")
    return value


class _Probe:
    def __init__(self, run: ResolvedRun, raw: dict[str, Any], base_dir: Path, path: str, options: FitOptions) -> None:
        self.run, self.raw, self.base_dir, self.path, self.options = run, raw, base_dir, path, options
        self.plans: dict[float, Plan | None] = {}
        self.fits: dict[float, Choice | None] = {}

    def spec_at(self, value: int | float) -> tuple[dict[str, Any], RunSpec] | None:
        data = set_paths(self.raw, {self.path: (None, value)})
        try:
            return data, parse_spec(data)
        except InputError:
            return None  # the value breaks a rule of the spec (e.g. a typical length above it)

    def held_fits(self, value: int | float) -> bool:
        if value not in self.plans:
            at = self.spec_at(value)
            self.plans[value] = None if at is None else make_plan(data_capped(at[1], self.run.arch), self.run.arch, self.run.gpu, self.run.archs)
        plan = self.plans[value]
        return plan is not None and plan.fits and min(slack_vector(plan, self.options.effective_margin)) >= 0

    def knobs_fit(self, value: int | float) -> bool:
        if value not in self.fits:
            at = self.spec_at(value)
            if at is None:
                self.fits[value] = None
            else:
                run = dataclasses.replace(self.run, spec=at[1], warnings=())
                self.fits[value] = fit(run, at[0], self.base_dir, dataclasses.replace(self.options, top_k=0)).best
        return self.fits[value] is not None


def _largest(test: Callable[[Number], bool], start: Number, low: Number, high: Number, integer: bool,
             resolution: Callable[[Number], Number]) -> Number | None:
    """Largest value in [low, high] passing ``test`` (true up to a boundary), to within
    ``resolution(value)``: doubling up from ``start`` while it passes, then bisecting."""
    step: Callable[[float], Number] = int if integer else (lambda x: round(x, 6))
    if test(start):
        good = start
        while True:
            nxt = step(min(high, max(good * 2, good + resolution(good))))
            if nxt <= good:
                return good
            if not test(nxt):
                bad = nxt
                break
            good = nxt
    else:
        good, bad = step(low), start
        if good >= bad or not test(good):
            return None
    while bad - good > resolution(good):
        mid = step((good + bad) / 2)
        if mid <= good or mid >= bad:
            break
        good, bad = (mid, bad) if test(mid) else (good, mid)
    return good


def maximize(run: ResolvedRun, raw: dict[str, Any], base_dir: Path, path: str, options: FitOptions,
             with_knobs: bool = True) -> MaximizeResult:
    """The largest value of ``path`` that fits with the margin, held and with knobs."""
    start_time = time.perf_counter()
    current = _check_path(run.spec, path)
    integer = isinstance(current, int)
    low, high, exclusive = _bounds(path)
    if integer:
        low, high = int(max(low + (1 if exclusive else 0), 1 if low == -float("inf") else low)), int(min(high, INT_CEILING))
    else:
        low, high = (low + FLOAT_RESOLUTION if exclusive else max(low, FLOAT_RESOLUTION)), min(high, float(INT_CEILING))
    probe = _Probe(run, raw, base_dir, path, options)
    fine: Callable[[Number], Number] = (lambda v: 1) if integer else (lambda v: FLOAT_RESOLUTION)
    held = _largest(probe.held_fits, current, low, high, integer, fine)
    knobs, choice, resolution = None, None, fine(current)
    if with_knobs:
        start = held if held is not None else current
        coarse: Callable[[Number], Number] = (lambda v: max(1, int(v * KNOB_RESOLUTION))) if integer else fine
        knobs = _largest(probe.knobs_fit, start, low, high, integer, coarse)
        choice = probe.fits.get(knobs) if knobs is not None else None
        resolution = coarse(knobs) if knobs is not None else resolution
    return MaximizeResult(
        path=path, input_value=current, held=Held(held, probe.plans.get(held) if held is not None else None),
        with_knobs=knobs, choice=choice, resolution=resolution,
        num_plans=len(probe.plans), num_fits=len(probe.fits), seconds=time.perf_counter() - start_time,
    )


def maximize_to_dict(result: MaximizeResult) -> dict[str, Any]:
    c = result.choice
    return {
        "path": result.path, "input_value": result.input_value,
        "held": {"value": result.held.value, "fits_at_input": result.held.value is not None and result.held.value >= result.input_value},
        "with_knobs": None if result.with_knobs is None else {
            "value": result.with_knobs, "resolution": result.resolution,
            "changes": [{"field": k, "from": old, "to": new} for k, (old, new) in (c.changes.items() if c else ())],
            "lowers_safety": list(c.lowers_safety) if c else [],
        },
        "search": {"plans": result.num_plans, "fits": result.num_fits, "seconds": round(result.seconds, 3)},
    }


def maximize_lines(result: MaximizeResult, margin_text: str) -> list[str]:
    """The answer as text lines (`oomless fit --maximize`)."""
    def shown(v: int | float) -> str:
        return f"{v:,}" if isinstance(v, int) else f"{v:g}"

    out = [f"Largest {result.path} that fits with a {margin_text} margin (input: {shown(result.input_value)}):"]
    held = result.held.value
    out.append(f"  • everything else as given: {shown(held)}" if held is not None
               else "  • everything else as given: none (not even the smallest value fits)")
    if result.with_knobs is not None:
        c = result.choice
        near = f" (to within {shown(result.resolution)})" if result.resolution and result.resolution != 1 else ""
        out.append(f"  • with the fastest memory knobs that fit there: {shown(result.with_knobs)}{near}")
        for k, (old, new) in (c.changes.items() if c else ()):
            if k != result.path:
                out.append(f"      {k}: {old} → {new}")
        for item in (c.lowers_safety if c else ()):
            out.append(f"      lowers safety: {item}")
    out.append(f"Searched {result.num_plans} plans and {result.num_fits} fits in {result.seconds:.2f} s.")
    return out
