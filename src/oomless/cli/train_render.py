"""Human output of `oomless train`: the plan against the measurement, the reward curve."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from ..units import format_bytes


def render_outcome(outcome: Any, console: Console | None = None) -> None:
    out = console or Console()
    from ..telemetry import OVER_PLAN_TOLERANCE

    table = Table(title="plan vs actual (peak per phase, training device)",
                  caption=f"ratio: measured / planned; over plan (⚠): more than {100 * OVER_PLAN_TOLERANCE:.0f} % above, "
                          "as the run chart marks it")
    for column in ("phase", "planned", "measured peak", "ratio", "steps over plan", "s/step"):
        table.add_column(column, justify="left" if column == "phase" else "right")
    for r in outcome.rows:
        ratio = "—" if r["ratio"] is None else f"{r['ratio']:.2f}" + (" ⚠" if r["over_plan"] else "")
        table.add_row(
            r["phase"], format_bytes(r["planned_bytes"]) if r["planned_bytes"] else "—", format_bytes(r["peak_bytes"]),
            ratio, f"{r['num_steps_over_plan']}/{r['num_steps']}",
            "—" if r["seconds_per_step"] is None else f"{r['seconds_per_step']:.3f}",
        )
    out.print(table)
    if outcome.curve:
        curve = Table(title="mean reward per tenth of the run")
        for key in outcome.curve[0]:
            curve.add_column(key, justify="right")
        for row in outcome.curve:
            curve.add_row(*(str(v) for v in row.values()))
        out.print(curve)
    for event in outcome.events:
        out.print(
            f"out of memory at step {event['step']} ({event['phase']}): micro-batch "
            f"{event['micro_batch_size_before']} → {event['micro_batch_size_after']}, step redone on the same samples"
        )
    for note in outcome.notes:
        out.print(f"note: {note}")
    stopped = getattr(outcome, "interrupted_at_step", None)
    done = f"stopped at step {stopped} after" if stopped is not None else "trained in"
    out.print(f"{done} {outcome.seconds:.1f} s; telemetry, checkpoints and summary in {outcome.output_dir}")
