"""Mutated spec files through the command line (issue 15): `oomless plan` exits 0, 1 or 2
with at most one line on stderr for a bad input — never 3 (an internal error) and never a
traceback."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from oomless.cli.main import app
from oomless.errors import EXIT_BAD_INPUT, EXIT_DOES_NOT_FIT, EXIT_FITS
from tests.fuzz.strategies import fuzz_settings, mutated_text
from tests.helpers import EXAMPLES

SPECS = sorted([EXAMPLES / "quickstart.yaml", *(EXAMPLES / "seeds").glob("*.yaml")])
TEXTS = {path: path.read_text(encoding="utf-8") for path in SPECS}
"""Read once: other work editing an example mid-run must not change what hypothesis replays."""


@fuzz_settings()
@given(st.sampled_from(SPECS), st.data())
def test_a_mutated_spec_file_gets_a_verdict_or_one_line(tmp_path_factory, original, data) -> None:
    path = tmp_path_factory.mktemp("cli") / "spec.yaml"
    path.write_text(data.draw(mutated_text(TEXTS[original])), encoding="utf-8")
    result = CliRunner().invoke(app, ["plan", str(path), "--json"])
    assert result.exit_code in (EXIT_FITS, EXIT_DOES_NOT_FIT, EXIT_BAD_INPUT), result.output[-500:]
    assert "Traceback" not in result.output
    if result.exit_code == EXIT_BAD_INPUT:
        assert len(result.output.strip().splitlines()) == 1, result.output[-500:]
