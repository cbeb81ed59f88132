"""Bad input to `oomless plan`: exit code 2, exactly one `error: <field>: ...` line, no traceback.

Run in a real process so the output is what a user sees.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from oomless.errors import EXIT_BAD_INPUT
from tests.cli.conftest import run_oomless

BAD_SPECS = [
    # (test id, dotted overrides of the quickstart spec, expected start of the error line)
    ("unknown-key", {"batch.micro_batch": 2}, "error: batch.micro_batch: unknown key; allowed here: micro_batch_size"),
    ("unknown-top-key", {"kl_bta": 0.1}, "error: kl_bta: unknown key; allowed here: model,"),
    ("unknown-model", {"model": "Qwen/Qwen2.5-1.5B-Instrct"},
     "error: model: 'Qwen/Qwen2.5-1.5B-Instrct' not found: no such local path; not in the HF cache"),
    ("unknown-gpu", {"hardware.gpu": "A100-90GB"}, "error: hardware.gpu: unknown 'A100-90GB'; closest: A100-80GB"),
    ("utilization-above-1", {"rollout.gpu_memory_utilization": 1.5},
     "error: rollout.gpu_memory_utilization: 1.5 is not valid; Input should be less than or equal to 1"),
    ("zero-gpus", {"hardware.gpus_per_node": 0},
     "error: hardware.gpus_per_node: 0 is not valid; Input should be greater than or equal to 1"),
    # Qwen2.5-1.5B-Instruct: 12 attention heads, 2 KV heads; TP 3 divides 12 but not 2.
    ("tp-vs-kv-heads", {"rollout.tensor_parallel_size": 3},
     "error: rollout.tensor_parallel_size: 3 neither divides nor is a multiple of the 2 KV heads"),
]


def assert_one_error_line(done, prefix: str) -> None:
    assert done.returncode == EXIT_BAD_INPUT, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(prefix), lines[0]


@pytest.mark.parametrize(("overrides", "prefix"), [c[1:] for c in BAD_SPECS], ids=[c[0] for c in BAD_SPECS])
def test_bad_spec_is_one_line_naming_the_field(write_spec: Callable[..., Path], overrides: dict, prefix: str) -> None:
    assert_one_error_line(run_oomless("plan", str(write_spec(**overrides))), prefix)


def test_malformed_yaml(tmp_path: Path) -> None:
    bad = tmp_path / "broken.yaml"
    bad.write_text("model: [Qwen/Qwen2.5-1.5B-Instruct\nhardware: {gpu: A100-80GB\n", encoding="utf-8")
    assert_one_error_line(run_oomless("plan", str(bad)), f"error: spec: {bad}: malformed YAML at line")


def test_top_level_not_a_mapping(tmp_path: Path) -> None:
    bad = tmp_path / "list.yaml"
    bad.write_text("- model\n- hardware\n", encoding="utf-8")
    assert_one_error_line(run_oomless("plan", str(bad)), f"error: spec: {bad}: expected a mapping")


def test_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.yaml"
    assert_one_error_line(run_oomless("plan", str(missing)), f"error: spec: no such file: {missing}")
