"""Launch scripts that keep their flags in bash arrays (`ARGS=(...)`, then `cmd ${ARGS[@]}`), as
OpenRLHF's examples do: the patch edits a flag where the array sets it, removes a switch from
the array, and appends new flags after the command's last word, not inside an array. Before,
the array's flags were invisible: a switch could not be removed, a classic OpenRLHF script was
read as the dotted release and got dotted flags appended (the copy no longer read back)."""

from __future__ import annotations

import json
from pathlib import Path


from oomless.adapters.patch.shell_text import current_value, patch_shell, pick_command
from tests.adapters.native_helpers import fit_write

SCRIPT = """#!/bin/bash
ENGINE_ARGS=(
   --vllm_num_engines 2
   --enforce_eager
   # --adam_offload
   --zero_stage 3
)
LOG_ARGS=(
   --logging_steps 1
)
LOG_ARGS+=(--eval_steps -1)

python3 -m openrlhf.cli.train_ppo_ray \\
   --pretrain Qwen/Qwen2.5-7B \\
   ${ENGINE_ARGS[@]} \\
   "${LOG_ARGS[@]}"
"""
KEYS = ["--vllm_num_engines", "--enforce_eager", "--zero_stage", "--eval_steps", "--vllm_enable_sleep"]


def test_array_flags_are_read_as_the_commands() -> None:
    command = pick_command(SCRIPT, KEYS, "switch_flags", "run.sh")
    assert current_value(command, "--vllm_num_engines", "switch_flags") == "2"
    assert current_value(command, "--enforce_eager", "switch_flags") is True
    assert current_value(command, "--eval_steps", "switch_flags") == "-1"  # from the `+=` definition
    assert current_value(command, "--adam_offload", "switch_flags") is None  # commented out


def test_array_flags_edited_where_they_are_and_new_ones_appended_to_the_command() -> None:
    out = patch_shell(SCRIPT, {"--vllm_num_engines": 1, "--enforce_eager": False, "--vllm_enable_sleep": True},
                      "switch_flags", "run.sh", KEYS)
    assert "   --vllm_num_engines 1\n" in out
    assert "--enforce_eager" not in out
    assert "   # --adam_offload\n   --zero_stage 3\n)" in out  # the comment and the next flag kept
    assert out.endswith('"${LOG_ARGS[@]}" \\\n   --vllm_enable_sleep\n')
    assert "LOG_ARGS+=(--eval_steps -1)\n" in out


CORPUS = Path(__file__).resolve().parents[1] / "real_configs"


def test_classic_openrlhf_script_with_arrays_reads_back(tmp_path: Path, monkeypatch) -> None:
    """OpenRLHF 0.10.1's hybrid-engine example sets `--enforce_eager` in an array; fit's answer
    drops it on A100-80GB. The copy must stay in classic flags and read back as the answer."""
    monkeypatch.chdir(CORPUS / "openrlhf" / "v0.10.1")
    source = "examples/scripts/train_reinforce_baseline_hybrid_engine.sh"
    result = fit_write("openrlhf", source, tmp_path, "--gpu", "A100-80GB")
    assert result.exit_code == 0, result.output
    native = json.loads(result.stdout)["native"]
    assert any("--enforce_eager" in change for change in native["changes"]), native["changes"]
    assert native["cannot_express"] is None, native["cannot_express"]
    assert "reads it back: fits" in native["read_back"]
    written = (tmp_path / Path(source).name).read_text()
    assert "--vllm." not in written and "--enforce_eager" not in written
