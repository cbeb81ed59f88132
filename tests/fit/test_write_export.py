"""`fit --write x.yaml --export FW` on fit's own answers: every framework's files are written;
values a framework has no key for are named together in one message instead of failing on the
first (issue 16: TRL stopped on `full_bf16`, then `max_num_seqs`, then `max_num_batched_tokens`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from oomless.adapters import FRAMEWORKS
from oomless.adapters.patch.export import export_fitted
from oomless.cli.main import app
from oomless.fit.search import FitOptions, fit_file

ROOT = Path(__file__).resolve().parents[2]
S1 = ROOT / "examples" / "seeds" / "s1-before.yaml"


@pytest.fixture(scope="module")
def best():
    result = fit_file(S1, FitOptions(top_k=0))
    assert result.best is not None
    return result.best


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_every_framework_writes_fits_answer(best, framework: str, tmp_path: Path) -> None:
    paths, message = export_fitted(framework, best.run.spec, best.run.arch, tmp_path / framework)
    assert paths and all(p.is_file() and p.read_text() for p in paths)
    if message is not None:
        assert message.startswith(f"{framework} cannot express") and "\n" not in message
        fields = re.findall(r"(?:: |; )([a-z_]+(?:\.[a-z_]+)*) \(", message)
        assert fields
        assert len(fields) == len(set(fields)), "each field named once"


def test_cli_export_trl_succeeds_and_names_every_field_at_once(tmp_path: Path) -> None:
    target = tmp_path / "x.yaml"
    result = CliRunner().invoke(app, ["fit", str(S1), "--write", str(target), "--export", "trl", "--top", "0"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "x-trl" / "grpo_config.yaml").is_file() and target.is_file()
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: --export:")]
    assert len(warnings) <= 1
    if warnings:
        assert "logits" in warnings[0] or "max_num_seqs" in warnings[0]


def test_existing_export_folder_is_refused_in_one_line(best, tmp_path: Path) -> None:
    export_fitted("swift", best.run.spec, best.run.arch, tmp_path / "o")
    from oomless.errors import InputError

    with pytest.raises(InputError, match="exists"):
        export_fitted("swift", best.run.spec, best.run.arch, tmp_path / "o")
