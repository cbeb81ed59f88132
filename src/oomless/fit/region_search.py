"""Best-first search of one region: the fastest configurations predicted to fit.

Every configuration is a training choice t = (states, work) and an engine choice
e = (engine, graphs, utilization). Its score is its predicted step time plus λ per changed
field (a change must buy λ seconds to be worth making: the minimal-change rule), plus a
penalty that ranks configurations lowering a kept safety setting last, and both
slack and score add over t and e. So the search sorts the t's and the e's by score, drops
those that cannot fit with any partner, and walks pairs in increasing score, stopping as soon
as no remaining pair can enter the best `limit`.
"""

from __future__ import annotations

import heapq
import math
import operator
from dataclasses import dataclass

from .probe import Region

LOWERING_PENALTY_SECONDS = 1e9
"""Added to the score of a configuration that lowers a safety setting (`fit.safety`): it ranks
after every one that does not, whatever their step times."""
Pick = tuple[float, float, int, tuple[int, ...], tuple[int, ...]]
"""(score, seconds, changes, slack restricted to checked constraints, choice)."""


@dataclass
class Counts:
    space: int = 0
    """Configurations in the region (product of the factors' option counts)."""
    evaluated: int = 0
    """Configurations whose fit and score were computed (training + engine lists, and pairs)."""


def _picks(region: Region, factor_ids: range, seconds_of, lam: float, checked: list[int], base: list[int]) -> list[Pick]:
    """Every choice over the factors, in product order, that has a finite step time. The slack
    and change count of the choices' common prefixes are summed once, not per choice."""
    ids = list(factor_ids)
    options = [region.factors[i].options for i in ids]
    # Per option: its slack deltas on the checked constraints, its change count and penalty.
    deltas = [[tuple(region.deltas[i][j][c] for c in checked) for j in range(len(opts))] for i, opts in zip(ids, options)]
    costs = [[lam * o.num_changes for o in opts] for opts in options]
    changes = [[o.num_changes for o in opts] for opts in options]
    lowers = [[o.lowers_safety for o in opts] for opts in options]
    # (choice, slack, changes, lowers) over every factor but the last.
    prefixes: list[tuple[tuple[int, ...], tuple[int, ...], int, bool]] = [((), tuple(base), 0, False)]
    for k in range(len(ids) - 1):
        prefixes = [(choice + (j,), tuple(map(operator.add, slack, deltas[k][j])), n + changes[k][j], low or lowers[k][j])
                    for choice, slack, n, low in prefixes for j in range(len(options[k]))]
    last = len(ids) - 1
    out = []
    for head, head_slack, head_changes, head_lowers in prefixes:
        head_costs = [costs[k][i] for k, i in enumerate(head)]
        for j, (last_delta, last_cost) in enumerate(zip(deltas[last], costs[last])):
            choice = head + (j,)
            seconds = seconds_of(choice)
            if math.isinf(seconds):
                continue
            score = seconds
            for cost in head_costs:  # added one by one in factor order, as before, so scores
                score += cost        # (and their ties) are bit for bit those of the plain sum
            score += last_cost
            penalty = LOWERING_PENALTY_SECONDS if head_lowers or lowers[last][j] else 0.0
            slack = tuple(map(operator.add, head_slack, last_delta))
            out.append((score + penalty, seconds, head_changes + changes[last][j], slack, choice))
    return out


def training_picks(region: Region, lam: float, checked: list[int]) -> list[Pick]:
    zero = [0] * len(checked)
    return _picks(region, range(2), lambda c: region.train_seconds(*c), lam, checked, zero)


def engine_picks(region: Region, lam: float, checked: list[int]) -> list[Pick]:
    base = [region.slack0[c] for c in checked]
    if len(region.factors) == 2:
        seconds = region.engine_seconds(())
        return [(seconds, seconds, 0, tuple(base), ())]
    return _picks(region, range(2, len(region.factors)), region.engine_seconds, lam, checked, base)


def _feasible(picks: list[Pick], partners: list[Pick]) -> list[Pick]:
    """Picks that fit with at least the best partner on every constraint separately."""
    if not partners:
        return []
    best = [max(column) for column in zip(*(p[3] for p in partners))]  # per constraint, the partners' largest slack
    if not best:
        return list(picks)
    return [p for p in picks if min(map(operator.add, p[3], best)) >= 0]


def search_region(region: Region, lam: float, limit: int, counts: Counts) -> list[tuple[float, float, int, tuple[int, ...]]]:
    """Up to ``limit`` (score, seconds, changes, choice) predicted to fit, best first.
    Constraints `verify` marked are not checked here (make_plan re-checks every result)."""
    checked = [c for c in range(len(region.slack0)) if c not in region.unverified]
    train, engine = training_picks(region, lam, checked), engine_picks(region, lam, checked)
    counts.space += len(train) * len(engine)
    counts.evaluated += len(train) + len(engine)
    train, engine = _feasible(train, engine), _feasible(engine, train)
    train.sort()
    engine.sort()
    heap: list[tuple[float, float, int, tuple[int, ...]]] = []
    bound = math.inf
    for t in train:
        if not engine or t[0] + engine[0][0] >= bound:
            break
        for e in engine:
            score = t[0] + e[0]
            if score >= bound:
                break
            counts.evaluated += 1
            if not t[3] or min(map(operator.add, t[3], e[3])) >= 0:
                heapq.heappush(heap, (-score, t[1] + e[1], t[2] + e[2], t[4] + e[4]))
                if len(heap) > limit:
                    heapq.heappop(heap)
                if len(heap) == limit:
                    bound = -heap[0][0]
    return sorted((-s, sec, ch, choice) for s, sec, ch, choice in heap)
