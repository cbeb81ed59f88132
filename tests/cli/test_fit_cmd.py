"""`oomless fit`: exit codes, `--write` (a new file, never an overwrite), `--json` keys,
`--export` failures as one line, and flag validation."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from oomless.cli.main import app
from oomless.errors import EXIT_BAD_INPUT, EXIT_DOES_NOT_FIT, EXIT_FITS
from tests.cli.conftest import S1_BEFORE, run_oomless

TOP_KEYS = {"schema_version", "oomless_version", "found", "spec", "margin", "allowed", "input", "best",
            "alternatives", "search", "notes", "estimates"}
CHOICE_KEYS = {"changes", "num_changes", "predicted_step_seconds", "step_terms", "min_margin_bytes", "binding",
               "gpu_peak_bytes", "host_peak_bytes", "region", "lowers_safety", "changes_training", "phase_peaks",
               "warnings", "spec"}


def _too_small(write_spec: Callable[..., Path]) -> Path:
    """7B weights on 4 GiB GPUs: nothing the memory knobs can do."""
    return write_spec(model="Qwen/Qwen2.5-7B-Instruct", **{"hardware.gpu": None, "hardware.gpu_capacity_gib": 4.0})


def test_exit_codes(runner: CliRunner, write_spec: Callable[..., Path]) -> None:
    assert runner.invoke(app, ["fit", str(S1_BEFORE), "--top", "0"]).exit_code == EXIT_FITS
    nothing = runner.invoke(app, ["fit", str(_too_small(write_spec))])
    assert nothing.exit_code == EXIT_DOES_NOT_FIT, nothing.output
    assert "NOTHING FITS" in nothing.stdout
    assert runner.invoke(app, ["fit", "no-such-spec.yaml"]).exit_code == EXIT_BAD_INPUT


def test_nothing_fits_because_of_growth_says_so(runner: CliRunner) -> None:
    """S2 on vLLM 0.7.3: every phase fits, the leak crosses Ray's threshold within the run; no
    knob removes a leak, and fit names it with its remedy rather than only suggesting knobs."""
    seed = Path(__file__).resolve().parents[2] / "examples" / "seeds" / "s2-after.yaml"
    done = runner.invoke(app, ["fit", str(seed), "--top", "0"], terminal_width=400)
    assert done.exit_code == EXIT_DOES_NOT_FIT, done.output
    assert "NOTHING FITS" in done.stdout and "growth over the run's steps" in done.stdout
    assert "vLLM 0.7.3 V0 engine" in done.stdout and "vLLM >= 0.8.0" in done.stdout


def test_installed_script_exit_code_and_one_line_errors() -> None:
    done = run_oomless("fit", str(S1_BEFORE), "--allow", "everything")
    assert done.returncode == EXIT_BAD_INPUT
    assert done.stderr.strip().splitlines() == ["error: --allow: unknown knob 'everything'; allowed: method, lora_rank, lengths, num_generations, max_pixels, beta, gpus"]


@pytest.mark.parametrize("args", [
    ["--margin", "1", "--margin-fraction", "0.1"], ["--margin", "-1"], ["--margin-fraction", "1.5"], ["--top", "-1"],
])
def test_bad_flags_exit_bad_input(runner: CliRunner, args: list[str]) -> None:
    result = runner.invoke(app, ["fit", str(S1_BEFORE), *args])
    assert result.exit_code == EXIT_BAD_INPUT
    assert result.stderr.startswith("error: --")


def test_json_keys(runner: CliRunner) -> None:
    result = runner.invoke(app, ["fit", str(S1_BEFORE), "--json", "--top", "2", "--margin", "1"])
    assert result.exit_code == EXIT_FITS, result.output
    doc = json.loads(result.stdout)
    assert set(doc) == TOP_KEYS
    assert doc["found"] is True and doc["margin"] == {"bytes": 2**30, "fraction": None}
    assert set(doc["best"]) == CHOICE_KEYS
    assert all(set(alt) == CHOICE_KEYS for alt in doc["alternatives"])
    assert len(doc["alternatives"]) <= 2
    assert doc["input"]["fits"] is False and doc["best"]["min_margin_bytes"] >= 2**30
    assert {"field", "from", "to"} == set(doc["best"]["changes"][0])
    assert doc["search"]["configurations"] >= doc["search"]["evaluated"] > 0


def test_write_saves_a_new_spec_that_fits(runner: CliRunner, tmp_path: Path) -> None:
    target = tmp_path / "fitted.yaml"
    result = runner.invoke(app, ["fit", str(S1_BEFORE), "--write", str(target), "--top", "0"])
    assert result.exit_code == EXIT_FITS, result.output
    text = target.read_text(encoding="utf-8")
    assert text.startswith("# Written by `oomless fit`") and str(S1_BEFORE) in text.splitlines()[0]
    assert "# Comments of the source spec:" in text  # the source's assumptions travel along
    assert runner.invoke(app, ["plan", str(target)]).exit_code == EXIT_FITS


def test_write_never_overwrites(runner: CliRunner, tmp_path: Path) -> None:
    target = tmp_path / "taken.yaml"
    target.write_text("keep me\n", encoding="utf-8")
    result = runner.invoke(app, ["fit", str(S1_BEFORE), "--write", str(target)])
    assert result.exit_code == EXIT_BAD_INPUT
    assert "already exists" in result.stderr
    assert target.read_text(encoding="utf-8") == "keep me\n"
    same = runner.invoke(app, ["fit", str(S1_BEFORE), "--write", str(S1_BEFORE)])
    assert same.exit_code == EXIT_BAD_INPUT and "input spec" in same.stderr


def test_export_to_an_unknown_framework_is_one_line(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(app, ["fit", str(S1_BEFORE), "--top", "0", "--export", "nonesuch",
                                 "--write", str(tmp_path / "f.yaml")])
    assert result.exit_code == EXIT_BAD_INPUT
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert result.stderr.startswith("error: --export: unknown framework 'nonesuch'")
    assert "FOUND" in result.stdout  # the search result is still shown
