"""`oomless fit --data` (issue 14): configurations are sized by the worst batch the run's data can
form (`planner.data_bound.data_capped`), not by a prompt limit the data never reaches; the written file
reads back as fitting with the same data, and without a data bound nothing changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from oomless.cli.main import app
from oomless.planner.data_bound import data_capped
from oomless.spec.lengths import Lengths, with_data_fields
from oomless.spec.load import load_run

RUNNER = CliRunner()
RECIPE = """model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct
max_completion_length: 1024
per_device_train_batch_size: 32
num_generations: 8
gradient_checkpointing: false
bf16: true
"""


@pytest.fixture(autouse=True)
def _offline(offline_hub: Path) -> None:
    """Every test here: offline, an empty Hugging Face cache (conftest.py)."""


def _chats(path: Path, rows: int = 50) -> Path:
    path.write_text("".join(json.dumps({"messages": [{"role": "user", "content": "add two and three " * (1 + i % 5)}]}) + "\n"
                            for i in range(rows)), encoding="utf-8")
    return path


def _step_seconds(output: str) -> float:
    return float(output.split("FOUND")[1].split("predicted ")[1].split(" s per")[0])


def test_fit_sizes_by_the_data_and_reads_back_with_it(tmp_path: Path, tokenizer: Path) -> None:
    """TRL 1.16 does not truncate prompts: without data the prompt is bounded by the model's
    context, and fit has to shrink everything; with short data it keeps much more."""
    recipe = tmp_path / "grpo.yaml"
    recipe.write_text(RECIPE, encoding="utf-8")
    bare = RUNNER.invoke(app, ["fit", "--from", "trl", str(recipe), "--gpu", "A100-40GB"])
    data = _chats(tmp_path / "train.jsonl")
    out = tmp_path / "out"
    with_data = RUNNER.invoke(app, ["fit", "--from", "trl", str(recipe), "--gpu", "A100-40GB", "--data", str(data),
                                    "--tokenizer", str(tokenizer), "--write", str(out)])
    assert bare.exit_code == 0 and with_data.exit_code == 0, with_data.output
    assert _step_seconds(with_data.stdout) < _step_seconds(bare.stdout)
    assert "--data ...` reads it back: fits with the margin" in with_data.stdout
    assert recipe.read_text(encoding="utf-8") == RECIPE  # --write leaves the user's file as it was


def test_data_capped_lowers_only_a_limit_the_data_is_below(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("model: Qwen/Qwen2.5-1.5B-Instruct\nhardware: {gpu: A100-80GB, gpus_per_node: 1}\n"
                    "lengths: {max_prompt_tokens: 4096, max_completion_tokens: 512}\n", encoding="utf-8")
    run = load_run(spec)
    assert data_capped(run.spec, run.arch) is run.spec  # no data bound
    bounded = run.spec.model_copy(update={"lengths": Lengths(max_prompt_tokens=4096, max_completion_tokens=512,
                                                             typical_prompt_tokens=100, data_max_prompt_tokens=700)})
    capped = data_capped(bounded, run.arch)
    assert capped.lengths.max_prompt_tokens == 700 and capped.lengths.data_max_prompt_tokens is None
    assert capped.rollout.max_model_len == 4096 + 512  # the engine keeps the configured limits' length
    back = with_data_fields(run.spec, bounded)  # a file read back gets the data's figures, nothing else
    assert back.lengths.data_max_prompt_tokens == 700 and back.lengths.max_prompt_tokens == 4096
    padded = bounded.model_copy(update={"lengths": bounded.lengths.model_copy(update={"max_prompt_counts_images": True})})
    assert data_capped(padded, run.arch) is padded  # verl/EasyR1 pad every prompt to the limit

