"""The HTML pages' templates: user strings escaped, Jinja2 loaded only for a page, shipped in the wheel."""

from __future__ import annotations

import fnmatch
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from oomless.charts import write_charts, write_compare_charts
from oomless.charts.run import write_run_chart
from tests.charts.conftest import SEEDS, parse_html
from tests.helpers import ROOT

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'
HOSTILE_FILE = "<script>alert(1)<img src=x onerror=alert(1)>.yaml"  # no "/" in a file name
TEMPLATES = ROOT / "src" / "oomless" / "charts" / "templates"


def _assert_inert(text: str, hostile: str) -> None:
    """The page holds ``hostile`` only as text: no element of it, its raw form nowhere."""
    parsed = parse_html(text)
    scripts = [a for tag, a in parsed.elements if tag == "script"]
    assert len(scripts) == 2 and scripts[0]["type"] == "application/json" and scripts[1] == {}
    assert not [a for tag, a in parsed.elements if tag == "img" or "onerror" in a]
    assert hostile not in text
    assert "&lt;script&gt;" in text  # shown, escaped


def test_model_name_and_warnings_are_escaped(tmp_path: Path, documents: dict[str, Any]) -> None:
    doc = json.loads(json.dumps(documents["s1-after"]))
    doc["model"]["id"] = HOSTILE
    doc["warnings"] = [HOSTILE]
    page = tmp_path / "plan.html"
    write_charts(doc, html=page, png=None)
    text = page.read_text(encoding="utf-8")
    _assert_inert(text, HOSTILE)
    assert parse_html(text).scripts["oomless-plan"] and json.loads(parse_html(text).scripts["oomless-plan"]) == doc


def test_spec_paths_are_escaped_in_the_compare_page(tmp_path: Path) -> None:
    from oomless.cli.compare_cmd import build_comparison

    before, after = tmp_path / ("before" + HOSTILE_FILE), tmp_path / ("after" + HOSTILE_FILE)
    shutil.copy(SEEDS / "s0-before.yaml", before)
    shutil.copy(SEEDS / "s0-after.yaml", after)
    page = tmp_path / "compare.html"
    write_compare_charts(build_comparison(before, after), html=page, png=None)
    text = page.read_text(encoding="utf-8")
    _assert_inert(text, HOSTILE_FILE)
    title = text.split("<title>")[1].split("</title>")[0]
    assert "&lt;script&gt;alert(1)&lt;img src=x onerror=alert(1)&gt;.yaml" in title


def test_phase_names_of_a_run_are_escaped(tmp_path: Path) -> None:
    records = [{"step": s, "phase": HOSTILE, "peak_bytes": 2**30 + s, "planned_bytes": 2**30} for s in range(3)]
    page = tmp_path / "run.html"
    write_run_chart(records, html=page, title=f"run of {HOSTILE}")
    _assert_inert(page.read_text(encoding="utf-8"), HOSTILE)


def _modules_after(code: str) -> set[str]:
    probe = code + "\nimport sys; print(sorted(m for m in ('jinja2', 'markupsafe') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1].replace("'", '"')))


def _plan(*args: str) -> str:
    return f"from oomless.cli.main import main\ntry:\n    main(['plan', {str(SEEDS / 's1-after.yaml')!r}, {', '.join(map(repr, args))}])\nexcept SystemExit:\n    pass"


def test_jinja2_is_imported_only_to_write_a_page(tmp_path: Path) -> None:
    assert _modules_after("import oomless.cli.main") == set()
    assert _modules_after(_plan()) == set()
    assert _modules_after(_plan("--json")) == set()
    assert _modules_after(_plan("--html", str(tmp_path / "p.html"))) == {"jinja2", "markupsafe"}  # the probe can see it


def test_every_template_is_package_data() -> None:
    """The wheel ships what `[tool.setuptools.package-data]` names: every template must match."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["oomless"]
    files = [p.relative_to(ROOT / "src" / "oomless").as_posix() for p in TEMPLATES.rglob("*") if p.is_file()]
    assert files and {"base.html.j2", "plan.html.j2", "compare.html.j2", "run.html.j2"} <= {Path(f).name for f in files}
    assert [f for f in files if not any(fnmatch.fnmatch(f, p) for p in patterns)] == []


@pytest.mark.parametrize("template", ["plan.html.j2", "compare.html.j2", "run.html.j2"])
def test_every_page_extends_the_base(template: str) -> None:
    assert (TEMPLATES / template).read_text(encoding="utf-8").count('{% extends "base.html.j2" %}') == 1
