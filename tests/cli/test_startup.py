"""Start-up (issue 17.0): what `oomless plan` on a shipped example imports (only its own
command's module, no Hub client, no pydantic entry-point scan, no chart or torch stack), the
Hub fast paths that keep huggingface_hub (and its HTTP client) out of it, and the start-up
switches of `oomless.cli.main` (pydantic's plugin loader stand-in, the paused collector).
Timings are a benchmark (benchmarks/startup.py), never a test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
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
        main(["plan", *sys.argv[1:]])
except SystemExit as end:
    code = end.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""

NOT_AT_START_UP = ("huggingface_hub", "httpx2", "httpx", "packaging", "torch", "transformers", "matplotlib", "jinja2")
"""Packages a plan of a catalog model with an empty HF cache has no use for."""
NOT_AT_START_UP_MODULES = ("importlib.metadata", "email.message", "rich._emoji_codes")
"""Modules a plan has no use for inside packages it needs: pydantic's entry-point scan (plugins
are off), rich's emoji table (the plan console prints names as given). (typer._adapters is
loaded: typer 0.29 coerces every non-flag option value through a pydantic TypeAdapter.)"""
PLAN_COMMAND_MODULES = {"oomless.cli.main", "oomless.cli.plan_cmd", "oomless.cli.import_cmd", "oomless.cli.render"}
"""The CLI modules `oomless plan` loads: the root, its own command (with the `--from` options it
shares with import) and its table renderer; no other command's module."""


def test_plan_of_a_catalog_model_imports_no_hub_client(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "empty-cache")}
    done = subprocess.run([sys.executable, "-c", PLAN_AND_LIST_MODULES, str(ROOT / "examples" / "quickstart.yaml")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False, env=env)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["code"] == 0
    loaded = {name.split(".")[0] for name in got["modules"]}
    assert loaded.isdisjoint(NOT_AT_START_UP), sorted(loaded & set(NOT_AT_START_UP))
    assert "oomless.spec.run" in got["modules"] and "rich.table" in got["modules"]  # it did plan and print
    assert set(got["modules"]).isdisjoint(NOT_AT_START_UP_MODULES), sorted(set(got["modules"]) & set(NOT_AT_START_UP_MODULES))
    cli_modules = {name for name in got["modules"] if name.startswith("oomless.cli.")}
    assert cli_modules == PLAN_COMMAND_MODULES, sorted(cli_modules ^ PLAN_COMMAND_MODULES)


def test_plan_as_json_loads_no_table_renderer(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "empty-cache")}
    done = subprocess.run([sys.executable, "-c", PLAN_AND_LIST_MODULES, str(ROOT / "examples" / "quickstart.yaml"), "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False, env=env)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["code"] == 0 and "oomless.planner.report" in got["modules"]
    assert not [name for name in got["modules"] if name == "rich" or name.startswith("rich.")]


PLUGIN_SWITCH = """
import json, os, sys
from oomless.cli.main import _skip_pydantic_plugin_scan
if sys.argv[1] != "unset":
    os.environ["PYDANTIC_DISABLE_PLUGINS"] = sys.argv[1]
_skip_pydantic_plugin_scan()
from pydantic import BaseModel
class M(BaseModel):
    x: int
M(x=1)
stand_in = type(sys.modules["pydantic.plugin._loader"]).__name__ != "module"
metadata_before = "importlib.metadata" in sys.modules
os.environ["PYDANTIC_DISABLE_PLUGINS"] = ""  # plugins switched back on in the same process
plugins = list(sys.modules["pydantic.plugin._loader"].get_plugins())
print(json.dumps({"env": sys.argv[1], "stand_in": stand_in, "metadata_before": metadata_before,
                  "plugins": len(plugins), "real_after": type(sys.modules["pydantic.plugin._loader"]).__name__ == "module"}))
"""


def _plugin_switch(value: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    done = subprocess.run([sys.executable, "-c", PLUGIN_SWITCH, value], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_plugins_off_by_default_skip_the_loader_and_its_entry_point_machinery() -> None:
    got = _plugin_switch("unset")
    assert got["stand_in"] and not got["metadata_before"]
    # Turned back on later, the real loader answers (it scans the entry points, finding none here).
    assert got["real_after"] and got["plugins"] == 0


def test_a_users_plugin_setting_keeps_pydantics_own_loader() -> None:
    got = _plugin_switch("some_plugin")  # a name list: only those are skipped, the rest load
    assert not got["stand_in"] and got["metadata_before"]


def test_the_collector_is_paused_for_a_one_shot_body_only_and_resumed_after_main(monkeypatch) -> None:
    import gc

    import typer

    from oomless.cli import main as cli

    seen = []
    assert gc.isenabled()
    for one_shot in (True, False):
        monkeypatch.setitem(cli._state, "gc_paused", False)
        cli._pause_gc()
        try:
            cli.run_guarded(lambda: seen.append(gc.isenabled()) or 0, one_shot=one_shot)
        except typer.Exit as end:
            assert end.exit_code == 0
        finally:
            cli._resume_gc()
    assert seen == [False, True]
    assert gc.isenabled()


ENTRY_POINT_GC = """
import gc, json, sys
from oomless.cli.main import main
sys.argv = ["oomless", *sys.argv[1:]]
try:
    main()
except SystemExit as end:
    code = end.code
print(json.dumps({"code": code, "enabled": gc.isenabled(), "frozen": gc.get_freeze_count()}), file=sys.stderr)
"""


@pytest.mark.parametrize(("args", "one_shot"), [(["plan", "examples/quickstart.yaml"], True), (["env"], False)])
def test_as_the_entry_point_a_one_shot_command_ends_frozen_others_collect(args: list[str], one_shot: bool) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", ENTRY_POINT_GC, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False, env=env)
    got = json.loads(done.stderr.strip().splitlines()[-1])
    assert got["code"] == 0, done.stderr
    if one_shot:  # paused to the end, then frozen: the interpreter's final collection skips it
        assert not got["enabled"] and got["frozen"] > 10_000
    else:  # resumed when the body started, nothing frozen
        assert got["enabled"] and got["frozen"] == 0


def test_main_called_in_process_leaves_the_collector_on(capsys) -> None:
    import gc

    from oomless.cli.main import main

    try:
        main(["plan", str(ROOT / "examples" / "quickstart.yaml")])
    except SystemExit as end:
        assert end.code == 0
    assert gc.isenabled()
    assert "FITS" in capsys.readouterr().out


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
