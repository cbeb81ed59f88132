"""Where charts may go: outputs named by the user are replaced, inputs never."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from oomless.charts.files import check_outputs
from oomless.errors import InputError
from tests.charts.conftest import SEEDS
from tests.cli.conftest import run_oomless


def test_plan_refuses_to_write_over_its_spec(tmp_path: Path) -> None:
    spec = tmp_path / "spec.html"  # a YAML spec under an unlucky name
    shutil.copy(SEEDS / "s1-after.yaml", spec)
    before = spec.read_bytes()
    done = run_oomless("plan", str(spec), "--html", str(spec))
    assert done.returncode == 2
    assert done.stderr.strip() == f"error: --html: {str(spec)!r} is an input of this command; refusing to overwrite it"
    assert spec.read_bytes() == before


def test_compare_refuses_to_write_over_either_spec(tmp_path: Path) -> None:
    after = tmp_path / "after.png"
    shutil.copy(SEEDS / "s0-after.yaml", after)
    done = run_oomless("compare", str(SEEDS / "s0-before.yaml"), str(after), "--png", str(after))
    assert done.returncode == 2
    assert "is an input of this command" in done.stderr
    assert after.read_text(encoding="utf-8").startswith("# Seed case S0")


def test_existing_chart_files_are_replaced(tmp_path: Path) -> None:
    page = tmp_path / "plan.html"
    page.write_text("old", encoding="utf-8")
    done = run_oomless("plan", str(SEEDS / "s3-after.yaml"), "--html", str(page))
    assert done.returncode == 0, done.stderr
    assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert [p.name for p in tmp_path.iterdir()] == ["plan.html"]  # no temporary file left


@pytest.mark.parametrize(
    ("outputs", "message"),
    [
        ({"--html": "plan.yaml"}, "--html: 'DIR/plan.yaml' must end in .html or .htm"),
        ({"--png": "plan.jpg"}, "--png: 'DIR/plan.jpg' must end in .png"),
        ({"--png": "missing/plan.png"}, "--png: folder 'DIR/missing' does not exist"),
        ({"--html": "same.html", "--png": "same.html"}, "--png: 'DIR/same.html' must end in .png"),
    ],
)
def test_bad_output_paths(tmp_path: Path, outputs: dict[str, str], message: str) -> None:
    with pytest.raises(InputError) as err:
        check_outputs({flag: tmp_path / name for flag, name in outputs.items()})
    assert str(err.value) == message.replace("DIR", str(tmp_path))


def test_a_directory_is_not_a_chart_file(tmp_path: Path) -> None:
    (tmp_path / "x.png").mkdir()
    with pytest.raises(InputError, match="is a directory"):
        check_outputs({"--png": tmp_path / "x.png"})


def test_html_and_png_may_not_be_one_file(tmp_path: Path) -> None:
    (tmp_path / "x.html").write_text("", encoding="utf-8")
    (tmp_path / "x.png").symlink_to(tmp_path / "x.html")
    with pytest.raises(InputError, match="is also the --html file"):
        check_outputs({"--html": tmp_path / "x.html", "--png": tmp_path / "x.png"})


def test_cli_bad_output_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = run_oomless("plan", str(SEEDS / "s1-after.yaml"), "--png", str(tmp_path / "nope" / "x.png"))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"error: --png: folder {str(tmp_path / 'nope')!r} does not exist"]
    assert done.stdout == ""
