"""The adapters' layout: one package per framework (reader, writer, keys), readers never import
writers, the planner never imports an adapter, hand-written files stay under ~400 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from oomless.adapters import ALIASES, FRAMEWORKS, canonical

SRC = Path(__file__).resolve().parents[2] / "src" / "oomless"
GENERATED = {"verl/keys.py", "openrlhf/keys.py"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {("." * n.level) + (n.module or "") for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_each_framework_is_a_package_whose_reader_never_imports_its_writer(framework: str) -> None:
    folder = SRC / "adapters" / framework
    assert {"__init__.py", "reader.py", "writer.py"} <= {p.name for p in folder.iterdir()}
    assert (folder / "keys.py").is_file()
    assert not any("writer" in name for name in _imports(folder / "reader.py"))


def test_the_planner_and_the_memory_model_never_import_an_adapter() -> None:
    for package in ("planner", "memory", "spec"):
        for path in (SRC / package).rglob("*.py"):
            assert not any("adapters" in name for name in _imports(path)), path


def test_hand_written_files_stay_small() -> None:
    for folder in (SRC / "adapters", SRC / "frontends"):
        for path in folder.rglob("*.py"):
            if path.relative_to(folder).as_posix() in GENERATED:
                continue
            assert len(path.read_text().splitlines()) <= 400, path


def test_aliases_name_the_frameworks() -> None:
    assert canonical("ms-swift") == "swift" and canonical("Open-Reasoner-Zero") == "orz"
    assert set(ALIASES.values()) <= set(FRAMEWORKS)
