"""The chance that a packed micro-batch holds more tokens than the plan allows.

A packed micro-batch (`batch.padding_free`: verl `use_remove_padding`, ms-swift/TRL
`padding_free`, OpenRLHF `--packing_samples`) costs the *sum* of its members' tokens, not ``b ×``
the longest. Bounding it by "every member is short" (`risk.batch_risk`) asks every one of the
step's sequences to stay under a length, which a long tail makes unlikely; a sum of many
sequences concentrates near ``b ×`` the mean instead. This module bounds the sum.

Bind: T = one sequence's tokens (prompt P + completion C), b = sequences per micro-batch, n =
sequences one GPU holds for the step (the rank's share of a rollout), g = rows per prompt
(`batch.num_generations`), K(θ) = log E[e^{θT}] (the log moment-generating function).

1. Dominating distribution. The percentile knots give a lower bound F̲ on each CDF; the
   discrete variable X' with mass F̲(v_i) − F̲(v_{i−1}) at knot v_i has F_{X'} = F̲ ≤ F_X, so
   X ≤ X' in the usual stochastic order and E[f(X)] ≤ E[f(X')] for every rising f.
2. Prompt and completion, any dependence. P + C is at most the comonotone sum
   Q_P'(U) + Q_C'(U) in convex order (Dhaene, Denuit, Goovaerts, Kaas & Vyncke 2002, "The
   concept of comonotonicity in actuarial science and finance: theory", Theorem 7), so its MGF
   bounds that of P + C whatever their dependence (long prompts with long answers included).
3. Rows of one prompt, any dependence. For r rows of one group, e^{θΣT_i} ≤ (1/r)Σe^{rθT_i}
   (Jensen), so E[e^{θΣT_i}] ≤ e^{K(rθ)}: the group counts as one row of r·T. Groups are
   independent (distinct prompts; the data is shuffled or read in order of unrelated rows).
4. Any order within the GPU's share. Frameworks reorder: verl's `_balance_batch` (HEAD) sorts
   each rank's share by workload and places the longest in the middle micro-batch, so one
   micro-batch can hold the longest b of the n. For any y ≥ 0 the longest b hold at most
   b·y + Σ_{i≤n} (T_i − y)⁺ tokens, so

       P(some micro-batch > x) ≤ min_y P(Σ_{i≤n} (T_i − y)⁺ > x − b·y)

   (y = 0 and n = b is the plain sum of one micro-batch). Chernoff: P(S > s) ≤
   min_θ e^{−θs + Σ_groups K_y(r_g θ)}, with the n rows in full groups of g (concentrating rows
   in groups only raises the bound: K is convex with K(0) = 0).
5. A known mean (`lengths.mean_*_tokens`: what the frameworks log, `response_length/mean`,
   `completions/mean_length`): among laws on [0, top] with mean m the two-point law on {0, top}
   has the largest MGF, so K is at most that law's as well (`_log_mgf`); the smaller bound holds.

Source: Chernoff bound (Chernoff 1952; any probability text, e.g. Boucheron, Lugosi & Massart,
"Concentration Inequalities", 2013, §2.2); verl/trainer/ppo/ray_trainer.py `_balance_batch`
("Place smaller micro-batches at both ends"). Assumes: the lengths of distinct prompts are
independent; lengths do not grow over training (as `risk`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import accumulate

Atoms = tuple[tuple[int, float], ...]
"""A discrete distribution: (value, probability) pairs, values rising, probabilities summing to 1."""

GOLDEN = (math.sqrt(5) - 1) / 2
SEARCH_ROUNDS = 80
"""Golden-section rounds on θ: the bracket shrinks by 0.618^80 ≈ 2e-17, below float resolution."""


def dominating_atoms(points: Sequence[tuple[int, float]]) -> Atoms:
    """Knots (value, F̲(value)), rising, the last at level 1 → the dominating discrete law (1.)."""
    out, below = [], 0.0
    for value, level in points:
        if level > below:
            out.append((value, level - below))
            below = level
    assert math.isclose(below, 1.0), "the last knot is the limit, at level 1"
    return tuple(out)


def comonotone_sum(a: Atoms, b: Atoms) -> Atoms:
    """The law of Q_a(U) + Q_b(U), U uniform (2.): at each level, the two quantiles added."""
    steps = {law: [(round(level, 12), value) for level, (value, _) in zip(accumulate(p for _, p in law), law)]
             for law in (a, b)}

    def quantile(law: Atoms, u: float) -> int:  # the smallest value whose cumulative level reaches u
        return next((value for level, value in steps[law] if level >= u - 1e-12), law[-1][0])

    out: dict[int, float] = {}
    below = 0.0
    for level in sorted({level for law in (a, b) for level, _ in steps[law]}):
        value = quantile(a, level) + quantile(b, level)
        out[value] = out.get(value, 0.0) + level - below
        below = level
    return tuple(sorted(out.items()))


def mean(atoms: Atoms) -> float:
    return sum(v * p for v, p in atoms)


def _log_mgf(atoms: Atoms, theta: float, mean_bound: float | None = None) -> float:
    """log E[e^{θX}] for X ≤ the dominating law, computed without overflow; with ``mean_bound``
    (E[X] ≤ m, X in [0, top]) also at most the two-point law's: e^{θx} lies under its chord on
    [0, top], so E[e^{θX}] ≤ 1 − m/top + (m/top)·e^{θ·top} (Hoeffding 1963, proof of Lemma 1)."""
    top = max(theta * v for v, p in atoms if p > 0)
    value = top + math.log(sum(p * math.exp(theta * v - top) for v, p in atoms if p > 0))
    limit = atoms[-1][0]
    if mean_bound is None or limit <= 0:
        return value
    q = min(1.0, mean_bound / limit)
    chord = theta * limit + math.log(q + (1 - q) * math.exp(-theta * limit)) if q > 0 else 0.0
    return min(value, chord)


def _groups(rows: int, group: int) -> list[tuple[int, int]]:
    """``rows`` in full groups of ``group`` and the remainder (3.), as (size, how many)."""
    g = max(1, min(group, rows))
    return [(g, rows // g)] + ([(rows % g, 1)] if rows % g else [])


def sum_tail(atoms: Atoms, rows: int, group: int, threshold: float, mean_bound: float | None = None) -> float:
    """Upper bound on P(Σ of ``rows`` rows > threshold), rows in groups of ``group`` (3.);
    ``mean_bound``: a known bound on one row's mean (`_log_mgf`)."""
    if threshold < 0:
        return 1.0
    if rows * atoms[-1][0] <= threshold:
        return 0.0
    sizes = _groups(rows, group)
    scale = 1.0 / max(atoms[-1][0] * sizes[0][0], 1)

    def log_bound(t: float) -> float:
        theta = t * scale
        return -theta * threshold + sum(k * _log_mgf(atoms, r * theta, mean_bound) for r, k in sizes)

    high = 1.0  # widen until the convex exponent rises again (it does: rows·max > threshold)
    while log_bound(high) < log_bound(high / 2) and high < 2.0**40:
        high *= 2
    low = 0.0
    for _ in range(SEARCH_ROUNDS):
        a, b = high - GOLDEN * (high - low), low + GOLDEN * (high - low)
        if log_bound(a) <= log_bound(b):
            high = b
        else:
            low = a
    return min(1.0, math.exp(min(0.0, log_bound((low + high) / 2))))


def excess(atoms: Atoms, y: int) -> Atoms:
    """The law of (X − y)⁺."""
    out: dict[int, float] = {}
    for value, p in atoms:
        out[max(0, value - y)] = out.get(max(0, value - y), 0.0) + p
    return tuple(sorted(out.items()))


def longest_share_tail(atoms: Atoms, batch: int, share: int, group: int, threshold: float,
                       mean_bound: float | None = None) -> float:
    """Upper bound on P(some ``batch`` of the ``share`` rows hold more than ``threshold``
    tokens), whatever order puts them together (4.). (X − y)⁺ ≤ X·(top − y)/top on [0, top], so
    a mean bound m carries over to the excess as m·(top − y)/top."""
    if share <= batch:
        return sum_tail(atoms, share, group, threshold, mean_bound)
    best, top = 1.0, atoms[-1][0]
    for y in sorted({0, *(v for v, _ in atoms)}):
        if batch * y > threshold:
            break
        excess_mean = None if mean_bound is None or top <= 0 else mean_bound * max(top - y, 0) / top
        best = min(best, sum_tail(excess(atoms, y), share, group, threshold - batch * y, excess_mean))
        if best == 0.0:
            break
    return best


def longer_than(prompt: Atoms, completion: Atoms, length: int) -> float:
    """Upper bound on P(P + C > length), whatever their dependence: for any split a + c =
    length, P + C > length needs P > a or C > c (union bound), each read from its dominating law."""
    def over(atoms: Atoms, v: int) -> float:
        return sum(p for value, p in atoms if value > v)

    splits = {v for v, _ in prompt if v <= length} | {length - v for v, _ in completion if v <= length} | {0, length}
    return min(1.0, min(over(prompt, a) + over(completion, length - a) for a in splits))
