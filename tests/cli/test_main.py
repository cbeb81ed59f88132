"""The CLI's frame: its frozen surface, `--debug`, `python -m oomless`, and torch-free imports."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import typer.main

from oomless.cli.main import app
from tests.cli.conftest import run_oomless
from tests.helpers import ROOT

EXPECTED_SURFACE = {
    "<root>": [("debug", ("--debug",), "option", False, False), ("version", ("--version",), "option", False, False)],
    "plan": [
        ("spec", ("spec",), "argument", True, None),
        ("as_json", ("--json",), "option", False, False),
        ("from_framework", ("--from",), "option", False, None),
        ("gpu", ("--gpu",), "option", False, None),
        ("gpus_per_node", ("--gpus-per-node",), "option", False, None),
        ("nodes", ("--nodes",), "option", False, None),
        ("host_ram", ("--host-ram",), "option", False, None),
        ("html", ("--html",), "option", False, None),
        ("png", ("--png",), "option", False, None),
        ("explain", ("--explain",), "option", False, False),
        ("data", ("--data",), "option", False, None),
        ("data_split", ("--data-split",), "option", False, "train"),
        ("tokenizer", ("--tokenizer",), "option", False, None),
        ("run_log", ("--run-log",), "option", False, None),
    ],
    "explain": [
        ("spec", ("spec",), "argument", True, None),
        ("component", ("component",), "argument", False, None),
        ("as_json", ("--json",), "option", False, False),
        ("from_framework", ("--from",), "option", False, None),
        ("gpu", ("--gpu",), "option", False, None),
        ("gpus_per_node", ("--gpus-per-node",), "option", False, None),
        ("nodes", ("--nodes",), "option", False, None),
        ("host_ram", ("--host-ram",), "option", False, None),
    ],
    "compare": [
        ("before", ("before",), "argument", True, None),
        ("after", ("after",), "argument", True, None),
        ("as_json", ("--json",), "option", False, False),
        ("html", ("--html",), "option", False, None),
        ("png", ("--png",), "option", False, None),
        ("from_framework", ("--from",), "option", False, None),
        ("gpu", ("--gpu",), "option", False, None),
        ("gpus_per_node", ("--gpus-per-node",), "option", False, None),
        ("nodes", ("--nodes",), "option", False, None),
        ("host_ram", ("--host-ram",), "option", False, None),
    ],
    "fit": [
        ("spec", ("spec",), "argument", True, None),
        ("from_framework", ("--from",), "option", False, None),
        ("gpu", ("--gpu",), "option", False, None),
        ("gpus_per_node", ("--gpus-per-node",), "option", False, None),
        ("nodes", ("--nodes",), "option", False, None),
        ("host_ram", ("--host-ram",), "option", False, None),
        ("margin", ("--margin",), "option", False, None),
        ("margin_fraction", ("--margin-fraction",), "option", False, None),
        ("allow", ("--allow",), "option", False, None),
        ("maximize_path", ("--maximize",), "option", False, None),
        ("top", ("--top",), "option", False, 5),
        ("write", ("--write",), "option", False, None),
        ("in_place", ("--in-place",), "option", False, False),
        ("overwrite", ("--overwrite",), "option", False, False),
        ("export", ("--export",), "option", False, None),
        ("as_json", ("--json",), "option", False, False),
        ("data", ("--data",), "option", False, None),
        ("data_split", ("--data-split",), "option", False, "train"),
        ("tokenizer", ("--tokenizer",), "option", False, None),
        ("run_log", ("--run-log",), "option", False, None),
    ],
    "export": [
        ("spec", ("spec",), "argument", True, None),
        ("to", ("--to",), "option", True, None),
        ("out_dir", ("--out-dir",), "option", False, Path(".")),
        ("force", ("--force",), "option", False, False),
        ("from_framework", ("--from",), "option", False, None),
        ("gpu", ("--gpu",), "option", False, None),
        ("gpus_per_node", ("--gpus-per-node",), "option", False, None),
        ("nodes", ("--nodes",), "option", False, None),
        ("host_ram", ("--host-ram",), "option", False, None),
    ],
    "models": [
        ("model", ("model",), "argument", False, None),
        ("revision", ("--revision",), "option", False, None),
        ("as_json", ("--json",), "option", False, False),
    ],
    "stats": [
        ("data", ("data",), "argument", True, None),
        ("tokenizer", ("--tokenizer",), "option", False, None),
        ("prompt_field", ("--prompt-field",), "option", False, None),
        ("image_field", ("--image-field",), "option", False, None),
        ("min_pixels", ("--min-pixels",), "option", False, None),
        ("max_pixels", ("--max-pixels",), "option", False, None),
        ("split", ("--split",), "option", False, "train"),
        ("limit", ("--limit",), "option", False, 100000),
        ("as_json", ("--json",), "option", False, False),
        ("completion_field", ("--completion-field",), "option", False, None),
        ("max_completion_tokens", ("--max-completion-tokens",), "option", False, None),
    ],
    "gpus": [("as_json", ("--json",), "option", False, False)],
    "env": [("as_json", ("--json",), "option", False, False)],
    "schema": [],
    "train": [
        ("spec", ("spec",), "argument", True, None),
        ("force", ("--force",), "option", False, False),
        ("fit", ("--fit",), "option", False, False),
        ("output_dir", ("--output-dir",), "option", False, None),
        ("max_steps", ("--max-steps",), "option", False, None),
        ("resume", ("--resume",), "option", False, False),
        ("overwrite", ("--overwrite",), "option", False, False),
        ("report_to", ("--report-to",), "option", False, ["none"]),
        ("from_framework", ("--from",), "option", False, None),
        ("gpu", ("--gpu",), "option", False, None),
        ("gpus_per_node", ("--gpus-per-node",), "option", False, None),
        ("nodes", ("--nodes",), "option", False, None),
        ("host_ram", ("--host-ram",), "option", False, None),
    ],
    "doctor": [
        ("log", ("log",), "argument", True, None),
        ("spec", ("--spec",), "option", False, None),
        ("from_native", ("--from",), "option", False, None),
        ("gpu", ("--gpu",), "option", False, None),
        ("gpus_per_node", ("--gpus-per-node",), "option", False, None),
        ("nodes", ("--nodes",), "option", False, None),
        ("host_ram", ("--host-ram",), "option", False, None),
        ("as_json", ("--json",), "option", False, False),
    ],
    "watch": [
        ("spec", ("--spec",), "option", False, None),
        ("from_native", ("--from",), "option", False, None),
        ("gpu", ("--gpu",), "option", False, None),
        ("pid", ("--pid",), "option", False, None),
        ("log", ("--log",), "option", False, None),
        ("interval", ("--interval",), "option", False, 1.0),
        ("host_limit", ("--host-limit",), "option", False, None),
        ("gpu_limit", ("--gpu-limit",), "option", False, None),
        ("ray_threshold", ("--ray-threshold",), "option", False, None),
        ("steps", ("--steps",), "option", False, None),
        ("on_risk", ("--on-risk",), "option", False, None),
        ("out", ("--out",), "option", False, Path("oomless-watch")),
        ("pss", ("--pss",), "option", False, False),
    ],
    "chart": [
        ("run", ("run",), "argument", True, None),
        ("html", ("--html",), "option", False, None),
        ("png", ("--png",), "option", False, None),
    ],
    "trace": [
        ("spec", ("spec",), "argument", False, None),
        ("as_json", ("--json",), "option", False, False),
        ("model", ("--model",), "option", False, None),
        ("micro_batch", ("--micro-batch",), "option", False, None),
        ("prompt_tokens", ("--prompt-tokens",), "option", False, None),
        ("completion_tokens", ("--completion-tokens",), "option", False, None),
        ("checkpointing", ("--checkpointing", "--no-checkpointing"), "option", False, None),
        ("from_framework", ("--from",), "option", False, None),
        ("gpu", ("--gpu",), "option", False, None),
        ("gpus_per_node", ("--gpus-per-node",), "option", False, None),
        ("nodes", ("--nodes",), "option", False, None),
        ("host_ram", ("--host-ram",), "option", False, None),
    ],
    "import": [
        ("config", ("config",), "argument", True, None),
        ("from_framework", ("--from",), "option", True, None),
        ("output", ("-o", "--output"), "option", False, None),
        ("force", ("--force",), "option", False, False),
        ("gpu", ("--gpu",), "option", False, None),
        ("gpus_per_node", ("--gpus-per-node",), "option", False, None),
        ("nodes", ("--nodes",), "option", False, None),
        ("host_ram", ("--host-ram",), "option", False, None),
    ],
}
"""Every command with its parameters as (name, flags, kind, required, default). Changing the
CLI means editing this literal on purpose."""


def _params(command: typer.main.TyperCommand) -> list[tuple]:
    return [
        (p.name, tuple(p.opts) + tuple(p.secondary_opts), p.param_type_name, p.required, p.default)
        for p in command.params
        if p.name != "help"
    ]


def test_cli_surface_is_frozen() -> None:
    root = typer.main.get_command(app)
    surface = {"<root>": _params(root)}
    surface.update({name: _params(cmd) for name, cmd in root.commands.items()})
    assert surface == EXPECTED_SURFACE


def test_debug_shows_the_traceback(write_spec: Callable[..., Path]) -> None:
    bad = write_spec(kl_bta=0.1)
    quiet = run_oomless("plan", str(bad))
    loud = run_oomless("--debug", "plan", str(bad))
    assert quiet.returncode == 2
    assert quiet.stderr.splitlines() == [quiet.stderr.strip()]
    assert "Traceback" not in quiet.stderr
    assert "Traceback (most recent call last)" in loud.stderr
    assert "oomless.errors.InputError: kl_bta: unknown key" in loud.stderr
    assert loud.returncode == 2  # same exit code as without --debug


def test_python_dash_m_runs_the_cli() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "oomless", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "plan" in done.stdout and "Exit codes" in done.stdout


IMPORT_AND_PLAN = """
import sys
import oomless, oomless.spec.load, oomless.planner.plan, oomless.planner.report, oomless.cli.main
from oomless.planner.plan import make_plan
from oomless.planner.report import plan_to_dict
from oomless.spec.load import load_run
run = load_run(sys.argv[1])
plan_to_dict(make_plan(run.spec, run.arch, run.gpu, run.archs))
heavy = sorted(m for m in ("torch", "transformers") if m in sys.modules)
print(",".join(heavy))
"""


def test_planning_leaves_torch_and_transformers_unloaded(tmp_path: Path) -> None:
    # Stand-in packages, so an import of torch/transformers would be seen even where the real
    # ones are not installed (a guarded `try: import torch` would otherwise pass unnoticed).
    for name in ("torch", "transformers"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_AND_PLAN, str(ROOT / "examples" / "quickstart.yaml")],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""
