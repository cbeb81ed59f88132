"""The `oomless` command line: a thin layer over the library.

Each command lives in its own module; this one wires them up and maps known exceptions to a
one-line message and an exit code (see `oomless.errors`). Heavy modules are imported lazily
inside commands so `oomless --help` starts fast.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import typer

from ..errors import EXIT_BAD_INPUT, InputError

app = typer.Typer(
    name="oomless",
    help="Plan GPU and host memory of RL fine-tuning (GRPO) before a GPU is touched.\n\n"
    "Exit codes: 0 fits, 1 does not fit, 2 bad input.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

_state = {"debug": False}


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks instead of one-line errors."),
) -> None:
    _state["debug"] = debug


def run_guarded(fn: Callable[[], int]) -> None:
    """Run a command body; turn user errors into one line on stderr and exit code 2."""
    try:
        code = fn()
    except InputError as err:
        if _state["debug"]:
            import traceback

            traceback.print_exc()
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    raise typer.Exit(code)


def _register() -> None:
    """Every `cli/*_cmd.py` module registers its commands (each imports its heavy parts lazily)."""
    import importlib
    import pkgutil

    from .. import cli

    for info in sorted(pkgutil.iter_modules(cli.__path__), key=lambda m: m.name):
        if info.name.endswith("_cmd"):
            importlib.import_module(f"{cli.__name__}.{info.name}").register(app)


_register()


def main(argv: list[str] | None = None) -> Any:
    """Console-script entry point. Usage errors (unknown option, missing argument) are
    click's plain three-line message and exit code 2, like every other bad input."""
    return app(args=argv if argv is not None else sys.argv[1:], prog_name="oomless")
