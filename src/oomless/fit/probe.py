"""The fast evaluator: every memory constraint of a configuration predicted from a few
`make_plan` calls, by adding per-factor effects.

Within a region (maths, layout and engine sleep fixed) a configuration picks one option per
factor (`fit.space`). Each constraint's slack — available − required − safety margin, one
entry per GPU constraint of the plan and per host phase — is

    slack(x) = slack(x₀) + Σᵢ [slack(x₀ with factor i set as in x) − slack(x₀)]

which needs Σᵢ |factor i| plans instead of Πᵢ |factor i|. It is exact when every component of
a phase depends on one factor only, which holds for the planner's terms (weights and states on
sharding/offload; activations and logits on the batch split, recompute and kernel; the engine's
budget on TP, max_num_seqs, graphs and utilization), given one sleep state per region. The
base point x₀ is chosen with the largest KV cache, so no probe clips it at zero where a
combination would not. Where a planner term couples factors (the experience phase's
largest model under `offload_idle_models`), `verify` finds the disagreement on random
configurations and marks the constraint, which the search then leaves to `make_plan`.
Step times add the same way (`perf.step`: each term is a training or an engine term).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..catalog.gpus import GpuSpec
from ..catalog.models import ModelArch
from ..memory import vllm as V
from ..perf import step as S
from ..perf.hardware import GpuPerf
from ..planner.plan import Constraint, Plan, make_plan
from ..planner.roles import Group, placement_groups
from ..planner.data_bound import data_capped
from ..spec.run import Role, RunSpec
from .overrides import Overrides, apply
from .space import Factor

NUM_VERIFY_SAMPLES = 6
"""Random configurations per region re-planned to check the additive prediction."""
VERIFY_ATTEMPTS_PER_SAMPLE = 3
"""Draws per wanted sample (draws without a KV cache do not count)."""


@dataclass(frozen=True)
class Margin:
    """Headroom every constraint must keep: the largest of fixed bytes, a measured gap and a
    fraction of the device's capacity, plus ``extra_bytes`` on top (a gap that must be covered
    in addition to the usual headroom: `fit.safety`)."""

    num_bytes: int = 0
    fraction: float = 0.0
    extra_bytes: int = 0
    gap_bytes: int = 0
    """Memory a crash showed the plan misses (`FitOptions.margin_bytes`)."""

    def of(self, capacity_bytes: int) -> int:
        return max(self.num_bytes, self.gap_bytes, int(self.fraction * capacity_bytes)) + self.extra_bytes

    def requested(self, capacity_bytes: int) -> int:
        """The margin asked for, without gaps (`slack_vector`: vLLM's KV-cache check)."""
        return max(self.num_bytes, int(self.fraction * capacity_bytes))


@dataclass(frozen=True)
class Context:
    arch: ModelArch
    gpu: GpuSpec | None
    archs: dict[Role, ModelArch]
    perf: GpuPerf
    margin: Margin

    def plan(self, spec: RunSpec) -> Plan:
        """The plan fit judges a configuration by: the worst batch the run's data can form
        (`planner.data_bound`: the limits' worst where the data says nothing)."""
        return make_plan(data_capped(spec, self.arch), self.arch, self.gpu, self.archs)


def constraint_keys(plan: Plan) -> tuple[tuple[str, str, str, str], ...]:
    gpu = tuple((c.phase, c.device, c.device_role, c.message.split("=")[0]) for c in plan.constraints if c.device == "gpu")
    host = tuple((p.name, "host", "node", "") for p in plan.host.phases) if plan.host.limit_bytes is not None else ()
    return gpu + host


def _is_kv_check(constraint: Constraint) -> bool:
    """vLLM's start-up check that its KV cache holds one sequence (`planner.plan._engine_constraints`)."""
    return constraint.component == "vllm.kv_cache" and constraint.message.startswith("vLLM KV cache must hold")


def slack_vector(plan: Plan, margin: Margin) -> list[int]:
    """available − required − margin per GPU constraint, then per host phase (host RAM is
    judged per phase so that it adds up like the rest). vLLM's KV-cache check compares the
    engine's own pool with one sequence, not device memory with a peak: it keeps the margin
    asked for but not a measured gap (memory the plan misses elsewhere does not make the pool
    need more room)."""
    gpu_margin = margin.of(plan.shape.capacity_bytes)
    kv_margin = margin.requested(plan.shape.capacity_bytes)
    out = [c.margin_bytes - (kv_margin if _is_kv_check(c) else gpu_margin) for c in plan.constraints if c.device == "gpu"]
    limit = plan.host.limit_bytes
    if limit is not None:
        out += [limit - margin.of(limit) - p.peak_bytes for p in plan.host.phases]
        # Growth over the run's steps and checkpoint saves (planner.timeline), on top of each host
        # phase: the same minimum as the timeline's peak over the largest phase, but additive.
        extras = plan.timeline.extras_over_base() if plan.timeline is not None else ()
        out += [limit - margin.of(limit) - p.peak_bytes - extra for extra in extras for p in plan.host.phases]
    return out


def kv_cache_bytes(plan: Plan) -> int:
    return plan.engine.kv_cache_bytes if plan.engine is not None else 0


def _time_key(overrides: Overrides) -> tuple[tuple[str, object], ...]:
    """A work option's overrides without the logits kernel, which moves no time term."""
    return tuple((k, v) for k, v in overrides.items() if k != "logits")


def _same_fields(factors: tuple[Factor, ...]) -> list[bool]:
    """Per factor: whether all its options set the same fields, which no other factor sets
    (then one option's fields can be set on a spec built with another's)."""
    fields = [{frozenset(o.overrides) for o in f.options} for f in factors]
    owners: dict[str, int] = {}
    for i, sets in enumerate(fields):
        for name in frozenset().union(*sets):
            owners[name] = owners.get(name, 0) + 1
    shared = any(n > 1 for n in owners.values())
    return [len(sets) == 1 and not shared for sets in fields]


def _add(a: list[int], b: list[int]) -> list[int]:
    return [x + y for x, y in zip(a, b)]


def _sub(a: list[int], b: list[int]) -> list[int]:
    return [x - y for x, y in zip(a, b)]


class Region:
    """Additive predictions of slack, KV cache and step time over one region's factors."""

    def __init__(self, ctx: Context, base: RunSpec, factors: tuple[Factor, ...]) -> None:
        self.ctx, self.base, self.factors = ctx, base, factors
        self._plans: dict[tuple[int, ...], Plan] = {}
        self._train_seconds: dict[tuple[object, ...], float] = {}
        self._engine_seconds: dict[tuple[object, ...], float] = {}
        self._engine_caps: dict[int, tuple[int, int]] = {}
        self._partial_specs: dict[tuple[object, ...], RunSpec] = {}
        self.groups = placement_groups(base)
        """The region's placement: its layout fixes it (no factor moves a field it reads)."""
        time_keys: dict[tuple[tuple[str, object], ...], int] = {}
        self._work_keys = [time_keys.setdefault(_time_key(o.overrides), j) for j, o in enumerate(factors[1].options)]
        """Per work option: the first work option with the same time key (its overrides but the
        logits kernel), an int that is quick to hash where the tuple holds enums."""
        self._same_fields = _same_fields(factors)
        self.base_index = [min(range(len(f.options)), key=lambda j, f=f: f.options[j].num_changes) for f in factors]
        self._choose_engine_base()
        self.probes = [[self._probe(i, j) for j in range(len(f.options))] for i, f in enumerate(factors)]
        base_plan = self.probes[0][self.base_index[0]]
        self.keys = constraint_keys(base_plan)
        self.slack0 = slack_vector(base_plan, ctx.margin)
        self.kv0 = kv_cache_bytes(base_plan)
        self.deltas = [[_sub(slack_vector(p, ctx.margin), self.slack0) for p in row] for row in self.probes]
        self.kv_deltas = [[kv_cache_bytes(p) - self.kv0 for p in row] for row in self.probes]
        for row in self.probes:
            assert all(constraint_keys(p) == self.keys for p in row), "probe plans of one region must list the same constraints"
        self.unverified: set[int] = set()
        self._num_verified = 0

    # --- configurations --------------------------------------------------------------------
    def overrides(self, choice: tuple[int, ...]) -> Overrides:
        out: Overrides = {}
        for f, j in zip(self.factors, choice):
            out.update(f.options[j].overrides)
        return out

    def spec(self, choice: tuple[int, ...]) -> RunSpec:
        return apply(self.base, self.overrides(choice))

    def _with(self, i: int, j: int) -> tuple[int, ...]:
        choice = list(self.base_index)
        choice[i] = j
        return tuple(choice)

    def _probe(self, i: int, j: int) -> Plan:
        choice = self._with(i, j)
        if choice not in self._plans:
            self._plans[choice] = self.ctx.plan(self.spec(choice))
        return self._plans[choice]

    @property
    def num_plans(self) -> int:
        """`make_plan` calls made for this region (probes and verification)."""
        return len(self._plans) + self._num_verified

    def _choose_engine_base(self) -> None:
        """Graphs off, utilization highest, and the engine shape with the largest KV cache."""
        names = [f.name for f in self.factors]
        if "engine" not in names:
            return
        for name, pick in (("cuda_graphs", lambda o: o.overrides["rollout.enforce_eager"]),
                           ("utilization", lambda o: o.overrides["rollout.gpu_memory_utilization"])):
            i = names.index(name)
            self.base_index[i] = max(range(len(self.factors[i].options)), key=lambda j, i=i: pick(self.factors[i].options[j]))
        i = names.index("engine")
        kvs = [kv_cache_bytes(self._probe(i, j)) for j in range(len(self.factors[i].options))]
        self.base_index[i] = max(range(len(kvs)), key=kvs.__getitem__)

    # --- predictions -----------------------------------------------------------------------
    def slack(self, choice: tuple[int, ...]) -> list[int]:
        out = self.slack0
        for i, j in enumerate(choice):
            out = _add(out, self.deltas[i][j])
        return out

    def kv(self, choice: tuple[int, ...]) -> int:
        return self.kv0 + sum(self.kv_deltas[i][j] for i, j in enumerate(choice))

    def train_seconds(self, states: int, work: int) -> float:
        """Training-side step time of (states option, work option), engine at its base. The
        logits kernel moves no time term, so options differing only in it share one value."""
        key = (states, self._work_keys[work])
        if key not in self._train_seconds:
            spec = self._spec_varying((states,), 1, work)
            models, shape = self.probes[0][states].models, self.probes[1][work].shape
            terms = S.training_side_terms(spec, self.ctx.arch, self.ctx.perf, shape, models, self.groups)
            self._train_seconds[key] = sum(terms.values())
        return self._train_seconds[key]

    def engine_seconds(self, engine_choice: tuple[int, ...]) -> float:
        """Engine-side step time of (engine, graphs, utilization) options, training at its base.
        Utilization acts only through the sequences the KV cache holds, so options holding the
        same number (up to the batch or max_num_seqs) share one value."""
        choice = tuple(self.base_index[:2]) + engine_choice
        key = (engine_choice[:2], self._sequences_held(choice)) if engine_choice else ((), 0)
        if key not in self._engine_seconds:
            shape = self.probes[2][engine_choice[0]].shape if engine_choice else self.probes[1][choice[1]].shape
            # The engine terms read no utilization (it acts through the KV cache passed here).
            spec = self._spec_varying(choice[:3], 3, engine_choice[1]) if engine_choice else self.spec(choice)
            terms = S.engine_side_terms(spec, self.ctx.arch, self.ctx.perf, shape, self.kv(choice), self.groups)
            self._engine_seconds[key] = sum(terms.values())
        return self._engine_seconds[key]

    def _spec_varying(self, head: tuple[int, ...], factor: int, option: int) -> RunSpec:
        """`spec` of the choice ``head`` (factors 0 … len(head)−1), then ``option`` of
        ``factor`` = len(head), then every later factor at its base. The part before ``factor``
        is built once per head and only this factor's fields are set on it: every option of a
        factor sets the same fields, so the result reads as `spec` of the whole choice."""
        assert factor == len(head)
        if not self._same_fields[factor]:
            return self.spec(head + (option,) + tuple(self.base_index[factor + 1:]))
        if head not in self._partial_specs:
            self._partial_specs[head] = self.spec(head + tuple(self.base_index[factor:]))
        return apply(self._partial_specs[head], self.factors[factor].options[option].overrides)

    def _sequences_held(self, choice: tuple[int, ...]) -> int:
        """Full-length sequences the predicted KV cache holds, capped where more cannot help."""
        j = choice[2]
        if j not in self._engine_caps:
            option, shape = self.factors[2].options[j], self.probes[2][j].shape
            tp = option.overrides["rollout.tensor_parallel_size"]
            ranks = sum(g.gpus_per_node for g in self.groups_with_actor())
            per_sequence = V.kv_bytes_per_token(self.ctx.arch, tp) * shape.seq_len
            self._engine_caps[j] = (per_sequence, min(shape.vllm_max_num_seqs, ranks * shape.generation_sequences_per_gpu))
        per_sequence, cap = self._engine_caps[j]
        return min(max(self.kv(choice), 0) // per_sequence, cap)

    def groups_with_actor(self) -> list[Group]:
        """Placement groups holding the actor, per node × nodes (the training ranks)."""
        return [Group(g.roles, g.gpus_per_node * self.base.hardware.num_nodes) for g in self.groups if Role.actor in g.roles]

    # --- verification ----------------------------------------------------------------------
    def verify(self, samples: int = NUM_VERIFY_SAMPLES, seed: int = 0) -> set[int]:
        """Re-plan random configurations; mark constraints whose prediction was wrong.

        Configurations whose engine has no room for a KV cache are skipped: the planner clips
        the cache at zero there, so phase peaks stop adding up, but such a configuration fails
        vLLM's KV check, which is predicted exactly, whatever its peaks."""
        rng = random.Random(seed)
        sizes = [len(f.options) for f in self.factors]
        for _ in range(VERIFY_ATTEMPTS_PER_SAMPLE * samples):
            if samples == 0:
                break
            choice = tuple(rng.randrange(n) for n in sizes)
            plan = self.ctx.plan(self.spec(choice))
            self._num_verified += 1
            if plan.engine is not None and plan.engine.kv_cache_bytes < 0:
                continue
            samples -= 1
            actual, predicted = slack_vector(plan, self.ctx.margin), self.slack(choice)
            self.unverified |= {c for c, (a, p) in enumerate(zip(actual, predicted)) if a != p}
        return self.unverified
