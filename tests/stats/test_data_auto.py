"""`oomless plan --from FW CONFIG --data auto` (issue 14): the data each framework's config names,
read as the framework reads it (its prompt column, its chat template, the text it adds to every
prompt), and the one-line errors when it is not here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from oomless.adapters import HardwareFlags, import_native
from oomless.cli.main import app

RUNNER = CliRunner()
DATA = Path(__file__).resolve().parents[1] / "adapters" / "data"


@pytest.fixture(autouse=True)
def _offline(offline_hub: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Offline with an empty cache (conftest.py), and $HOME here (verl's `$HOME/data/...`)."""
    monkeypatch.setenv("HOME", str(tmp_path))


def _rows(path: Path, column: str, texts: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({column: t}) + "\n" for t in texts), encoding="utf-8")
    return path


def test_verl_reads_its_train_files_with_home_expanded(tmp_path: Path) -> None:
    ref = import_native("verl", DATA / "verl_gsm8k.sh", HardwareFlags(gpu="A100-80GB")).data
    assert ref is not None and ref.key == "data.train_files"
    assert ref.sources == (str(tmp_path / "data/gsm8k/train.parquet"),) and ref.prompt_field == "prompt" and ref.chat


def test_easyr1_adds_its_format_prompt_and_splits_the_hub_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "math.jinja").write_text("{{ content | trim }} Put the final answer in \\boxed{}.", encoding="utf-8")
    config = tmp_path / "c.yaml"
    config.write_text("data: {train_files: hiyouga/math12k@test, prompt_key: problem, format_prompt: ./math.jinja}\n"
                      "worker:\n  actor:\n    model: {model_path: Qwen/Qwen2.5-7B-Instruct}\n", encoding="utf-8")
    ref = import_native("easyr1", config, HardwareFlags(gpu="A100-80GB")).data
    assert ref.sources == ("hiyouga/math12k",) and ref.split == "test" and ref.prompt_field == "problem"
    assert ref.added_text == "Put the final answer in \\boxed{}."


def test_openrlhf_input_template_lengthens_plain_prompts(tmp_path: Path) -> None:
    text = (DATA / "openrlhf_classic.sh").read_text(encoding="utf-8").rstrip()
    assert import_native("openrlhf", DATA / "openrlhf_classic.sh", HardwareFlags(gpu="A100-80GB")).data is None
    script = tmp_path / "run.sh"
    script.write_text(text + " --prompt_data OpenRLHF/prompt-collection-v0.1,./mine.jsonl --input_key context_messages"
                      " --input_template 'User: {}\\nAssistant: '\n", encoding="utf-8")
    ref = import_native("openrlhf", script, HardwareFlags(gpu="A100-80GB")).data
    assert ref.key == "prompt_data" and ref.sources == ("OpenRLHF/prompt-collection-v0.1", "./mine.jsonl")
    assert ref.prompt_field == "context_messages" and not ref.chat and ref.added_text == "User: \\nAssistant: "
    script.write_text(text + " --prompt_data d.jsonl --apply_chat_template --input_template 'User: {}'\n", encoding="utf-8")
    ref = import_native("openrlhf", script, HardwareFlags(gpu="A100-80GB")).data
    assert ref.chat and ref.added_text == ""  # the chat template replaces the input template


def test_swift_dataset_drops_the_sample_count_and_keeps_the_system_prompt(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text("swift rlhf --rlhf_type grpo --model Qwen/Qwen2.5-1.5B-Instruct --max_length 1024 --num_generations 2 --per_device_train_batch_size 2 "
                      "--dataset 'AI-MO/NuminaMath-TIR#1000' ./local.jsonl --system 'Think step by step.'\n",
                      encoding="utf-8")
    result = import_native("swift", script, HardwareFlags(gpu="A100-80GB"))
    assert result.data.sources == ("AI-MO/NuminaMath-TIR", "./local.jsonl")
    assert result.data.added_text == "Think step by step." and result.data.chat
    assert any("--dataset" in line for line in result.ignored)  # still reported as without memory effect


def test_auto_plans_with_the_named_file(tmp_path: Path) -> None:
    _rows(tmp_path / "data" / "train.jsonl", "problem", ["two plus two"] * 50)
    config = tmp_path / "c.yaml"
    config.write_text("data: {train_files: data/train.jsonl, prompt_key: problem, max_prompt_length: 4096}\n"
                      "worker:\n  actor:\n    model: {model_path: Qwen/Qwen2.5-1.5B-Instruct}\n", encoding="utf-8")
    result = RUNNER.invoke(app, ["plan", "--from", "easyr1", str(config), "--gpu", "A100-80GB", "--data", "auto"])
    assert result.exit_code == 0, result.stderr  # 1.5B, 4096-token prompts on 80 GB: fits either way
    assert "--data data.train_files=data/train.jsonl: 50 rows, prompts from 'problem'" in result.stderr
    assert "to which verl/EasyR1 pad every prompt" in result.stderr  # typical lengths only, no bound
    # an explicit file is read with the config's prompt column too, not the first usual name
    both = tmp_path / "both.jsonl"
    both.write_text("".join(json.dumps({"prompt": "short", "problem": "long words " * 200}) + "\n" for _ in range(5)),
                    encoding="utf-8")
    result = RUNNER.invoke(app, ["plan", "--from", "easyr1", str(config), "--gpu", "A100-80GB", "--data", str(both)])
    assert "prompts from 'problem'" in result.stderr, result.stderr


def test_a_format_prompt_that_is_not_here_gives_no_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _rows(tmp_path / "data" / "train.jsonl", "problem", ["two plus two"] * 5)
    config = tmp_path / "c.yaml"
    config.write_text("data: {train_files: data/train.jsonl, prompt_key: problem, format_prompt: ./nowhere.jinja}\n"
                      "worker:\n  actor:\n    model: {model_path: Qwen/Qwen2.5-1.5B-Instruct}\n", encoding="utf-8")
    assert import_native("easyr1", config, HardwareFlags(gpu="A100-80GB")).data.missing == "data.format_prompt=./nowhere.jinja"
    result = RUNNER.invoke(app, ["plan", "--from", "easyr1", str(config), "--gpu", "A100-80GB", "--data", "auto"])
    assert "data.format_prompt=./nowhere.jinja is not counted" in result.stderr


def test_subsets_and_splits_reach_the_reader(tmp_path: Path) -> None:
    recipe = tmp_path / "config.yaml"
    recipe.write_text("model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct\ndataset_name: open-r1/codeforces\n"
                      "dataset_config: verifiable-prompts\nnum_generations: 2\nper_device_train_batch_size: 2\n",
                      encoding="utf-8")
    assert import_native("trl", recipe, HardwareFlags(gpu="H100-80GB")).data.subset == "verifiable-prompts"
    script = tmp_path / "run.sh"
    script.write_text("swift rlhf --rlhf_type grpo --model Qwen/Qwen2.5-1.5B-Instruct --max_length 1024 --num_generations 2 "
                      "--per_device_train_batch_size 2 --dataset 'AI-ModelScope/clevr_cogen_a_train:default#500'\n",
                      encoding="utf-8")
    ref = import_native("swift", script, HardwareFlags(gpu="A100-80GB")).data
    assert ref.sources == ("AI-ModelScope/clevr_cogen_a_train",) and ref.subset == "default"


def test_saved_dataset_without_the_split_and_empty_data_are_one_line(tmp_path: Path) -> None:
    import datasets

    datasets.DatasetDict({"train": datasets.Dataset.from_list([{"prompt": "x"}])}).save_to_disk(str(tmp_path / "saved"))
    spec = Path(__file__).resolve().parents[2] / "examples" / "seeds" / "s1-before.yaml"
    for data, split, message in ((str(tmp_path / "saved"), "test", "has no split 'test'; allowed: train"),
                                 ("", "train", "empty; allowed")):
        result = RUNNER.invoke(app, ["plan", str(spec), "--data", data, "--data-split", split])
        assert result.exit_code == 2 and message in result.stderr and "Traceback" not in result.stderr


def test_auto_errors_name_the_key(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("data: {train_files: data/missing.jsonl}\n"
                      "worker:\n  actor:\n    model: {model_path: Qwen/Qwen2.5-1.5B-Instruct}\n", encoding="utf-8")
    result = RUNNER.invoke(app, ["plan", "--from", "easyr1", str(config), "--gpu", "A100-80GB", "--data", "auto"])
    assert result.exit_code == 2 and "data.train_files names 'data/missing.jsonl', which is not here" in result.stderr
    assert "Traceback" not in result.stderr and sum(l.startswith("error:") for l in result.stderr.splitlines()) == 1
    spec = Path(__file__).resolve().parents[2] / "examples" / "seeds" / "s1-before.yaml"
    result = RUNNER.invoke(app, ["plan", str(spec), "--data", "auto"])
    assert result.exit_code == 2 and "auto: the config names no training data" in result.stderr


def test_trl_open_r1_recipe_is_a_chat_with_its_system_prompt(tmp_path: Path) -> None:
    recipe = tmp_path / "config.yaml"
    recipe.write_text("model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct\ndataset_name: open-r1/OpenR1-Math-220k\n"
                      "dataset_prompt_column: problem\nsystem_prompt: Think first.\nnum_generations: 2\n"
                      "per_device_train_batch_size: 2\n", encoding="utf-8")
    ref = import_native("trl", recipe, HardwareFlags(gpu="H100-80GB")).data
    assert ref.sources == ("open-r1/OpenR1-Math-220k",) and ref.prompt_field == "problem"
    assert ref.chat and ref.added_text == "Think first."
    plain = tmp_path / "plain.yaml"
    plain.write_text("model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct\ndataset_name: trl-lib/DeepMath-103K\n"
                     "dataset_train_split: train[:10%]\nnum_generations: 2\nper_device_train_batch_size: 2\n", encoding="utf-8")
    ref = import_native("trl", plain, HardwareFlags(gpu="H100-80GB")).data
    assert ref.prompt_field == "prompt" and not ref.chat and ref.split == "train[:10%]"


def test_a_config_chat_template_is_the_one_counted(tmp_path: Path, tokenizer: Path) -> None:
    """open-r1 recipes may set `chat_template` (the DeepSeek-R1 distills override theirs): the data
    is counted through it, not through the tokenizer's own."""
    _rows(tmp_path / "train.jsonl", "problem", ["two plus two"] * 5)
    long_template = "{% for m in messages %}" + "preamble " * 50 + "{{ m['content'] }}{% endfor %}"
    counts = {}
    for name, extra in (("own", ""), ("override", f"chat_template: \"{long_template}\"\n")):
        recipe = tmp_path / f"{name}.yaml"
        recipe.write_text("model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct\ndataset_name: x/y\ndataset_prompt_column: problem\n"
                          "system_prompt: Be brief.\nnum_generations: 2\nper_device_train_batch_size: 2\n" + extra,
                          encoding="utf-8")
        result = RUNNER.invoke(app, ["plan", "--from", "trl", str(recipe), "--gpu", "H100-80GB",
                                     "--data", str(tmp_path / "train.jsonl"), "--tokenizer", str(tokenizer)])
        counts[name] = int(result.stderr.split("longest ")[1].split(" tokens")[0])
        assert ("with the config's chat template" in result.stderr) == (name == "override")
    assert counts["override"] > counts["own"] + 40


def test_vlmr1_jsonl_images_come_from_their_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """VLM-R1's grpo_jsonl.py joins each file's image paths to its --image_folders entry; the
    question template its VLM module adds is not counted, so the data gives no bound."""
    from PIL import Image

    monkeypatch.chdir(tmp_path)
    (tmp_path / "imgs").mkdir()
    Image.new("RGB", (640, 480)).save(tmp_path / "imgs" / "a.png")
    row = {"image": "a.png", "conversations": [{"from": "human", "value": "<image>Find the cat."},
                                               {"from": "gpt", "value": "[1, 2, 3, 4]"}]}
    (tmp_path / "rec.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    script = tmp_path / "run.sh"
    script.write_text("torchrun --nproc_per_node=8 src/open_r1/grpo_jsonl.py --model_name_or_path "
                      "Qwen/Qwen2.5-VL-3B-Instruct --data_file_paths rec.jsonl --image_folders imgs --task_type rec "
                      "--per_device_train_batch_size 8 --num_generations 8\n", encoding="utf-8")
    ref = import_native("vlmr1", script, HardwareFlags(gpu="A100-80GB")).data
    assert ref.sources == ("rec.jsonl",) and ref.image_roots == ("imgs",) and "--task_type rec" in ref.missing
    result = RUNNER.invoke(app, ["plan", "--from", "vlmr1", str(script), "--gpu", "A100-80GB", "--data", "auto"])
    assert "prompts from 'conversations'" in result.stderr, result.stderr
    assert "question template for --task_type rec is not counted" in result.stderr
    assert "images from 'image': 1 read, 0 unreadable" in result.stderr


def test_an_unset_variable_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DATA_DIR", raising=False)
    config = tmp_path / "c.yaml"
    config.write_text("data: {train_files: $DATA_DIR/train.parquet}\n"
                      "worker:\n  actor:\n    model: {model_path: Qwen/Qwen2.5-1.5B-Instruct}\n", encoding="utf-8")
    result = RUNNER.invoke(app, ["plan", "--from", "easyr1", str(config), "--gpu", "A100-80GB", "--data", "auto"])
    assert result.exit_code == 2 and "'$DATA_DIR/train.parquet' (a variable this environment does not set)" in result.stderr

