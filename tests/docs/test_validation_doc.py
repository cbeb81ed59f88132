"""docs/validation.md is up to date with the JSON files it is rendered from (re-rendered here,
no trace re-run), and the real-step results in benchmarks/ are the same numbers."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_validation_doc", ROOT / "scripts" / "make_validation_doc.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_validation_doc_is_up_to_date() -> None:
    script = _script()
    rendered = script.render(*script.load())
    assert script.OUT.read_text(encoding="utf-8") == rendered, "run scripts/make_validation_doc.py"


def test_validation_doc_quotes_the_worst_disagreement_of_each_table() -> None:
    text = (ROOT / "docs" / "validation.md").read_text(encoding="utf-8")
    summary = text.split("## Summary", 1)[1]
    assert summary.count("worst") == 3


def test_benchmark_results_hold_the_same_real_step_numbers() -> None:
    docs = (ROOT / "docs" / "validation" / "real_steps.json").read_text(encoding="utf-8")
    assert (ROOT / "benchmarks" / "results" / "real-steps.json").read_text(encoding="utf-8") == docs
