"""`oomless trace`: JSON of a tiny traced step next to its plan, and the missing-extra message."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from oomless.cli.main import app
from oomless.errors import EXIT_BAD_INPUT
from tests.cli.conftest import run_oomless

TINY = {
    "model_type": "qwen2", "hidden_size": 64, "intermediate_size": 192, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 2048, "tie_word_embeddings": False,
    "max_position_embeddings": 512,
}


def test_missing_extra_is_one_line_with_the_install_command(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    done = runner.invoke(app, ["trace", "--model", "Qwen/Qwen2.5-0.5B-Instruct"])
    assert done.exit_code == EXIT_BAD_INPUT
    assert done.output.strip().splitlines() == ["error: oomless trace needs torch: pip install 'oomless[trace]'"]


def test_needs_a_spec_or_a_model(runner: CliRunner) -> None:
    pytest.importorskip("torch")
    done = runner.invoke(app, ["trace"])
    assert done.exit_code == EXIT_BAD_INPUT
    assert "give a SPEC file or --model ID" in done.output


def test_json_of_a_tiny_step(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY), encoding="utf-8")
    done = run_oomless("trace", "--model", str(config), "--micro-batch", "2", "--prompt-tokens", "48",
                       "--completion-tokens", "16", "--no-checkpointing", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["setup"]["checkpointing"] is False and doc["setup"]["seq_len"] == 64
    assert set(doc["regions"]) == {"logprob", "forward", "loss", "backward", "optimizer"}
    assert doc["peak"]["region"] == "optimizer"
    assert set(doc["peak"]["by_category"]) >= {"PARAM", "GRAD", "OPT", "TEMP"}  # activations freed by then
    assert doc["training_activation_peak"]["top_modules"]
    plan = doc["plan"]
    assert plan["traced_activation_bytes"] == doc["training_activation_peak"]["activation_bytes"]
    assert abs(plan["relative_difference"]) <= 0.02
