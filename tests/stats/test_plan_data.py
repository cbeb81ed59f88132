"""`oomless plan --data` (issue 14, "typical and worst case"): the run's own dataset decides the
verdict beside the worst batch the limits allow. The data's longest prompt bounds the run only
when every row was counted by a tokenizer; prompts beyond the framework's limit are cut to it."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from oomless.cli.main import app
from oomless.planner.risk import length_knots
from oomless.spec.lengths import Lengths
from oomless.spec.load import load_run
from oomless.stats.apply import model_tokenizer
from tests.catalog.fake_hub import make_cache_entry

RUNNER = CliRunner()
SPEC = """model: Qwen/Qwen2.5-1.5B-Instruct
hardware: {gpu: A100-40GB, gpus_per_node: 1}
lengths: {max_prompt_tokens: LIMIT, max_completion_tokens: 1024}
batch: {micro_batch_size: 4, gradient_accumulation_steps: 2}
rollout: {engine: hf}
"""


@pytest.fixture(autouse=True)
def _offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from oomless.train.tiny import build_tokenizer

    folder = tmp_path_factory.mktemp("tok")
    build_tokenizer().save_pretrained(folder)
    return folder


def _data(path: Path, words: tuple[int, int], rows: int = 200) -> Path:
    rng = random.Random(7)
    with path.open("w", encoding="utf-8") as f:
        for _ in range(rows):
            text = " ".join(rng.choice(["add", "two", "and", "three", "then", "halve"]) for _ in range(rng.randint(*words)))
            f.write(json.dumps({"problem": text}) + "\n")
    return path


def _plan(tmp_path: Path, limit: int, *extra: str) -> tuple[int, dict, str]:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.replace("LIMIT", str(limit)), encoding="utf-8")
    result = RUNNER.invoke(app, ["plan", str(spec), "--json", *extra])
    return result.exit_code, json.loads(result.stdout) if result.stdout.strip().startswith("{") else {}, result.stderr


def test_short_data_fits_where_the_limit_does_not(tmp_path: Path, tokenizer: Path) -> None:
    data = _data(tmp_path / "train.jsonl", (20, 120))
    code, plan, _ = _plan(tmp_path, 60_000)
    assert code == 1 and plan["verdict"] == "does_not_fit"
    code, plan, err = _plan(tmp_path, 60_000, "--data", str(data), "--tokenizer", str(tokenizer))
    assert code == 0 and plan["fits"] is True and plan["verdict"] == "fits_typical", err
    risk = plan["batch_risk"]
    assert risk["per_step"] == 0.0 and risk["accepted"] is True
    assert plan["worst_case"]["fits"] is False  # the worst the limits allow is still reported
    assert "counted by tokenizer" in err and "longest" in err


def test_an_estimated_count_is_not_a_bound(tmp_path: Path) -> None:
    data = _data(tmp_path / "train.jsonl", (20, 120))
    code, plan, err = _plan(tmp_path, 60_000, "--data", str(data))
    assert "not used as a bound: the count is an estimate" in err
    assert plan["batch_risk"] is None or plan["batch_risk"]["per_step"] != 0.0
    assert code == 1


def test_prompts_beyond_the_limit_leave_the_limit_the_worst(tmp_path: Path, tokenizer: Path) -> None:
    data = _data(tmp_path / "train.jsonl", (200, 400))
    code, plan, err = _plan(tmp_path, 300, "--data", str(data), "--tokenizer", str(tokenizer))
    assert "beyond the limit of 300" in err
    assert code == 0 and plan["verdict"] == "fits"  # every batch at the 300-token limit fits


def test_the_model_tokenizer_comes_from_the_local_cache(tmp_path: Path, tokenizer: Path) -> None:
    files = {p.name: p.read_bytes() for p in tokenizer.iterdir() if p.is_file()}
    snapshot = make_cache_entry(tmp_path / "hub", "Qwen/Qwen2.5-1.5B-Instruct", files)
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.replace("LIMIT", "1000"), encoding="utf-8")
    assert model_tokenizer(load_run(spec).spec) == str(snapshot)
    data = _data(tmp_path / "train.jsonl", (20, 120))
    _, _, err = _plan(tmp_path, 60_000, "--data", str(data))
    assert f"counted by tokenizer {snapshot}" in err


def test_a_folder_without_tokenizer_files_has_none(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.replace("LIMIT", "1000"), encoding="utf-8")
    assert model_tokenizer(load_run(spec).spec) is None  # not in the (empty) cache


def test_lengths_check_the_data_bound() -> None:
    with pytest.raises(ValidationError, match="typical_prompt_tokens=900 exceeds data_max_prompt_tokens=800"):
        Lengths(max_prompt_tokens=4096, typical_prompt_tokens=900, data_max_prompt_tokens=800)
    with pytest.raises(ValidationError, match=r"prompt_percentiles\[99\]=850 exceeds data_max_prompt_tokens=800"):
        Lengths(max_prompt_tokens=4096, typical_prompt_tokens=300, prompt_percentiles={99: 850}, data_max_prompt_tokens=800)


def test_the_data_bound_is_a_knot_below_the_limit(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.replace("LIMIT", "4096"), encoding="utf-8")
    run = load_run(spec)
    bounded = run.spec.model_copy(update={"lengths": Lengths(max_prompt_tokens=4096, typical_prompt_tokens=300,
                                                             data_max_prompt_tokens=800)})
    assert length_knots(bounded, run.arch)["prompt"].points == ((300, 0.5), (800, 1.0), (4096, 1.0))
    unbounded = run.spec.model_copy(update={"lengths": Lengths(max_prompt_tokens=4096, typical_prompt_tokens=300)})
    assert length_knots(unbounded, run.arch)["prompt"].points == ((300, 0.5), (4096, 1.0))
