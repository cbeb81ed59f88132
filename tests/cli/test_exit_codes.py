"""Exit codes that cannot lie (issue 15): a failure of oomless itself exits 3 with one line,
never 1 ("does not fit"), for commands inside and outside `run_guarded`."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from oomless.cli import main as cli_main
from oomless.errors import EXIT_DOES_NOT_FIT, EXIT_INTERNAL_ERROR
from tests.cli.conftest import QUICKSTART


def _boom(*_args: object, **_kwargs: object) -> None:
    raise ZeroDivisionError("injected failure")


def test_an_internal_error_in_plan_exits_3_with_one_line(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    import oomless.planner.plan as plan_module

    monkeypatch.setattr(plan_module, "make_plan", _boom)
    result = runner.invoke(cli_main.app, ["plan", str(QUICKSTART)])
    assert result.exit_code == EXIT_INTERNAL_ERROR != EXIT_DOES_NOT_FIT
    lines = result.output.strip().splitlines()
    assert lines == ["internal error: ZeroDivisionError: injected failure; rerun with --debug and report it"]


def test_debug_shows_the_traceback_and_keeps_the_code(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    import oomless.planner.plan as plan_module

    monkeypatch.setattr(plan_module, "make_plan", _boom)
    result = runner.invoke(cli_main.app, ["--debug", "plan", str(QUICKSTART)])
    assert result.exit_code == EXIT_INTERNAL_ERROR
    assert "Traceback" in result.output


def test_a_command_outside_run_guarded_exits_3_through_main(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    import oomless.catalog.gpus as gpus_module

    monkeypatch.setattr(gpus_module, "gpu_ids", _boom)
    with pytest.raises(SystemExit) as exit_info:
        cli_main.main(["gpus"])
    assert exit_info.value.code == EXIT_INTERNAL_ERROR
    assert capsys.readouterr().err.startswith("internal error: ZeroDivisionError")
