"""The `oomless` command line: a thin layer over the library.

Each command lives in its own module; this one wires them up and maps known exceptions to a
one-line message and an exit code (see `oomless.errors`). Heavy modules are imported lazily
inside commands so `oomless --help` starts fast.

Terminal conventions: `-h`/`--help` and `--version` on the root and on every command; output
width and colour are rich's own detection (`COLUMNS`, the terminal's size, no colour when
stdout is not a terminal or `NO_COLOR` is set); a closed pipe (`oomless plan x.yaml | head -1`)
ends the output quietly and keeps the command's exit code (`_PipeSafeRaw`).
"""

from __future__ import annotations

import functools
import gc
import io
import os
import sys
import types
from collections.abc import Callable
from typing import Any

import typer
from typer.core import TyperGroup

from .. import __version__
from ..errors import EXIT_BAD_INPUT, EXIT_INTERNAL_ERROR, EXIT_INTERRUPTED, InputError

COMMAND_MODULE_SUFFIX = "_cmd"
"""Every `cli/*_cmd.py` module has `register(app)`, which declares its commands; a command
named `x-y` is looked for in `x_y_cmd.py` first (`catalog_cmd.py` holds `gpus` and `schema`)."""


class _CommandsOnDemand(TyperGroup):
    """The root group, building a command only when it is asked for: `oomless plan` imports
    `plan_cmd.py` and builds that command's options alone, where typer builds every command of
    every module up front (16 commands, ~25 ms of the ~0.5 s start-up here, plus ~10 ms of
    imports). Listing them (`oomless --help`, an unknown name, `.commands`) loads every
    module, in module-name order and each module's own order, as eager registration did. One
    definition stays: each module's `register`; nothing here names a command."""

    def __init__(self, **attrs: Any) -> None:
        self._built: dict[str, Any] = {}
        self._modules_loaded: dict[str, list[str]] = {}
        super().__init__(**attrs)

    @property
    def commands(self) -> dict[str, Any]:  # type: ignore[override]
        """Every command, as click's `Group.commands` (loads every command module)."""
        self._load_all()
        return self._built

    @commands.setter
    def commands(self, value: Any) -> None:
        self._built = dict(value)

    def add_command(self, cmd: Any, name: str | None = None) -> None:
        self._built[name or cmd.name] = cmd

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self._built:
            guess = cmd_name.replace("-", "_") + COMMAND_MODULE_SUFFIX
            if guess in _command_modules():
                self._load(guess)
        if cmd_name not in self._built:
            self._load_all()
        return self._built.get(cmd_name)

    def list_commands(self, ctx: Any) -> list[str]:
        self._load_all()
        return [name for module in _command_modules() for name in self._modules_loaded[module]]

    def _load_all(self) -> None:
        for module in _command_modules():
            self._load(module)

    def _load(self, module: str) -> None:
        if module in self._modules_loaded:
            return
        import importlib

        import typer.main

        declared = typer.Typer()
        importlib.import_module(f"{__package__}.{module}").register(declared)
        names = []
        for info in declared.registered_commands:
            cmd = typer.main.get_command_from_info(info, pretty_exceptions_short=app.pretty_exceptions_short,
                                                   rich_markup_mode=app.rich_markup_mode)
            self._built[cmd.name] = cmd
            names.append(cmd.name)
        self._modules_loaded[module] = names


@functools.lru_cache(maxsize=1)
def _command_modules() -> tuple[str, ...]:
    """The `cli/*_cmd.py` modules by name (file names only: nothing is imported)."""
    import pkgutil

    from .. import cli

    return tuple(sorted(m.name for m in pkgutil.iter_modules(cli.__path__) if m.name.endswith(COMMAND_MODULE_SUFFIX)))


app = typer.Typer(
    name="oomless",
    help="Plan GPU and host memory of RL fine-tuning (GRPO) before a GPU is touched.\n\n"
    "Exit codes: 0 fits, 1 does not fit, 2 bad input, 3 internal error (a bug in oomless).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
    cls=_CommandsOnDemand,
)

_state = {"debug": False, "gc_paused": False}
VERSION_FLAG = "--version"


def version_line() -> str:
    return f"oomless {__version__}"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(version_line())
        raise typer.Exit(0)


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks instead of one-line errors."),
    version: bool = typer.Option(False, VERSION_FLAG, is_eager=True, callback=_print_version,
                                 help="Print oomless's version and exit (also after any command)."),
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


def run_guarded(fn: Callable[[], int], one_shot: bool = False) -> None:
    """Run a command body; user errors become one line on stderr and exit code 2, any other
    exception one line and exit code 3. The cyclic garbage collector paused for start-up
    (`main`) resumes first, unless the body is ``one_shot``: it does a bounded piece of work
    (one plan) whose imports are most of its time, and the process ends after it."""
    if _state["gc_paused"] and not one_shot:
        _resume_gc()
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


class _PipeSafeRaw(io.RawIOBase):
    """A raw writer on a file descriptor that drops what a closed pipe no longer reads: the
    first EPIPE (`BrokenPipeError`; Python ignores SIGPIPE) marks it broken, and every later
    write is dropped, so a reader that stops early (`| head -1`) leaves no traceback, no
    "Exception ignored" line at exit (exit code 120), and the command's own exit code."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd
        self.broken = False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, data: Any) -> int:
        size = len(memoryview(data).cast("B"))
        if not self.broken:
            try:
                return os.write(self._fd, data)
            except BrokenPipeError:
                self.broken = True
        return size

    def close(self) -> None:  # fd 1 stays open: the interpreter owns it
        self.flush()


def _pipe_safe_stdout() -> None:
    """Put `_PipeSafeRaw` under `sys.stdout`, keeping its encoding and buffering; a stdout
    without a file descriptor (a test runner's capture) is left as it is."""
    stdout = sys.stdout
    try:
        fd = stdout.fileno()
        stdout.flush()
    except (AttributeError, OSError, ValueError):
        return
    buffered = io.BufferedWriter(_PipeSafeRaw(fd))
    sys.stdout = io.TextIOWrapper(buffered, encoding=stdout.encoding, errors=stdout.errors,
                                  line_buffering=stdout.line_buffering,
                                  write_through=getattr(stdout, "write_through", False))


PYDANTIC_PLUGINS_OFF = ("__all__", "1", "true")
"""Values of PYDANTIC_DISABLE_PLUGINS with which pydantic loads no plugin at all (pydantic 2.x
`pydantic/plugin/_loader.py`, `get_plugins`)."""
_PYDANTIC_PLUGIN_LOADER = "pydantic.plugin._loader"


class _NoPydanticPlugins(types.ModuleType):
    """Stands in for `pydantic.plugin._loader` while plugins are off. Pydantic imports that
    module when it builds its first validator, and the module imports `importlib.metadata`
    (email, zipfile, csv, socket, ...: ~25 ms here) only to scan entry points, which the
    switch skips anyway. Its one function answers as pydantic's own does with the switch on;
    with the switch turned off later, or for any other name a newer pydantic asks of it, the
    real module is imported and answers."""

    def get_plugins(self) -> Any:
        if os.environ.get("PYDANTIC_DISABLE_PLUGINS") in PYDANTIC_PLUGINS_OFF:
            return ()
        return self._real().get_plugins()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # the import system probes `__path__` and the like: a plain module has none
            raise AttributeError(name)
        return getattr(self._real(), name)

    def _real(self) -> Any:
        import importlib

        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        return importlib.import_module(self.__name__)


def _skip_pydantic_plugin_scan() -> None:
    """Pydantic looks for plugins (observability hooks) in every installed distribution's entry
    points when it builds its first validator: a tenth of a second on a machine with torch
    installed, for hooks oomless's own models never need. A value the user set is kept; with
    plugins off, the loader module is not imported either (`_NoPydanticPlugins`).
    Source: pydantic docs, "Plugins" (PYDANTIC_DISABLE_PLUGINS), pydantic/plugin/_loader.py."""
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    if os.environ["PYDANTIC_DISABLE_PLUGINS"] in PYDANTIC_PLUGINS_OFF and _PYDANTIC_PLUGIN_LOADER not in sys.modules:
        sys.modules[_PYDANTIC_PLUGIN_LOADER] = _NoPydanticPlugins(_PYDANTIC_PLUGIN_LOADER)


def _asks_version(args: list[str]) -> bool:
    """`--version` after a command (`oomless plan --version`): before any `--`."""
    return VERSION_FLAG in (args[:args.index("--")] if "--" in args else args)


def _pause_gc() -> None:
    """Start-up builds tens of thousands of long-lived objects (modules, classes, pydantic
    validators: ~38,000 tracked ones by the end of `oomless plan`) and hardly any garbage, yet
    the cyclic collector walks them again and again while they appear (~60 collections):
    ~30 ms of `oomless plan` here. Paused from `main` until a command's
    body starts (`run_guarded`); through a one-shot body such as plan's, to the end, where
    what was built is frozen rather than collected (`main`)."""
    if gc.isenabled():
        gc.disable()
        _state["gc_paused"] = True


def _resume_gc() -> None:
    if _state["gc_paused"]:
        _state["gc_paused"] = False
        gc.enable()


def main(argv: list[str] | None = None) -> Any:
    """Console-script entry point. Usage errors (unknown option, missing argument) are
    click's plain three-line message and exit code 2, like every other bad input."""
    args = argv if argv is not None else sys.argv[1:]
    _skip_pydantic_plugin_scan()
    _pipe_safe_stdout()
    if _asks_version(args):
        typer.echo(version_line())
        raise SystemExit(0)
    _pause_gc()
    try:
        return app(args=args, prog_name="oomless")
    except KeyboardInterrupt:
        raise SystemExit(EXIT_INTERRUPTED) from None
    except Exception as err:  # noqa: BLE001 - commands outside run_guarded (models, gpus, schema)
        raise SystemExit(internal_error_exit(err).exit_code) from None
    finally:
        if argv is not None:
            # Called in-process with its arguments (tests, scripts): the collector is resumed.
            _resume_gc()
        elif _state["gc_paused"]:
            # The process's entry point (the console script, `python -m oomless`) after a
            # one-shot body, help or a usage error: the process ends here. Resuming would only
            # add a collection of all that start-up built, and the interpreter's final full
            # collection walks it all again (~50 ms here): frozen, it is left out of both.
            # Exit handlers, flushes and reference-counted clean-up still run.
            gc.freeze()
