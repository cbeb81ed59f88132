"""adapters.common: the shell subset, HfArgumentParser-style flags, directives, file writing."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomless.adapters.args import FlagReader
from oomless.adapters.common import parse_flags, parse_shell, parse_version, read_directives, write_new_files
from oomless.adapters.round_trip import first_difference
from oomless.errors import InputError

SCRIPT = r"""#!/bin/bash
# oomless: ms-swift==3.4 vllm==0.8.5
set -e
N=4
export MAX_PIXELS=602112
GA=$(expr 16 / $N)
CUDA_VISIBLE_DEVICES=0,1,2,3 \
NPROC_PER_NODE=$N \
swift rlhf \
    --rlhf_type grpo \
    --dataset AI-MO/NuminaMath-TIR#1000 \
    --vllm_limit_mm_per_prompt '{"image": 2}' \
    --gradient_accumulation_steps $GA --num_generations $((N*2-1)) --beta ${BETA:-0.04} \
    --system "You are # helpful" # a trailing comment
CUDA_VISIBLE_DEVICES=7 nohup swift rollout --model m > r.log 2>&1 &
"""


def test_shell_commands_with_environment_and_expansions() -> None:
    commands = parse_shell(SCRIPT, "run.sh")
    rlhf = next(c for c in commands if c.argv[:2] == ("swift", "rlhf"))
    assert rlhf.line == 7
    assert rlhf.env == {"MAX_PIXELS": "602112", "CUDA_VISIBLE_DEVICES": "0,1,2,3", "NPROC_PER_NODE": "4"}
    flags = parse_flags(rlhf.argv[2:], "run.sh")
    assert flags["dataset"] == ["AI-MO/NuminaMath-TIR#1000"]  # '#' inside a word is not a comment
    assert flags["vllm_limit_mm_per_prompt"] == ['{"image": 2}']
    assert flags["gradient_accumulation_steps"] == ["4"]  # $(expr 16 / $N)
    assert flags["num_generations"] == ["7"]  # $((N*2-1))
    assert flags["beta"] == ["0.04"]  # ${BETA:-0.04}
    assert flags["system"] == ["You are # helpful"]
    rollout = next(c for c in commands if c.argv[:2] == ("swift", "rollout"))
    assert rollout.background and rollout.argv == ("swift", "rollout", "--model", "m")
    assert rollout.env["CUDA_VISIBLE_DEVICES"] == "7"


def test_unexported_variables_do_not_reach_the_command() -> None:
    (cmd,) = parse_shell("X=1\nexport Y=2\nrun --a $X\n", "s")
    assert cmd.env == {"Y": "2"} and cmd.argv == ("run", "--a", "1")


@pytest.mark.parametrize(("text", "message"), [
    ("swift rlhf --system 'unterminated\n", "no closing quotation"),
    ("swift rlhf --n $((4 / 0))\n", "division by zero"),
    ("swift rlhf --n $((4 ** 2))\n", "cannot evaluate arithmetic"),
])
def test_malformed_shell_is_one_input_error(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_shell(text, "s.sh")


def test_flags_styles_and_errors() -> None:
    assert parse_flags(["--a", "1", "2", "--b=x", "--c", "--d-e", "y"], "s") == {
        "a": ["1", "2"], "b": ["x"], "c": [], "d_e": ["y"]}
    with pytest.raises(InputError, match="unexpected argument 'stray'"):
        parse_flags(["stray", "--a", "1"], "s")
    reader = FlagReader({"x": ["maybe"], "n": ["1.5"], "u": ["1"]}, "ms-swift 4.6")
    with pytest.raises(InputError, match="--x: 'maybe' is not a boolean"):
        reader.bool("x", False)
    with pytest.raises(InputError, match="--n: '1.5' is not an integer"):
        reader.int("n")
    assert reader.leftover(frozenset()) == ["--u: not understood (not a ms-swift 4.6 flag oomless knows)"]


def test_directives_and_versions() -> None:
    assert read_directives("# oomless: trl==1.16 max_prompt_tokens=512\n#oomless: vllm==0.8.5\n") == {
        "trl": "1.16", "max_prompt_tokens": "512", "vllm": "0.8.5"}
    with pytest.raises(InputError, match="line 1"):
        read_directives("# oomless: trl\n")
    assert parse_version("v", "4.6.0.dev0") == (4, 6, 0)
    with pytest.raises(InputError, match="not a version number"):
        parse_version("ms-swift version", "latest")


def test_write_new_files_never_clobbers_without_force(tmp_path: Path) -> None:
    first = {tmp_path / "a.txt": "1", tmp_path / "b.txt": "2"}
    write_new_files(first, force=False)
    (tmp_path / "b.txt").write_text("mine")
    with pytest.raises(InputError, match=r"b\.txt: file exists; pass --force"):
        write_new_files({tmp_path / "c.txt": "3", tmp_path / "b.txt": "2"}, force=False)
    assert not (tmp_path / "c.txt").exists()  # all or nothing
    assert (tmp_path / "b.txt").read_text() == "mine"
    write_new_files({tmp_path / "b.txt": "2"}, force=True)
    assert (tmp_path / "b.txt").read_text() == "2"


def test_first_difference_names_the_dotted_key() -> None:
    assert first_difference({"a": {"b": 1, "c": 2}}, {"a": {"b": 1, "c": 3}}) == "a.c"
    assert first_difference({"a": 1}, {"a": 1}) is None
