"""A training command inside a script string (`srun ... bash -c "cmd --flag v ..."`, OpenRLHF's
Slurm example): the patch edits its flags inside the string and escapes what it writes for the
string's quotes. Before, the patcher saw only the outer commands, appended the flags to the
script's last `echo`, and the copy read back as the unpatched run."""

from __future__ import annotations

import json
import shlex
from pathlib import Path


from oomless.adapters.patch.shell_text import current_value, patch_shell, pick_command
from tests.adapters.native_helpers import fit_write
from oomless.frontends.shell import parse_shell

SCRIPT = """#!/bin/bash
srun --nodes=1 bash -c \\
"pip install x \\
&& python3 -m openrlhf.cli.train_ppo_ray \\
    --vllm.num_engines 4 \\
    --runtime-env-json='{\\"a\\": 1}' \\
    --ds.adam_offload \\
    --logger.key {token}" &>> log
echo done &>> log
"""
KEYS = ["--vllm.num_engines", "--ds.adam_offload", "--vllm.limit", "--runtime-env-json"]


def _inner_argv(text: str) -> list[str]:
    outer = next(c for c in parse_shell(text, "run.sh") if c.argv[0] == "srun")
    return next(c for c in parse_shell(outer.argv[-1], "inner") if c.argv[0] == "python3").argv


def test_flags_inside_a_shell_string_are_read() -> None:
    command = pick_command(SCRIPT, KEYS, "switch_flags", "run.sh")
    assert current_value(command, "--vllm.num_engines", "switch_flags") == "4"
    assert current_value(command, "--ds.adam_offload", "switch_flags") is True
    assert current_value(command, "--runtime-env-json", "switch_flags") == '{"a": 1}'


def test_edits_inside_the_string_read_back_as_written() -> None:
    out = patch_shell(SCRIPT, {"--vllm.num_engines": 1, "--ds.adam_offload": False, "--vllm.limit": '{"image": 2}'},
                      "switch_flags", "run.sh", KEYS)
    argv = _inner_argv(out)
    assert argv[argv.index("--vllm.num_engines") + 1] == "1"
    assert "--ds.adam_offload" not in argv
    assert argv[argv.index("--vllm.limit") + 1] == '{"image": 2}'  # a quote escaped for the outer "..."
    assert argv[argv.index("--logger.key") + 1] == "{token}"
    assert out.endswith('" &>> log\necho done &>> log\n')  # the echo left alone
    assert shlex.split(out.splitlines()[-1]) == ["echo", "done", "&>>", "log"]


CORPUS = Path(__file__).resolve().parents[1] / "real_configs"


def test_openrlhf_slurm_example_reads_back_as_the_answer(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(CORPUS / "openrlhf" / "HEAD")
    source = "examples/scripts/train_ppo_ray_slurm.sh"
    result = fit_write("openrlhf", source, tmp_path, "--gpu", "A100-80GB")
    assert result.exit_code == 0, result.output
    native = json.loads(result.stdout)["native"]
    assert native["changes"] and native["cannot_express"] is None, native["cannot_express"]
    assert "reads it back: fits" in native["read_back"]
    assert (tmp_path / Path(source).name).read_text().rstrip().endswith("stopped ...\" &>> ${JOBLOG}")
