"""`padding_free` is SFTConfig's key: no GRPOConfig or RLOOConfig of TRL 0.14-1.16 has it (key
tables), GRPOTrainer pads every batch and TRL's parser refuses the key. Read: ignored with why,
planned padded. Written: refused, naming batch.padding_free."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomless.adapters import export_native
from oomless.errors import InputError
from oomless.spec.load import parse_spec
from tests.adapters.test_trl import QUICKSTART_TRL, from_files

LAUNCH = ("accelerate launch --num_processes 4 examples/scripts/grpo.py --model_name_or_path Qwen/Qwen2.5-1.5B-Instruct "
          "--output_dir out --padding_free true\n")


def test_a_padding_free_key_is_ignored_and_planned_padded() -> None:
    spec, ignored, _ = from_files({"launch.sh": LAUNCH})
    assert "padding_free" not in spec["batch"]
    assert any(line.startswith("padding_free: not a GRPOConfig key") for line in ignored)


def test_a_padding_free_spec_is_not_written_for_trl(tmp_path: Path) -> None:
    spec = parse_spec({**QUICKSTART_TRL, "batch": {**QUICKSTART_TRL["batch"], "padding_free": True}})
    with pytest.raises(InputError) as err:
        export_native("trl", spec, tmp_path, force=False)
    assert err.value.field == "batch.padding_free"
    assert not list(tmp_path.iterdir())
