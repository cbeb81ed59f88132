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

from ..errors import EXIT_BAD_INPUT, EXIT_INTERNAL_ERROR, EXIT_INTERRUPTED, InputError

app = typer.Typer(
    name="oomless",
    help="Plan GPU and host memory of RL fine-tuning (GRPO) before a GPU is touched.\n\n"
    "Exit codes: 0 fits, 1 does not fit, 2 bad input, 3 internal error (a bug in oomless).",
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


def _show_traceback() -> None:
    if _state["debug"]:
        import traceback

        traceback.print_exc()


def internal_error_exit(err: BaseException) -> typer.Exit:
    """One line for a failure of oomless itself and `EXIT_INTERNAL_ERROR`, never 1: a crash
    must not read as the verdict "does not fit"."""
    _show_traceback()
    what = f"{type(err).__name__}: {err}".splitlines()[0][:300] if str(err) else type(err).__name__
    typer.echo(f"internal error: {what}; rerun with --debug and report it", err=True)
    return typer.Exit(EXIT_INTERNAL_ERROR)


def run_guarded(fn: Callable[[], int]) -> None:
    """Run a command body; user errors become one line on stderr and exit code 2, any other
    exception one line and exit code 3."""
    try:
        code = fn()
    except InputError as err:
        _show_traceback()
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except (typer.Exit, typer.Abort, SystemExit):
        raise
    except KeyboardInterrupt:
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except Exception as err:  # noqa: BLE001 - the one place every failure becomes an exit code
        raise internal_error_exit(err) from None
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
    try:
        return app(args=argv if argv is not None else sys.argv[1:], prog_name="oomless")
    except KeyboardInterrupt:
        raise SystemExit(EXIT_INTERRUPTED) from None
    except Exception as err:  # noqa: BLE001 - commands outside run_guarded (models, gpus, schema)
        raise SystemExit(internal_error_exit(err).exit_code) from None
