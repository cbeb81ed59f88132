"""Typical batches and the chance of the worst: what the run's data makes of the limits.

The limits (`lengths.max_*`, `vision.max_pixels`, `vision.images_per_prompt`) bound the worst
batch; the data's distribution says how often batches come near it, and the data's own longest
prompt (`lengths.data_max_prompt_tokens`, P(X ≤ it) = 1) how far they can go. A distribution is given
as points of its cumulative distribution function (CDF): percentiles, the median (`typical_*`),
the share of completions cut at the limit (`completion_clip_fraction`), and the limit itself
(P(X ≤ max) = 1). Between points nothing is assumed: the CDF is bounded from below by the
step through the points (F̲(x) = the largest level whose value is ≤ x), so every chance here
is an upper bound on the chance of an oversized batch, given the points.

Chance per step. A step trains N sequences (micro_batch_size × gradient_accumulation_steps ×
data-parallel ranks). Let x be a point of lengths (prompt, completion, image area, images)
such that the plan with every sequence at x fits; the memory of every phase rises with every
length (padded rows reach their longest member, packed rows their sum), so a step whose
sequences are all ≤ x in every dimension fits. Hence

    P(step fits) ≥ max over fitting x of  Π_d F̲_d(x_d)^N,

the product over dimensions d and sequences assuming the lengths independent or positively
associated (sequences of one prompt, long prompts with long answers): for associated
variables P(all ≤ x) ≥ Π P(each ≤ x) (Harris-FKG inequality; Esary, Proschan & Walkup 1967),
so the bound holds for them too. Assumes: the step's sequences are drawn alike, step after
step (no growth of lengths over training: that is the step timeline's business).

The expected step of the first oversized batch is 1/p (geometric distribution), and over a
run of S steps (`schedule.max_steps`) P(run meets one) = 1 − (1 − p)^S.

Packed rows (`packed_sums`) cost the sum of their members, not b × the longest: their chance is
bounded on sums (`packed_batch_risk`, `packed_risk`), token budgets of packed rows included. A
token budget over padded rows or images exceeds it through the partition of a whole step
(`batches.max_budget_micro_batch_tokens`); that chance is not estimated, so when the worst
packing does not fit it is assumed to occur.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

from ..catalog.models import ModelArch
from ..memory import constants as C
from ..spec.run import RolloutEngine, RunSpec
from . import packed_risk as PR
from . import vision_terms as VT
from .batches import DataLengths, max_budget_micro_batch_tokens
from .defaults import last_true

ACCEPTED_RUN_FAILURE_PROBABILITY = 0.05
"""Policy, not a measurement: `fits` stays true when the worst batch does not fit only if the
chance that the whole run meets an oversized batch is below 5 % (the conventional 95 % level).
Nothing is fitted to it; the chance itself is always reported."""
MEDIAN_LEVEL = 0.5
MAX_RISK_PLANS = 64
"""Plans evaluated to find the most probable fitting point; beyond it the chance is not estimated."""


@dataclass(frozen=True)
class Knots:
    """Points (value, F̲(value)) of a lower bound on a CDF, rising in both."""

    points: tuple[tuple[int, float], ...]

    def level(self, x: int) -> float:
        return max((lvl for v, lvl in self.points if v <= x), default=0.0)

    def median_of_longest(self, members: int) -> int:
        """The smallest point v with F̲(v)^members ≥ 1/2: the median of the longest of
        ``members`` independent draws is at most v."""
        return next(v for v, lvl in self.points if lvl**members >= MEDIAN_LEVEL)


def knots(limit: int, median: int | None, percentiles: dict[int, int] | None, extra: tuple[tuple[int, float], ...] = ()) -> Knots:
    """The known CDF points of one quantity bounded by ``limit``, in rising order."""
    pts = {limit: 1.0}
    given = [(v, k / 100) for k, v in (percentiles or {}).items()] + list(extra)
    if median is not None:
        given.append((median, MEDIAN_LEVEL))
    for v, lvl in given:
        pts[v] = max(pts.get(v, 0.0), lvl)
    ordered, best = [], 0.0
    for v in sorted(pts):
        best = max(best, pts[v])
        ordered.append((v, best))
    return Knots(tuple(ordered))


def length_knots(spec: RunSpec, arch: ModelArch) -> dict[str, Knots]:
    """Knots per dimension: prompt text, completion (with the clip fraction: P(C < max) = 1 − q),
    image area and images per prompt (vision models with images only)."""
    ln, v = spec.lengths, spec.vision
    clip = ((ln.max_completion_tokens - 1, 1 - ln.completion_clip_fraction),) if ln.completion_clip_fraction is not None else ()
    # the data's longest prompt (P(prompt <= it) = 1), when below the limit: the run sees none longer
    data_max = ((ln.data_max_prompt_tokens, 1.0),) if ln.data_max_prompt_tokens and ln.data_max_prompt_tokens < \
        ln.max_prompt_tokens and not ln.max_prompt_counts_images else ()  # verl/EasyR1 pad to the limit
    out = {
        "prompt": knots(ln.max_prompt_tokens, ln.typical_prompt_tokens, ln.prompt_percentiles, data_max),
        "completion": knots(ln.max_completion_tokens, ln.typical_completion_tokens, ln.completion_percentiles, clip),
    }
    if VT.has_images(spec, arch):
        out["pixels"] = knots(v.max_pixels or C.QWEN_VL_MAX_PIXELS, v.typical_pixels, v.pixels_percentiles)
        out["images"] = knots(v.images_per_prompt, v.typical_images_per_prompt, None)
    return out


def lengths_at(spec: RunSpec, point: dict[str, int]) -> DataLengths:
    pixels = point.get("pixels")
    limit = spec.vision.max_pixels or C.QWEN_VL_MAX_PIXELS
    return DataLengths(
        point["prompt"], point["completion"], None if pixels is None or pixels >= limit else pixels,
        point.get("images", spec.vision.images_per_prompt),
    )


def typical_lengths(spec: RunSpec, arch: ModelArch, members: int) -> DataLengths:
    """Every sequence at the median of the longest of ``members`` (a padded micro-batch reaches
    its longest member); for packed rows the sum is what counts, so every sequence at the
    (dominating) mean, which a micro-batch's sum concentrates near (`packed_risk`)."""
    dims = length_knots(spec, arch)
    if packed_sums(spec, arch):
        return lengths_at(spec, {d: math.ceil(mean_bound(spec, dims, d)) for d in ("prompt", "completion")})
    return lengths_at(spec, {d: k.median_of_longest(members) for d, k in dims.items()})


def mean_bound(spec: RunSpec, dims: dict[str, Knots], name: str) -> float:
    """An upper bound on the mean ``name`` length: the mean given (`lengths.mean_*_tokens`) or
    the dominating law's (`packed_risk.dominating_atoms`), whichever is smaller."""
    law = PR.mean(PR.dominating_atoms(dims[name].points))
    given = getattr(spec.lengths, f"mean_{name}_tokens")
    return law if given is None else min(law, given)


def packed_sums(spec: RunSpec, arch: ModelArch) -> bool:
    """Whether a micro-batch's memory follows the sum of its members' tokens (and, under a token
    budget, its longest member: `batches.max_budget_micro_batch_tokens`): packed rows of text,
    vLLM generation (HF `generate` pads every row to the longest)."""
    return spec.batch.padding_free and spec.rollout.engine != RolloutEngine.hf and not VT.has_images(spec, arch)


@dataclass(frozen=True)
class BatchRisk:
    """How likely the worst batches are, per step and over the run."""

    sequences_per_step: int
    per_step: float | None
    """Upper bound on the chance that a step holds a batch that does not fit; None: not estimated."""
    fitting_lengths: DataLengths | None
    """The lengths whose bound gave ``per_step``: every sequence up to them fits."""
    steps: int | None
    per_run: float | None
    expected_first_failing_step: float | None
    note: str
    packed_mean_tokens: int | None = None
    """Packed rows (`packed_batch_risk`): the largest mean tokens per sequence a micro-batch may
    hold; ``fitting_lengths`` is that mean split into prompt and completion."""

    @property
    def accepted(self) -> bool:
        return self.per_run is not None and self.per_run < ACCEPTED_RUN_FAILURE_PROBABILITY


def _over_run(per_step: float, steps: int | None) -> tuple[float | None, float | None]:
    first = 1 / per_step if per_step > 0 else None
    if per_step == 0:  # no batch the data holds fails, whatever the run's length
        return 0.0, None
    if steps is None:
        return None, first
    return 1 - (1 - per_step) ** steps, first


def batch_risk(spec: RunSpec, arch: ModelArch, sequences_per_step: int, fits_at: Callable[[DataLengths], bool]) -> BatchRisk:
    """The chance per step of a batch that does not fit, from the distribution's knots
    (module docstring); ``fits_at(lengths)`` plans every sequence at ``lengths``."""
    steps = spec.schedule.max_steps
    if packed_sums(spec, arch):
        return packed_batch_risk(spec, arch, sequences_per_step, fits_at)
    if spec.batch.max_tokens_per_gpu is not None or spec.batch.logprob_token_budget is not None:
        return BatchRisk(sequences_per_step, None, None, steps, None, None,
                         "a token budget's parts of padded rows or images; not estimated")
    dims = length_knots(spec, arch)
    names = list(dims)
    combos = []
    for values in itertools.product(*(dims[n].points for n in names)):
        chance = math.prod(lvl**sequences_per_step for _, lvl in values)
        if chance > 0:
            combos.append((chance, {n: v for n, (v, _) in zip(names, values)}))
    combos.sort(key=lambda c: -c[0])
    for chance, point in combos[:MAX_RISK_PLANS]:
        lengths = lengths_at(spec, point)
        if fits_at(lengths):
            per_step = 1 - chance
            per_run, first = _over_run(per_step, steps)
            return BatchRisk(sequences_per_step, per_step, lengths, steps, per_run, first,
                             "bound from the given percentiles; lengths independent or positively associated")
    if len(combos) > MAX_RISK_PLANS:
        return BatchRisk(sequences_per_step, None, None, steps, None, None, "too many percentile points; not estimated")
    per_run, first = _over_run(1.0, steps)
    return BatchRisk(sequences_per_step, 1.0, None, steps, per_run, first, "no given length point below the limits fits")


def packed_batch_risk(spec: RunSpec, arch: ModelArch, sequences_per_step: int,
                      fits_at: Callable[[DataLengths], bool]) -> BatchRisk:
    """The chance per step that a packed micro-batch holds more tokens than the plan allows.

    Find the largest length ``a`` per sequence at which the plan fits (memory of packed rows
    rises with their sum only), then bound, per GPU and per rollout, the chance that a
    micro-batch of the training or the log-prob pass holds more than the plan's, summed over
    them and the GPUs (union bound). A micro-batch of ``b`` rows holds ``a·b`` in the plan: a
    block of rows in the data's order (`packed_risk.sum_tail`, one per block of the share), or
    where the framework sorts a GPU's share by length (`batch.length_sorted_micro_batches`) the
    longest ``b`` of the whole batch (`packed_risk.longest_share_tail`: verl partitions the
    batch over the ranks by Karmarkar-Karp before sorting, so shares are not independent). A
    token budget's part holds at most min(f(T, longest), the share's total)
    (`batches.max_budget_micro_batch_tokens`) and
    the plan's min(f(T, a), n·a): it can exceed the plan only when the share's total does, and,
    where f binds, only when a sequence is longer than ``a`` (`budget_tail`). A rollout feeds
    one or more optimizer steps; each is given the rollout's chance."""
    steps, b = spec.schedule.max_steps, spec.batch
    dims = length_knots(spec, arch)
    prompt, completion = (PR.dominating_atoms(dims[d].points) for d in ("prompt", "completion"))
    total = PR.comonotone_sum(prompt, completion)
    means = {d: mean_bound(spec, dims, d) for d in ("prompt", "completion")}
    mean_total = means["prompt"] + means["completion"]  # E[P + C] ≤ it, whatever their dependence
    share_of = means["prompt"] / max(mean_total, 1e-9)

    def split(a: int) -> DataLengths:
        p = min(spec.lengths.max_prompt_tokens, max(1, round(a * share_of)))
        c = min(spec.lengths.max_completion_tokens, max(1, a - p))
        p = min(spec.lengths.max_prompt_tokens, max(1, a - c))
        return lengths_at(spec, {"prompt": p, "completion": c})

    low = last_true(lambda a: fits_at(split(a)), 1, total[-1][0])  # plans rise with every length
    if low is None:
        per_run, first = _over_run(1.0, steps)
        return BatchRisk(sequences_per_step, 1.0, None, steps, per_run, first, "no mean length per sequence fits")
    ranks = max(1, sequences_per_step // (b.micro_batch_size * b.gradient_accumulation_steps))
    share = math.ceil(b.micro_batch_size * spec.steps_per_generation * b.oversample_factor)
    g, sp = b.num_generations, spec.distribution.sequence_parallel_size

    # Sorted shares (verl's `_balance_batch`) come from a Karmarkar-Karp partition of the whole
    # batch over the ranks, not from independent draws: their longest rows are bounded by the
    # longest of the pooled batch, one event for every rank. Shares in the data's order are
    # independent blocks of prompts, one event per rank.
    pooled, events = (share * ranks, 1) if b.length_sorted_micro_batches else (share, ranks)

    def rows_tail(rows: int, threshold: float) -> float:
        """P(some ``rows`` rows of a GPU's share hold more than ``threshold`` tokens)."""
        if b.length_sorted_micro_batches:  # together, the longest of the pool
            return PR.longest_share_tail(total, rows, pooled, g, threshold, mean_total)
        return math.ceil(share / rows) * PR.sum_tail(total, rows, g, threshold, mean_total)

    def budget_tail(budget: int, rows: int) -> float:
        """A part of the budget over ``rows`` rows (a mini-batch's share, or the rollout's)."""
        bound = max_budget_micro_batch_tokens(budget * sp, low, b.token_budget_balance)
        planned = min(bound, rows * low)
        chance = rows_tail(rows, planned)
        if planned == bound:  # past it only with a sequence longer than ``low`` as well
            chance = min(chance, pooled * PR.longer_than(prompt, completion, low))
        return chance

    train_rows = b.micro_batch_size * b.gradient_accumulation_steps
    tails = (budget_tail(b.max_tokens_per_gpu, train_rows) if b.max_tokens_per_gpu is not None
             else rows_tail(b.micro_batch_size, low * b.micro_batch_size))
    tails += (budget_tail(b.logprob_token_budget, share) if b.logprob_token_budget is not None
              else rows_tail(spec.logprob_micro_batch_size, low * spec.logprob_micro_batch_size))
    per_step = min(1.0, events * tails)
    per_run, first = _over_run(per_step, steps)
    how = ("token budgets" if b.max_tokens_per_gpu is not None else
           "the longest rows of a GPU's share together" if b.length_sorted_micro_batches else "rows in the data's order")
    return BatchRisk(sequences_per_step, per_step, split(low), steps, per_run, first,
                     f"packed rows ({how}): bound on the chance that a micro-batch holds more than its plan at {low:,} "
                     "tokens a sequence (Chernoff; any prompt/completion and within-group dependence)", low)
