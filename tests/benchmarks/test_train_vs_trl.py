"""`benchmarks/train_vs_trl.py`'s CPU-side parts (issue 17): the local tokenizer at a real
vocabulary, the spec it writes, its arguments and its results page. No training runs here."""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from oomless.catalog.resolve import catalog_config
from oomless.spec.load import load_run

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


B = _load("train_vs_trl")
R = _load("train_vs_trl_report")
QWEN_VOCAB = catalog_config(B.REAL_VOCAB_MODEL)["vocab_size"]


@pytest.mark.parametrize("vocab_size", [B.min_vocab_size(), 1000, QWEN_VOCAB])
def test_local_tokenizer_has_exactly_the_vocabulary_and_encodes_the_task(tmp_path: Path, vocab_size: int) -> None:
    tokenizer = B.build_local_tokenizer(vocab_size, tmp_path / "tok")
    assert len(tokenizer) == vocab_size == len(tokenizer.get_vocab())
    assert max(tokenizer.get_vocab().values()) == vocab_size - 1
    assert tokenizer.pad_token_id != tokenizer.eos_token_id
    assert {tokenizer.pad_token_id, tokenizer.eos_token_id} <= set(range(vocab_size))
    prompt = [{"role": "user", "content": "3+4="}]
    ids = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]
    assert tokenizer.decode(ids) == "<user>3+4=<assistant>"
    assert all(i < vocab_size for i in ids)


def test_a_tokenizer_saved_beside_a_qwen2_config_is_why_it_is_saved_alone(tmp_path: Path) -> None:
    """The premise of `build_local_tokenizer`'s separate folder: if transformers stops
    rebuilding it as a Qwen2Tokenizer with an extra entry, the folder is no longer needed."""
    from transformers import AutoConfig, AutoTokenizer

    folder = tmp_path / "together"
    B.build_local_tokenizer(100, folder)
    AutoConfig.for_model("qwen2", vocab_size=100).save_pretrained(folder)
    assert len(AutoTokenizer.from_pretrained(folder)) == 101


@pytest.mark.parametrize("vocab_size", [17, QWEN_VOCAB])
def test_written_spec_differs_from_the_example_only_in_vocabulary_tokenizer_and_checkpoints(tmp_path: Path, vocab_size: int) -> None:
    path = B.write_spec(vocab_size, tmp_path)
    run, example = load_run(path), load_run(B.SPEC)
    assert run.arch.vocab_size == vocab_size
    assert run.spec.train.tokenizer == str((tmp_path / B.TOKENIZER_DIR).resolve())
    assert run.spec.train.save_steps == 0
    for field in ("batch", "lengths", "precision", "optimizer", "gradient_checkpointing", "kl_beta", "rollout"):
        assert getattr(run.spec, field) == getattr(example.spec, field), field
    assert run.arch.hidden_size == example.arch.hidden_size and run.arch.num_layers == example.arch.num_layers
    written, shipped = json.loads((tmp_path / "config.json").read_text()), json.loads(B.spec_model_config().read_text())
    assert {k: v for k, v in written.items() if k != "vocab_size"} == {k: v for k, v in shipped.items() if k != "vocab_size"}


def test_default_rows_are_the_examples_vocabulary_and_qwens() -> None:
    args = B.parse_args([])
    shipped = json.loads(B.spec_model_config().read_text())["vocab_size"]
    assert args.vocab_sizes == [shipped, QWEN_VOCAB] and args.render is None
    assert B.parse_args(["--vocab-sizes", "151936", "--steps", "4", "--warmup", "1"]).vocab_sizes == [151936]


@pytest.mark.parametrize("argv, named", [
    (["--vocab-sizes", "16"], "--vocab-sizes"),
    (["--vocab-sizes", "100", "100"], "--vocab-sizes"),
    (["--steps", "5", "--warmup", "5"], "--warmup"),
    (["--repeats", "0"], "--repeats"),
    (["--steps", "many"], "--steps"),
])
def test_bad_arguments_exit_2_naming_the_option(argv: list[str], named: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        B.parse_args(argv)
    assert exc.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert named in error and "Traceback" not in error


def test_command_line_records_the_nice_level(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(B.os, "nice", lambda inc: 10)
    assert B.command_line(["--steps", "3"]).startswith("nice -n 10 ")
    monkeypatch.setattr(B.os, "nice", lambda inc: 0)
    assert B.command_line(["--steps", "3"]).endswith("benchmarks/train_vs_trl.py --steps 3")


def _side(peak: int, chunk: int) -> dict[str, Any]:
    return {"peak_bytes": peak, "max_rss_bytes": 5 * peak, "median_step_seconds": 0.1, "median_step_cpu_seconds": 0.09,
            "median_step_seconds_per_repeat": [0.1, 0.12], "peak_by_phase": {"train": peak}, "logprob_chunk": chunk,
            "num_parameters": 1000, "mean_reward_last_10": 0.0}


def _doc(trl_peak: int, ours_peak: int, vocab: int) -> dict[str, Any]:
    model = {"vocab_size": vocab, "tokenizer_entries": vocab, "tokenizer": "WordLevel", "pad_token_id": 0, "eos_token_id": 1,
             "tie_word_embeddings": False, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
             "num_attention_heads": 4, "num_key_value_heads": 2}
    row = {"vocab_size": vocab, "model": model, "trl_defaults_config": {"per_device_train_batch_size": 64},
           "results": {"trl_defaults": _side(trl_peak, 32768), "oomless": _side(ours_peak, min(vocab, 32768))},
           "memory_ratio": ours_peak / trl_peak, "step_time_ratio": 1.0, "step_cpu_time_ratio": 1.0, "rss_ratio": 1.0,
           "met": {"memory": ours_peak / trl_peak <= 0.6, "step_time": True}}
    return {"command": "x", "seconds": 1.0, "versions": {"torch": "0"}, "rows": [row],
            "machine": {"platform": "p", "cpu_count": 2, "python": "3", "torch_threads": 1,
                        "load_average_before": [1.0, 1.0, 1.0], "load_average_after": [2.0, 2.0, 2.0]},
            "config": {"spec": "examples/tiny-arith.yaml", "real_vocab_from": B.REAL_VOCAB_MODEL, "num_steps": 3,
                       "warmup_steps": 1, "repeats": 2},
            "targets": {"memory_ratio_at_most": 0.6, "step_time_ratio_at_most": 1.1}}


@pytest.mark.parametrize("trl_peak, ours_peak, lower", [(1 << 30, 1 << 29, "oomless"), (1 << 29, (1 << 29) + (1 << 24), "TRL's defaults")])
def test_page_names_the_run_with_the_lower_peak_from_the_figures(trl_peak: int, ours_peak: int, lower: str) -> None:
    doc = _doc(trl_peak, ours_peak, QWEN_VOCAB)
    page = R.markdown(doc)
    assert f"lower peak: **{lower}**," in page
    assert R.format_bytes(abs(trl_peak - ours_peak)) in page
    assert "the same 32,768 columns in both runs" in page
    doc_swapped = copy.deepcopy(doc)
    row = doc_swapped["rows"][0]["results"]
    row["trl_defaults"]["peak_bytes"], row["oomless"]["peak_bytes"] = ours_peak, trl_peak
    assert f"lower peak: **{lower}**," not in R.markdown(doc_swapped)


def test_render_rewrites_the_page_from_a_results_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    results = tmp_path / "results"
    results.mkdir()
    (tmp_path / "doc.json").write_text(json.dumps(_doc(100, 50, 17)))
    monkeypatch.setattr(B, "RESULTS", results)
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    assert B.main(["--render", str(tmp_path / "doc.json")]) == 0
    page = (results / "train-vs-trl.md").read_text()
    assert "lower peak: **oomless**," in page and "32,768 columns in TRL's run, 17 in oomless's" in page
    assert not (results / "train-vs-trl.json").exists()


@pytest.mark.parametrize("real_ratio, saves_nothing", [(1.01, True), (0.5, False)])
def test_the_real_vocabulary_conclusion_follows_its_ratio(real_ratio: float, saves_nothing: bool) -> None:
    small, big = _doc(1 << 26, 1 << 22, 17), _doc(1 << 29, int(real_ratio * (1 << 29)), QWEN_VOCAB)
    big_row = big["rows"][0]
    big_row["memory_ratio"] = real_ratio
    big_row["logprob_kernel"] = [{"chunk": 32768, "positions": 512, "forward_bytes": 3 << 26, "forward_backward_bytes": 9 << 26}]
    small["rows"].append(big_row)
    page = R.markdown(small)
    assert ("saves nothing over TRL's defaults" in page) is saves_nothing
    assert "tile 32,768: 192.0 MiB forward, 576.0 MiB forward + backward" in page
    assert f"whole 17-token oomless peak, all activations included, is {R.format_bytes(1 << 22)}" in page


def test_checkpointing_variant_changes_only_that_setting(tmp_path: Path) -> None:
    plain = load_run(B.write_spec(QWEN_VOCAB, tmp_path)).spec
    variant = load_run(B.write_spec(QWEN_VOCAB, tmp_path, gradient_checkpointing=not plain.gradient_checkpointing,
                                    name="variant.yaml")).spec
    assert variant.gradient_checkpointing is not plain.gradient_checkpointing
    assert variant.model_copy(update={"gradient_checkpointing": plain.gradient_checkpointing}) == plain


def test_page_splits_off_what_checkpointing_accounts_for() -> None:
    doc = _doc(1000, 1600, QWEN_VOCAB)
    doc["rows"][0]["oomless_with_trl_checkpointing"] = {"gradient_checkpointing": True, "num_steps": 3, "peak_bytes": 1004,
                                                        "peak_by_phase": {"train": 1004}}
    page = R.markdown(doc)
    assert "(1,004 B, +4 B against TRL's)" in page
    assert f"so checkpointing accounts for {R.format_bytes(596)} of the difference" in page
