"""`fit`: the fastest configuration of a run that fits with a safety margin, as the smallest
change to the input, plus ranked alternatives.

Search order: maths unchanged first; only if nothing fits, the allowed math moves, mildest
first (`space.math_levels`). Within a level, every layout (`layouts`) and engine sleep state
is a region searched by additive prediction (`probe`, `region_search`). Predicted winners are
then re-planned in score order from the spec file they would be written as — parsed,
validated and planned by `make_plan` — and only those whose own plan fits with the margin are
returned. Scores: predicted seconds per optimizer step + λ per changed field, λ =
CHANGE_COST_FRACTION × the fastest step time predicted for the input's region. With
`FitOptions.keep_safety_of` (doctor, after a crash), options that lower one of that run's
safety settings rank after all others and are returned only when their plan keeps the measured
gap free on top of the margin (`fit.safety`).
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..perf.hardware import gpu_perf
from ..perf.step import StepEstimate, estimate_plan
from ..planner.defaults import DEFAULT_MARGIN_FRACTION as PLANNER_MARGIN_FRACTION, utilization_unset
from ..planner.plan import Plan
from ..spec.ignored import ignored_fields
from ..spec.load import ResolvedRun, parse_spec, read_yaml, resolve
from ..spec.run import RolloutEngine, RunSpec
from ..units import format_bytes
from .expressible import Expressible, sayable_factors
from .layouts import batch_splits, layouts
from .overrides import Overrides, apply, changed, default_at, plain
from .probe import Context, Margin, Region, slack_vector
from .region_search import Counts, search_region
from .safety import lowered_settings, mark_lowering
from .space import MATH_FIELDS, MathSetting, factors, math_levels

DEFAULT_MARGIN_FRACTION = PLANNER_MARGIN_FRACTION
"""Unless told otherwise every constraint keeps 5 % of its device's capacity free (the planner's
known unknowns, e.g. vLLM's profile peak, are a few GiB on large GPUs)."""
CHANGE_COST_FRACTION = 0.01
"""A changed field must buy 1 % of the step time to be preferred (ties go to fewer changes)."""
CANDIDATES_PER_REGION = 64
RECHECK_BUDGET = 400
"""Most `make_plan` re-checks of predicted winners before giving up."""


@dataclass(frozen=True)
class FitOptions:
    margin: Margin = Margin(fraction=DEFAULT_MARGIN_FRACTION)
    allow: frozenset[str] = frozenset()
    top_k: int = 5
    margin_bytes: int = 0
    """An absolute margin on top of nothing: every constraint keeps max(``margin``, this) free
    (doctor passes the gap a crash measured between the plan and the run)."""
    keep_safety_of: RunSpec | None = None
    """No answer lowers a memory-safety setting this run had (`fit.safety`) unless its plan
    fits with ``margin_bytes`` free on top of ``margin``; such an answer names what it lowers
    in `Choice.lowers_safety` and is ranked after every answer that lowers nothing."""
    expressible: Expressible | None = None
    """Only configurations this accepts are searched (`fit.expressible`: with --from, those the
    framework's own files can say)."""
    rollout_every_micro_step: bool = False
    """The framework generates a rollout every micro-step (VLM-R1): batch splits keep whole
    groups per micro-batch and one rollout per micro-step (`layouts.batch_splits`)."""

    @property
    def effective_margin(self) -> Margin:
        """What every answer must keep free: the larger of the margin and ``margin_bytes``."""
        m = self.margin
        return Margin(m.num_bytes, m.fraction, m.extra_bytes, max(m.gap_bytes, self.margin_bytes))

    @property
    def lowering_margin(self) -> Margin:
        """What an answer that lowers a safety setting must keep free: the margin plus the gap."""
        m = self.margin
        return Margin(m.num_bytes, m.fraction, m.extra_bytes + self.margin_bytes, m.gap_bytes)


@dataclass(frozen=True)
class Choice:
    """A configuration whose own plan was made and fits with the margin."""

    run: ResolvedRun
    data: dict[str, Any]
    """The spec as it would be written (the input's YAML with the changes)."""
    plan: Plan
    estimate: StepEstimate
    changes: dict[str, tuple[Any, Any]]
    region: str
    lowers_safety: tuple[str, ...] = ()
    """Safety settings of `FitOptions.keep_safety_of` this configuration lowers, each with why
    it is still offered (its plan fits with the measured gap covered on top of the margin)."""

    @property
    def min_slack_bytes(self) -> int:
        return min(slack_vector(self.plan, Margin()))

    @property
    def changes_training(self) -> tuple[str, ...]:
        """The changed fields that change what is trained or on what (`--allow` knobs)."""
        return tuple(k for k in self.changes if k in MATH_FIELDS)

    @property
    def phase_peaks(self) -> tuple[tuple[str, str, int, int], ...]:
        """(device group, phase, predicted peak bytes on one GPU, capacity) per GPU phase, then
        ("host", phase, peak, limit or 0) per host phase."""
        gpu = tuple((d.role, p.name, p.peak_bytes, d.capacity_bytes) for d in self.plan.devices for p in d.phases)
        limit = self.plan.host.limit_bytes or 0
        return gpu + tuple(("host", p.name, p.peak_bytes, limit) for p in self.plan.host.phases)


@dataclass
class SearchStats:
    regions: int = 0
    plans: int = 0
    """`make_plan` calls: probes, verification samples and re-checks."""
    counts: Counts = field(default_factory=Counts)
    rechecked: int = 0
    math_level: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class FitResult:
    input_run: ResolvedRun
    input_plan: Plan
    input_estimate: StepEstimate
    margin: Margin
    allowed: frozenset[str]
    best: Choice | None
    alternatives: tuple[Choice, ...]
    stats: SearchStats
    notes: tuple[str, ...]


def set_paths(data: dict[str, Any], changes: dict[str, tuple[Any, Any]], drop: frozenset[str] = frozenset()) -> dict[str, Any]:
    """A copy of the YAML mapping with each changed field set; None (and any path in ``drop``)
    removes the key, so the default applies."""
    out = copy.deepcopy(data)
    for path, (_, new) in changes.items():
        *parents, leaf = path.split(".")
        remove = new is None or path in drop
        node = out
        for key in parents:
            node = node.get(key, {}) if remove else node.setdefault(key, {})
        if remove:
            node.pop(leaf, None)
            if parents and out.get(parents[0]) == {}:
                del out[parents[0]]
        else:
            node[leaf] = new
    return out


def spec_data(raw: dict[str, Any], changes: dict[str, tuple[Any, Any]]) -> dict[str, Any]:
    """The YAML a configuration is written as. A change back to a field's default that the
    spec would then ignore (sleep_level 0 on separate GPUs) is written as a removed key, so
    the new spec carries no ignored-field warning of fit's making."""
    data = set_paths(raw, changes)
    ignored = {w.split(" is ignored")[0] for w in ignored_fields(parse_spec(data))}
    drop = frozenset(p for p, (_, new) in changes.items() if p in ignored and new == default_at(p))
    return set_paths(raw, changes, drop) if drop else data


class _Search:
    def __init__(self, run: ResolvedRun, raw: dict[str, Any], base_dir: Path, options: FitOptions) -> None:
        self.run, self.raw, self.base_dir, self.options = run, raw, base_dir, options
        perf, note = gpu_perf(run.gpu)
        self.notes = [note] if note else []
        self.ctx = Context(run.arch, run.gpu, run.archs, perf, options.effective_margin)
        self.stats = SearchStats()
        self.lam: float | None = None

    def regions(self, math: MathSetting, fallback: bool = False) -> list[tuple[str, Region]]:
        spec = apply(self.run.spec, math.overrides)
        ranks_in = layouts(self.run.spec)[0].train_ranks_per_node * self.run.spec.hardware.num_nodes
        out = []
        for layout in layouts(spec):
            if layout.fallback != fallback:
                continue
            ranks_out = layout.train_ranks_per_node * spec.hardware.num_nodes
            group = spec.batch.num_generations if self.options.rollout_every_micro_step else None
            splits = batch_splits(self.run.spec, ranks_in, ranks_out, math.batch_scale, group)
            if not splits:
                continue
            base = apply(spec, layout.overrides)
            sayable = self.options.expressible
            if sayable is not None and not sayable(base):
                continue
            probe_plan = self.ctx.plan(base)
            self.stats.plans += 1
            for sleeping in (False, True) if layout.colocated else (False,):
                fs = factors(base, self.run.arch, layout, sleeping, splits, probe_plan.shape.seq_len,
                             probe_plan.shape.vllm_max_num_seqs, every_sleep_level=sayable is not None)
                if sayable is not None and (fs := sayable_factors(base, fs, sayable)) is None:
                    continue
                if self.options.keep_safety_of is not None:
                    fs = mark_lowering(fs, self.options.keep_safety_of, base)
                label = f"{math.label}; {layout.label}" + ("; engine sleeps between rollouts" if sleeping else "")
                out.append((label, Region(self.ctx, base, fs)))
        return out

    def candidates(self, math: MathSetting, fallback: bool = False) -> list[tuple[float, Overrides, str]]:
        found = []
        for label, region in self.regions(math, fallback):
            region.verify()
            self.stats.regions += 1
            self.stats.plans += region.num_plans
            if self.lam is None:
                self.lam = CHANGE_COST_FRACTION * _fastest(region)
            base_overrides = {**math.overrides, **_region_overrides(region, self.run.spec)}
            base_changes = len(changed(self.run.spec, base_overrides))
            for score, _, _, choice in search_region(region, self.lam, CANDIDATES_PER_REGION, self.stats.counts):
                overrides = {**base_overrides, **region.overrides(choice)}
                overrides.update(_tidy_overrides(region, self.run.spec, overrides))
                found.append((score + self.lam * base_changes, overrides, label))
        return sorted(found, key=lambda f: f[0])

    def recheck(self, overrides: Overrides, label: str) -> Choice | None:
        changes = changed(self.run.spec, overrides)
        path = "rollout.gpu_memory_utilization"
        if utilization_unset(self.run.spec) and path in overrides:
            changes[path] = (None, plain(overrides[path]))  # written, so the spec plans as predicted
        try:
            data = spec_data(self.raw, changes)
            run = resolve(parse_spec(data), self.base_dir)
        except InputError:
            return None
        if self.options.expressible is not None and not self.options.expressible(run.spec):
            return None
        plan = self.ctx.plan(run.spec)
        self.stats.plans += 1
        self.stats.rechecked += 1
        if min(slack_vector(plan, self.options.effective_margin)) < 0:
            return None
        lowered = lowers_safety(self.options, run.spec, plan)
        if lowered is None:
            return None
        return Choice(run, data, plan, estimate_plan(plan, self.ctx.perf), changes, label, lowered)

    def _first_safe(self, found: list[tuple[float, Overrides, str]], checked: dict[int, Choice | None],
                    keep: RunSpec) -> list[tuple[int, Choice]]:
        """The best-ranked configuration that lowers no safety setting of ``keep`` and fits."""
        for i, (_, overrides, label) in enumerate(found):
            if i in checked or lowered_settings(keep, apply(self.run.spec, overrides)):
                continue
            if self.stats.rechecked >= RECHECK_BUDGET:
                break
            checked[i] = self.recheck(overrides, label)
            if checked[i] is not None:
                return [(i, checked[i])]
        return []

    def winners(self, found: list[tuple[float, Overrides, str]]) -> list[Choice]:
        """Re-plan in score order. The first fit is the best; alternatives are the best fit of
        every other region (layout, sleep), then of every other kind (sharding, offload,
        recompute) within a region."""
        checked: dict[int, Choice | None] = {}

        def pick(kind_of, out: list[tuple[int, Choice]]) -> None:
            seen = {kind_of(i) for i, _ in out}
            for i, (_, overrides, label) in enumerate(found):
                if len(out) > self.options.top_k or (i not in checked and self.stats.rechecked >= RECHECK_BUDGET):
                    return
                if kind_of(i) in seen:
                    continue
                if i not in checked:
                    checked[i] = self.recheck(overrides, label)
                if checked[i] is not None:
                    seen.add(kind_of(i))
                    out.append((i, checked[i]))

        out: list[tuple[int, Choice]] = []
        pick(lambda i: found[i][2], out)
        pick(lambda i: _kind(apply(self.run.spec, found[i][1]), found[i][2]), out)
        keep = self.options.keep_safety_of
        if keep is not None and all(c.lowers_safety for _, c in out):
            out += self._first_safe(found, checked, keep)
        out.sort(key=lambda ic: bool(ic[1].lowers_safety))
        best, rest = out[:1], sorted(out[1:], key=lambda ic: (bool(ic[1].lowers_safety), ic[0]))
        return [c for _, c in best + rest][: self.options.top_k + 1]


def lowers_safety(options: FitOptions, spec: RunSpec, plan: Plan) -> tuple[str, ...] | None:
    """What ``spec`` lowers of `FitOptions.keep_safety_of`'s safety settings, each with why it
    is allowed; None when it lowers some and its plan does not keep the gap free on top of the
    margin (such a configuration is never offered)."""
    if options.keep_safety_of is None:
        return ()
    lowered = lowered_settings(options.keep_safety_of, spec)
    if not lowered:
        return ()
    spare = min(slack_vector(plan, options.lowering_margin))
    if spare < 0:
        return None
    gap = (f"the measured gap of {format_bytes(options.margin_bytes)} stays free on top of the margin"
           if options.margin_bytes else "no gap was measured; it fits with the usual margin")
    return tuple(f"{item} ({gap}, {format_bytes(spare)} to spare)" for item in lowered)


def _kind(spec: RunSpec, region: str) -> tuple[Any, ...]:
    d = spec.distribution
    return (region, d.strategy, d.offload_params, d.offload_optimizer, spec.gradient_checkpointing)


VLLM_ONLY_FIELDS = ("gpu_memory_utilization", "tensor_parallel_size", "max_num_seqs", "max_num_batched_tokens",
                    "max_model_len", "enforce_eager", "engine_in_trainer_process", "sleep_level",
                    "offload_model", "offload_optimizer")
"""Rollout fields a spec ignores or refuses once generation moves into the trainer (HF
generate): removed from the written spec (`spec.ignored`)."""
REGION_FIELDS = ("rollout.engine", "rollout.num_gpus", "placement.groups", "rollout.sleep_level",
                 "rollout.offload_model", "rollout.offload_optimizer", "rollout.engine_in_trainer_process")


def _region_overrides(region: Region, spec: RunSpec) -> Overrides:
    """The region's layout fields that differ from the input."""
    out = {}
    for key in REGION_FIELDS:
        section, leaf = key.split(".")
        value = getattr(getattr(region.base, section), leaf)
        if plain(value) != plain(getattr(getattr(spec, section), leaf)):
            out[key] = value
    return out


def _tidy_overrides(region: Region, spec: RunSpec, overrides: Overrides) -> Overrides:
    """Effect-free changes that keep the written spec free of fields it would ignore: offload
    during rollout off when the engine does not sleep, `num_gpus` back to its default when
    vLLM no longer has GPUs of its own, vLLM's own fields when there is no vLLM (keys removed).
    They change no plan and cost no score."""
    final = apply(spec, overrides)
    ro, out = final.rollout, {}
    if ro.engine == RolloutEngine.vllm_colocate and ro.sleep_level == 0:
        out.update({k: False for k in ("rollout.offload_model", "rollout.offload_optimizer") if getattr(ro, k.split(".")[1])})
    if ro.engine != RolloutEngine.vllm_separate and "num_gpus" in spec.rollout.model_fields_set:
        out["rollout.num_gpus"] = None
    if ro.engine == RolloutEngine.hf:
        out.update({f"rollout.{k}": None for k in VLLM_ONLY_FIELDS if k in spec.rollout.model_fields_set})
    return out


def _fastest(region: Region) -> float:
    train = min(region.train_seconds(s, w) for s in range(len(region.factors[0].options)) for w in range(len(region.factors[1].options)))
    engine = region.engine_seconds(tuple(region.base_index[2:]))
    return train + (engine if engine != float("inf") else 0.0)


def fit(run: ResolvedRun, raw: dict[str, Any], base_dir: Path, options: FitOptions) -> FitResult:
    start = time.perf_counter()
    search = _Search(run, raw, base_dir, options)
    input_plan = search.ctx.plan(run.spec)
    chosen: list[Choice] = []
    for level, settings in enumerate(math_levels(run.spec, run.arch, options.allow)):
        for fallback in (False, True):  # fallback layouts only when nothing else fits
            found = sorted((c for math in settings for c in search.candidates(math, fallback)), key=lambda f: f[0])
            chosen = search.winners(found)
            if chosen:
                break
        search.stats.math_level = level
        if chosen:
            break
    search.stats.seconds = time.perf_counter() - start
    return FitResult(
        input_run=run, input_plan=input_plan, input_estimate=estimate_plan(input_plan, search.ctx.perf),
        margin=options.effective_margin, allowed=options.allow, best=chosen[0] if chosen else None, alternatives=tuple(chosen[1:]),
        stats=search.stats, notes=tuple(search.notes),
    )


def fit_file(path: str | Path, options: FitOptions) -> FitResult:
    """`fit` on a spec file (its YAML is kept so results can be written as edits of it)."""
    p = Path(path)
    raw = read_yaml(p)
    base_dir = p.resolve().parent
    run = resolve(parse_spec(copy.deepcopy(raw)), base_dir)  # as `load_run`, from the one read
    return fit(run, raw, base_dir, options)
