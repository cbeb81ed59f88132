"""ms-swift scripts that document their `swift rollout` server in comments, and prompts bounded
by the vLLM engine when `--max_length` is unset (ms-swift's deepeyes example does both)."""

from __future__ import annotations

import pytest

from oomless.errors import InputError
from oomless.frontends.commented import commented_commands
from tests.adapters.swift_cases import imported, script

BASE = {"model": "Qwen/Qwen2.5-1.5B-Instruct", "num_generations": 4, "max_completion_length": 1024}
SERVER = {**BASE, "use_vllm": "true", "vllm_mode": "server", "vllm_server_host": "127.0.0.1"}
DOCUMENTED = """# Run the server in another terminal:
# CUDA_VISIBLE_DEVICES=4,5 \\
# swift rollout \\
#     --model Qwen/Qwen2.5-1.5B-Instruct \\
#     --vllm_tensor_parallel_size 2 \\
#     --vllm_max_model_len 6144 \\
#     --vllm_gpu_memory_utilization 0.7
"""


def test_commented_commands_keep_the_script_lines_and_skip_prose() -> None:
    text = "#!/bin/bash\n# it's prose with an unbalanced quote\n\n" + DOCUMENTED + "echo done  # trailing\n"
    found = commented_commands(text, "run.sh")
    rollout = [c for c in found if c.argv[:2] == ("swift", "rollout")]
    assert len(rollout) == 1 and rollout[0].line == 5  # the line its command (CUDA_VISIBLE_DEVICES=...) starts on
    assert rollout[0].env["CUDA_VISIBLE_DEVICES"] == "4,5"
    assert "--vllm_max_model_len" in rollout[0].argv
    assert all(c.argv[0] != "echo" for c in found)  # live commands are not comments


def test_a_documented_server_is_the_planned_server() -> None:
    spec, _, notes = imported(script(SERVER, {"NPROC_PER_NODE": 4}, pre=DOCUMENTED))
    rollout = spec["rollout"]
    assert rollout["engine"] == "vllm_separate" and rollout["num_gpus"] == 2
    assert rollout["tensor_parallel_size"] == 2 and rollout["gpu_memory_utilization"] == 0.7
    assert rollout["max_model_len"] == 6144
    assert any("documents in its comments (line 3)" in n for n in notes)
    # --max_length unset: prompt + completion within the server's max_model_len, not the model's 32,768
    assert spec["lengths"] == {"max_prompt_tokens": 6144 - 1024, "max_completion_tokens": 1024}


def test_a_live_server_wins_and_two_documented_servers_are_not_guessed() -> None:
    live = "CUDA_VISIBLE_DEVICES=4 swift rollout --model Qwen/Qwen2.5-1.5B-Instruct --vllm_max_model_len 4096 &\n"
    spec, _, notes = imported(script(SERVER, {"NPROC_PER_NODE": 4}, pre=DOCUMENTED + live))
    assert spec["rollout"]["num_gpus"] == 1 and spec["rollout"]["max_model_len"] == 4096
    assert not any("documents in its comments" in n for n in notes)
    twice = DOCUMENTED + "\n" + DOCUMENTED.replace("0.7", "0.5")
    spec, _, notes = imported(script(SERVER, {"NPROC_PER_NODE": 4}, pre=twice))
    assert any("without a `swift rollout` command" in n for n in notes)
    assert spec["lengths"]["max_prompt_tokens"] == 32768 - 1024


def test_a_documented_server_is_ignored_in_colocate_mode() -> None:
    flags = {**BASE, "use_vllm": "true", "vllm_mode": "colocate"}
    spec, _, notes = imported(script(flags, {"NPROC_PER_NODE": 4}, pre=DOCUMENTED))
    assert spec["rollout"]["engine"] == "vllm_colocate"
    assert not any("documents in its comments" in n for n in notes)


@pytest.mark.parametrize(("engine_len", "prompt"), [(None, 32768 - 1024), (8192, 8192 - 1024)])
def test_a_colocated_engine_bounds_the_prompt_when_max_length_is_unset(engine_len: int | None, prompt: int) -> None:
    flags = {**BASE, "use_vllm": "true", "vllm_mode": "colocate"}
    if engine_len:
        flags["vllm_max_model_len"] = engine_len
    spec, _, notes = imported(script(flags, {"NPROC_PER_NODE": 4}))
    assert spec["lengths"]["max_prompt_tokens"] == prompt
    assert any("--max_length unset" in n for n in notes)


def test_an_engine_too_short_for_the_completion_is_refused() -> None:
    flags = {**BASE, "use_vllm": "true", "vllm_mode": "colocate", "vllm_max_model_len": 1024}
    with pytest.raises(InputError, match="max_model_len 1024"):
        imported(script(flags, {"NPROC_PER_NODE": 4}))
