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
def _offline(offline_hub: Path) -> None:
    """Every test here: offline, an empty Hugging Face cache (conftest.py)."""


def _data(path: Path, words: tuple[int, int], rows: int = 200, chat: bool = True) -> Path:
    """Rows of chat messages (what a framework encodes through the template), or plain text."""
    rng = random.Random(7)
    with path.open("w", encoding="utf-8") as f:
        for _ in range(rows):
            text = " ".join(rng.choice(["add", "two", "and", "three", "then", "halve"]) for _ in range(rng.randint(*words)))
            row = {"messages": [{"role": "user", "content": text}]} if chat else {"problem": text}
            f.write(json.dumps(row) + "\n")
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


def test_plain_prompts_without_a_framework_give_no_bound(tmp_path: Path, tokenizer: Path) -> None:
    """A spec names no framework, so the template a framework wraps plain text in is unknown."""
    data = _data(tmp_path / "train.jsonl", (20, 120), chat=False)
    code, plan, err = _plan(tmp_path, 60_000, "--data", str(data), "--tokenizer", str(tokenizer))
    assert "plain-text prompts without a framework config" in err and code == 1


def test_empty_prompts_and_template_refusals_are_one_line(tmp_path: Path, tokenizer: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text(json.dumps({"prompt": ""}) + "\n" + json.dumps({"prompt": "x"}) + "\n", encoding="utf-8")
    code, _, err = _plan(tmp_path, 4096, "--data", str(empty), "--tokenizer", str(tokenizer))
    assert code in (0, 1) and "Traceback" not in err  # every prompt counts at least one token
    from transformers import AutoTokenizer

    strict = AutoTokenizer.from_pretrained(tokenizer)
    strict.chat_template = "{{ raise_exception('roles must alternate') }}"
    strict.save_pretrained(tmp_path / "strict")
    chats = _data(tmp_path / "chats.jsonl", (3, 5))
    code, _, err = _plan(tmp_path, 4096, "--data", str(chats), "--tokenizer", str(tmp_path / "strict"))
    assert code == 2 and "error: chat template:" in err and "roles must alternate" in err and "Traceback" not in err


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


def test_image_tokens_count_where_the_limit_counts_them(tmp_path: Path, tokenizer: Path) -> None:
    """verl/EasyR1 bound the encoded prompt, images included (`max_prompt_counts_images`): a
    3000 × 3000 image becomes ~11.5k tokens, and the data's longest prompt must say so."""
    from PIL import Image

    Image.new("RGB", (3000, 3000)).save(tmp_path / "big.png")
    rows = [{"messages": [{"role": "user", "content": f"What is in picture {i}?"}], "images": ["big.png"]} for i in range(20)]
    (tmp_path / "vl.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    spec = tmp_path / "vl.yaml"
    spec.write_text("model: Qwen/Qwen2.5-VL-3B-Instruct\nhardware: {gpu: H100, gpus_per_node: 8}\n"
                    "distribution: {strategy: zero3}\nattention: flash_attention_2\n"
                    "lengths: {max_prompt_tokens: 16384, max_completion_tokens: 1024, max_prompt_counts_images: true}\n"
                    "vision: {images_per_prompt: 1, max_pixels: 12845056}\n"
                    "batch: {micro_batch_size: 8, gradient_accumulation_steps: 1, num_generations: 8}\n"
                    "rollout: {engine: hf}\n", encoding="utf-8")
    result = RUNNER.invoke(app, ["plan", str(spec), "--json", "--data", str(tmp_path / "vl.jsonl"), "--tokenizer", str(tokenizer)])
    longest = int(result.stderr.split("longest ")[1].split(" tokens")[0])
    image_tokens = (3000 // 28) * (3000 // 28)  # smart_resize keeps 3000 × 3000 within max_pixels: (H/28)(W/28)
    assert longest >= image_tokens, result.stderr


def test_data_errors_name_the_option_given(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"answer": 4}) + "\n", encoding="utf-8")
    code, _, err = _plan(tmp_path, 1000, "--data", str(bad))
    assert code == 2 and "error: --data (prompt column): no prompt column found; columns: answer" in err
    code, _, err = _plan(tmp_path, 1000, "--data", str(tmp_path / "missing.jsonl"))
    assert code == 2 and "error: --data: no such file or folder" in err


def test_sharegpt_turns_and_reference_answers(tmp_path: Path, tokenizer: Path) -> None:
    """ShareGPT `from`/`value` turns are chat turns. A trailing assistant turn is left out only
    where the framework takes it as the answer (VLM-R1); TRL continues it as a prefill
    (trl/data_utils.py `continue_final_message`), so it counts."""
    from oomless.stats.measure import measure

    long_answer = "answer " * 400
    rows = [{"conversations": [{"from": "human", "value": "<image>Where is the cat?"}, {"from": "gpt", "value": long_answer}]}]
    alone = measure([{"messages": [{"role": "user", "content": "<image>Where is the cat?"}]}], False, tokenizer=str(tokenizer))
    dropped = measure(rows, False, tokenizer=str(tokenizer), drop_answer=True)
    assert dropped.prompt_field == "conversations" and dropped.templated
    assert dropped.prompt_tokens == alone.prompt_tokens
    kept = measure(rows, False, tokenizer=str(tokenizer))
    assert kept.prompt_tokens[0] > alone.prompt_tokens[0] + 400
