"""`oomless chart RUN`: a run's measured peak per phase and step against its plan, from the
telemetry `oomless train` and `oomless watch` write (one schema, `oomless.telemetry`).

Examples:
    oomless chart runs/tiny-arith                        # writes runs/tiny-arith/memory.html
    oomless chart oomless-watch --png watch.png          # a watched job, as a PNG as well
    oomless chart oomless-watch/telemetry.jsonl --html m.html

Exit codes: 0 drawn; 2 bad input (no telemetry, a record of another schema, a bad path).
"""

from __future__ import annotations

from pathlib import Path

import typer

TELEMETRY_FILE = "telemetry.jsonl"
DEFAULT_HTML = "memory.html"
TITLES = {
    "cuda": "Peak GPU memory per phase: measured vs planned",
    "cpu": "Peak live tensor bytes per phase (CPU run): measured vs planned",
    "host": "Peak host memory of the watched process tree per phase",
}


def chart_command(
    run: Path = typer.Argument(..., help="A run folder holding telemetry.jsonl (oomless train / watch), or the file itself."),
    html: Path = typer.Option(None, "--html", help="HTML chart to write. Default: RUN/memory.html when no --png is given."),
    png: Path = typer.Option(None, "--png", help="PNG chart to write (needs the charts extra: matplotlib)."),
) -> None:
    """Draw a run's measured peak memory per phase and step against its plan."""
    from .main import run_guarded

    def body() -> int:
        from ..charts.run import write_run_chart
        from ..errors import InputError
        from ..telemetry import read_records

        path = run / TELEMETRY_FILE if run.is_dir() else run
        if not path.is_file():
            raise InputError("RUN", f"no telemetry at {path}; give a folder `oomless train` or `oomless watch` wrote")
        records = read_records(path)
        if not records:
            raise InputError("RUN", f"{path} holds no records (the run stopped before its first step?)")
        target = html if html is not None or png is not None else path.parent / DEFAULT_HTML
        devices = {r.get("device") for r in records}
        title = TITLES.get(devices.pop(), TITLES["cuda"]) if len(devices) == 1 else TITLES["cuda"]
        limits = [r["limit_bytes"] for r in records if isinstance(r.get("limit_bytes"), int)]
        write_run_chart(records, html=target, png=png, title=title, capacity_bytes=max(limits) if limits else None)
        for written in (target, png):
            if written is not None:
                typer.echo(f"wrote {written}", err=True)
        return 0

    run_guarded(body)


def register(app: typer.Typer) -> None:
    app.command("chart")(chart_command)
