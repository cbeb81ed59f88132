"""`# oomless: transformers==X` in a framework's file gives the spec's transformers_version
(adapters.import_native), whatever the framework; a bad release is refused naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomless.adapters import HardwareFlags, import_native
from oomless.errors import InputError
from oomless.spec.load import parse_spec
from tests.adapters.swift_cases import script

FLAGS = {"model": "Qwen/Qwen2.5-VL-3B-Instruct", "max_length": 1024, "num_generations": 4}


def read(tmp_path: Path, directive: str) -> dict:
    path = tmp_path / "run.sh"
    path.write_text(directive + "\n" + script(FLAGS, {"NPROC_PER_NODE": 4}), encoding="utf-8")
    return import_native("swift", path, HardwareFlags(gpu="A100-80GB")).spec


def test_the_directive_names_the_release(tmp_path: Path) -> None:
    assert read(tmp_path, "# oomless: transformers==5.2")["transformers_version"] == "5.2"
    assert "transformers_version" not in read(tmp_path, "# a comment")


def test_a_bad_release_is_refused_by_the_spec(tmp_path: Path) -> None:
    spec = read(tmp_path, "# oomless: transformers==five")
    with pytest.raises(InputError, match="transformers_version"):
        parse_spec(spec)


def test_a_malformed_directive_names_its_line(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"(run\.sh:|line )1\b"):
        read(tmp_path, "# oomless: transformers")


def test_trl_files_take_the_directive_too(tmp_path: Path) -> None:
    path = tmp_path / "launch.sh"
    path.write_text("# oomless: transformers==5.2\naccelerate launch --num_processes 8 examples/scripts/grpo_vlm.py "
                    "--model_name_or_path Qwen/Qwen2.5-VL-3B-Instruct --output_dir out\n", encoding="utf-8")
    assert import_native("trl", path, HardwareFlags(gpu="A100-80GB")).spec["transformers_version"] == "5.2"


def test_trl_and_ms_swift_exports_name_the_release(tmp_path: Path) -> None:
    from oomless.adapters.swift.writer import export_files as swift_files
    from oomless.adapters.trl.writer import export_files as trl_files
    from tests.adapters.test_trl import QUICKSTART_TRL

    files = trl_files(parse_spec({**QUICKSTART_TRL, "transformers_version": "5.2"}))  # raises unless it reads back
    assert any("transformers==5.2" in text for text in files.values())
    spec = read(tmp_path, "# oomless: transformers==5.2")
    files = swift_files(parse_spec(spec))
    assert "transformers==5.2" in files["run_grpo.sh"]
