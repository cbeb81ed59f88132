"""Human-readable `oomless fit` output (rich tables). Sizes in GiB/MiB; seconds are estimates."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..fit.search import Choice, FitResult
from ..fit.write import _value
from ..units import format_bytes

MAX_CHANGES_SHOWN = 4


def _seconds(total: float) -> str:
    return "no rollout possible" if math.isinf(total) else f"{total:.1f} s"


def _change(field: str, old: Any, new: Any) -> str:
    return escape(f"{field}: {_value(old)} → {_value(new)}")


def _short(choice: Choice) -> str:
    items = [_change(f, o, n) for f, (o, n) in choice.changes.items()]
    extra = f" (+{len(items) - MAX_CHANGES_SHOWN} more)" if len(items) > MAX_CHANGES_SHOWN else ""
    return "; ".join(items[:MAX_CHANGES_SHOWN]) + extra or "no change"


def _gpu_peak(choice: Choice) -> int:
    return max(g.peak_bytes for g in choice.plan.devices)


class _Printer:
    """``console.print`` without rich's automatic highlighting when the console writes no
    styles at all (no colour system: a pipe, a file), where highlighting (its regular
    expressions compiled on first use, then run over every line and table cell) only spends
    time; the text written is the same. A terminal keeps the console's own setting."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.highlight = None if console.color_system is not None else False

    def print(self, *objects: Any) -> None:
        self.console.print(*objects, highlight=self.highlight)


def render_fit(result: FitResult, margin: str, console: Console | None = None,
               native: tuple[str, list[str], int] | None = None) -> None:
    """``native``: (framework, the patched answer's changes in its own keys, which answer: 0 the
    best, k the k-th alternative) when the run came `--from` it; shown beside the spec fields."""
    out = _Printer(console or Console())
    inp = result.input_plan
    verdict = "fits" if inp.fits else f"does not fit ({inp.binding.phase} on the {inp.binding.device_role} {inp.binding.device})"
    out.print(f"Input: {verdict}; predicted {_seconds(result.input_estimate.total_s)} per optimizer step.")
    best = result.best
    if best is None:
        out.print(f"[bold red]NOTHING FITS[/] with a {margin} margin among the searched memory knobs"
                  + (f" and the allowed changes ({', '.join(sorted(result.allowed))})" if result.allowed else "")
                  + ". Try --allow lengths/lora_rank/num_generations/max_pixels/beta, more or larger GPUs.")
        timeline = inp.timeline
        if inp.binding.kind == "host_steps" and timeline is not None and timeline.growth:
            out.print(f"  What breaks is growth over the run's steps (host RAM crosses its limit at step ~{timeline.crossing_step}), "
                      f"which no memory knob removes: {escape(timeline.terms())}.")
    else:
        out.print(f"[bold green]FOUND[/] — fastest configuration that fits with a {margin} margin: "
                  f"predicted {_seconds(best.estimate.total_s)} per optimizer step, "
                  f"GPU peak {format_bytes(_gpu_peak(best))}, tightest constraint {format_bytes(best.min_slack_bytes)} free.")
        if not best.changes:
            out.print("  No change: the input already is the fastest fitting configuration found.")
        if native is not None and native[1] and native[2] == 0:
            out.print(f"  In {native[0]}'s own keys:")
            for line in native[1]:
                out.print(f"  • {escape(line)}")
            out.print("  (spec fields: " + escape(", ".join(best.changes)) + ")")
        else:
            for field, (old, new) in best.changes.items():
                out.print(f"  • {_change(field, old, new)}")
            if native is not None and native[1]:
                out.print(f"  {native[0]} cannot say all of it; alternative #{native[2]} in {native[0]}'s own keys:")
                for line in native[1]:
                    out.print(f"  • {escape(line)}")
        for warning in best.run.warnings:
            out.print(f"  warning: {escape(warning)}")
    if result.alternatives:
        table = Table(title="Alternatives (each re-planned; ranked by predicted step time and fewest changes)")
        for col in ("#", "step (est.)", "GPU peak", "tightest free", "changes"):
            table.add_column(col)
        for i, alt in enumerate(result.alternatives, 1):
            table.add_row(str(i), _seconds(alt.estimate.total_s), format_bytes(_gpu_peak(alt)), format_bytes(alt.min_slack_bytes), _short(alt))
        out.print(table)
    s = result.stats
    out.print(f"Searched {s.counts.space:,} configurations in {s.regions} regions ({s.counts.evaluated:,} evaluated, "
              f"{s.plans} make_plan calls, {s.rechecked} re-checks) in {s.seconds:.2f} s.")
    out.print("Step times are estimates of the cost model (oomless.perf); fit relies on their ranking, "
              "and every configuration shown fits in its own make_plan.")
    for note in result.notes:
        out.print(f"note: {escape(note)}")
