"""A YAML that gives a key twice (open-r1 ca8664d's Qwen2.5-7B recipe: `do_eval` twice) is read
as PyYAML reads it (the last one wins) and patched line by line; ruamel's round trip refuses
it, and `fit --from trl --write` exited 2 ("cannot read YAML: while constructing a mapping")."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from oomless.adapters.patch.yaml_text import get, load, patch_yaml
from oomless.cli.main import app
from oomless.errors import InputError

TEXT = """# recipe
do_eval: false
per_device_train_batch_size: 16   # per GPU
gradient_checkpointing: true
do_eval: true
reward_funcs:
- accuracy
"""


def test_read_as_the_last_copy() -> None:
    assert get(load(TEXT, "c.yaml"), "do_eval") is True


def test_patched_line_by_line_every_copy_comments_kept() -> None:
    out = patch_yaml(TEXT, {"do_eval": False, "per_device_train_batch_size": 4, "gradient_checkpointing": None,
                            "use_liger_kernel": True}, "c.yaml")
    assert out.count("do_eval: false\n") == 2
    assert "per_device_train_batch_size: 4   # per GPU\n" in out
    assert "gradient_checkpointing" not in out
    assert out.endswith("- accuracy\nuse_liger_kernel: true\n")
    data = yaml.safe_load(out)
    assert data["per_device_train_batch_size"] == 4 and data["use_liger_kernel"] is True and data["reward_funcs"] == ["accuracy"]


def test_what_lines_cannot_say_is_refused() -> None:
    with pytest.raises(InputError):
        patch_yaml(TEXT, {"reward_funcs": ["format"]}, "c.yaml")  # a block value
    with pytest.raises(InputError):
        patch_yaml(TEXT, {"a.b": 1}, "c.yaml")


CORPUS = Path(__file__).resolve().parents[1] / "real_configs"


def test_recipe_with_a_duplicate_key_is_not_refused(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(CORPUS / "open-r1" / "ca8664d")
    result = CliRunner().invoke(app, ["fit", "--from", "trl", "recipes/Qwen2.5-7B-Instruct/grpo/config_demo.yaml",
                                      "--gpu", "A100-80GB", "--write", str(tmp_path), "--top", "0"])
    assert result.exit_code in (0, 1), result.output
