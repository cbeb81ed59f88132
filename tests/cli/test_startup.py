"""Start-up (issue 17.0): what `oomless plan` on a shipped example imports, and the Hub fast
paths that keep huggingface_hub (and its HTTP client) out of it. Timings are a benchmark
(benchmarks/startup.py), never a test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from oomless.catalog import hub
from tests.helpers import ROOT

PLAN_AND_LIST_MODULES = """
import contextlib, io, json, sys
from oomless.cli.main import main
out = io.StringIO()
try:
    with contextlib.redirect_stdout(out):
        main(["plan", sys.argv[1]])
except SystemExit as end:
    code = end.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""

NOT_AT_START_UP = ("huggingface_hub", "httpx2", "httpx", "packaging", "torch", "transformers", "matplotlib", "jinja2")
"""Packages a plan of a catalog model with an empty HF cache has no use for."""


def test_plan_of_a_catalog_model_imports_no_hub_client(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "empty-cache")}
    done = subprocess.run([sys.executable, "-c", PLAN_AND_LIST_MODULES, str(ROOT / "examples" / "quickstart.yaml")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False, env=env)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["code"] == 0
    loaded = {name.split(".")[0] for name in got["modules"]}
    assert loaded.isdisjoint(NOT_AT_START_UP), sorted(loaded & set(NOT_AT_START_UP))


def _library_says_repo_id(ref: str) -> bool:
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(ref)
    except HFValidationError:
        return False
    return True


REPO_ID_LIKE = st.text(alphabet="abcXYZ019-_./", min_size=1, max_size=12) | st.sampled_from(
    ["Qwen/Qwen2.5-7B-Instruct", "gpt2", "a" * 96, "a" * 97, "org/" + "b" * 96, "x.git", "a--b", "a..b",
     "-a", "a-", "_a", "a/b/c", "/a", "a/", "é/b"])


@settings(max_examples=400, deadline=None)
@given(REPO_ID_LIKE)
def test_repo_id_fast_path_agrees_with_huggingface_hub(ref: str) -> None:
    assert hub.looks_like_repo_id(ref) == _library_says_repo_id(ref)


def test_cached_file_of_an_uncached_repo_is_none_without_the_hub(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    assert hub.cached_file("Qwen/Qwen2.5-7B-Instruct", "config.json", None) is None
    assert hub.repo_cache_folder("Qwen/Qwen2.5-7B-Instruct") == tmp_path / "models--Qwen--Qwen2.5-7B-Instruct"
