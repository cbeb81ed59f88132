"""`oomless fit --maximize FIELD`: exit codes, JSON, one-line errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from typer.testing import CliRunner

from oomless.cli.main import app
from oomless.errors import EXIT_BAD_INPUT, EXIT_FITS


def test_maximize_reports_the_largest_fitting_value(runner: CliRunner, write_spec: Callable[..., Path]) -> None:
    spec = write_spec()
    out = runner.invoke(app, ["fit", str(spec), "--maximize", "lengths.max_completion_tokens", "--json"])
    assert out.exit_code == EXIT_FITS, out.output
    doc = json.loads(out.output)
    assert doc["path"] == "lengths.max_completion_tokens"
    assert doc["held"]["value"] >= 1 and doc["with_knobs"]["value"] >= doc["held"]["value"]


def test_maximize_of_a_non_number_is_one_line(runner: CliRunner, write_spec: Callable[..., Path]) -> None:
    out = runner.invoke(app, ["fit", str(write_spec()), "--maximize", "model"])
    assert out.exit_code == EXIT_BAD_INPUT
    assert len(out.output.strip().splitlines()) == 1 and "--maximize" in out.output
