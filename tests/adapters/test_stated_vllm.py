"""A vLLM release a TRL or ms-swift file states (`# oomless: ... vllm==X`) reaches the spec's
`rollout.vllm_version` with the request size the framework sends it (`samples_per_request`):
TRL 0.14 and TRL servers ask for n = num_generations, TRL 0.15 and colocated engines for n = 1,
ms-swift always for n = 1 (the leak of vLLM 0.7.x needs n > 1: memory/growth.py)."""

from __future__ import annotations

import pytest

from oomless.adapters.round_trip import unstated_releases
from tests.adapters.swift_cases import imported, script
from tests.adapters.test_trl import from_files

GRPO = ("accelerate launch --num_processes 4 examples/scripts/grpo.py --model_name_or_path Qwen/Qwen2.5-1.5B-Instruct "
        "--output_dir out --bf16 true --use_vllm true {mode}\n")


@pytest.mark.parametrize(("trl", "mode", "n"), [
    ("1.16", "--vllm_mode colocate", 1),
    ("0.18", "--vllm_mode colocate", 1),
    ("0.18", "--vllm_mode server", None),
    ("0.15", "", 1),
    ("0.14", "", None),
])
def test_trl_states_the_release_and_its_request_size(trl: str, mode: str, n: int | None) -> None:
    separate = {} if "colocate" in mode else {"gpus_per_node": 5}  # a server / vllm_device GPU beside the 4
    spec, _, _ = from_files({"launch.sh": f"# oomless: trl=={trl} vllm==0.7.3\n" + GRPO.format(mode=mode)}, **separate)
    assert spec["rollout"]["vllm_version"] == "0.7.3"
    assert spec["rollout"].get("samples_per_request") == n


def test_an_unstated_release_stays_unknown() -> None:
    spec, _, _ = from_files({"launch.sh": "# oomless: trl==1.16\n" + GRPO.format(mode="--vllm_mode colocate")})
    assert "vllm_version" not in spec["rollout"] and "samples_per_request" not in spec["rollout"]


def test_ms_swift_sends_one_completion_per_request() -> None:
    flags = {"model": "Qwen/Qwen2.5-1.5B-Instruct", "max_length": 1024, "num_generations": 4, "use_vllm": "true",
             "vllm_mode": "colocate"}
    spec, _, _ = imported(script(flags, {"NPROC_PER_NODE": 4}, "3.6", "0.7.3"))
    assert (spec["rollout"]["vllm_version"], spec["rollout"]["samples_per_request"]) == ("0.7.3", 1)
    spec, _, _ = imported(script(flags, {"NPROC_PER_NODE": 4}, "3.6"))
    assert "vllm_version" not in spec["rollout"]


def test_a_release_only_the_written_files_name_is_not_a_difference() -> None:
    wanted = {"rollout": {"vllm_version": None, "samples_per_request": None}}
    got = {"rollout": {"vllm_version": "0.8.5", "samples_per_request": 1}}
    unstated_releases(wanted, got)
    assert got == wanted
    stated = {"rollout": {"vllm_version": "0.10.2", "samples_per_request": None}}
    got = {"rollout": {"vllm_version": "0.8.5", "samples_per_request": 1}}
    unstated_releases(stated, got)
    assert got["rollout"] == {"vllm_version": "0.8.5", "samples_per_request": 1}  # a stated release must read back

