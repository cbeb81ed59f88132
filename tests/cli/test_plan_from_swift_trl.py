"""`oomless plan --from swift|trl`: native seeds give the YAML seeds' verdicts; bad input is one
line on stderr, exit code 2, no traceback. Run in real processes, as a user sees them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oomless.errors import EXIT_BAD_INPUT
from tests.cli.conftest import run_oomless
from tests.cli.test_plan_errors import assert_one_error_line
from tests.helpers import EXAMPLES

NATIVE = EXAMPLES / "seeds" / "native"


@pytest.mark.parametrize(("name", "gpu"), [("s0-before", "H20"), ("s0-after", "H20"), ("s1-before", "RTX-3090"),
                                           ("s1-after", "A10")])
def test_native_swift_seed_has_the_yaml_verdict(name: str, gpu: str) -> None:
    native = run_oomless("plan", "--json", "--from", "swift", str(NATIVE / f"{name}.sh"), "--gpu", gpu)
    written = run_oomless("plan", "--json", str(EXAMPLES / "seeds" / f"{name}.yaml"))
    assert native.returncode == written.returncode, native.stderr
    got, want = json.loads(native.stdout), json.loads(written.stdout)
    keys = ("phase", "device", "device_role", "component")
    assert got["fits"] == want["fits"]
    assert [got["binding"][k] for k in keys] == [want["binding"][k] for k in keys]
    assert f"--gpu {gpu}" in (NATIVE / f"{name}.sh").read_text(encoding="utf-8")  # the comment says how to plan it


SWIFT_OK = ("# oomless: ms-swift==4.6\nNPROC_PER_NODE=4 swift rlhf --rlhf_type grpo --model Qwen/Qwen2.5-1.5B-Instruct "
            "--num_generations 4")
TRL_OK = "# oomless: trl==1.16\nmodel_name_or_path: Qwen/Qwen2.5-1.5B-Instruct\n"
BAD = [
    ("swift", "run.sh", SWIFT_OK + " --system 'unclosed\n", "error: {path}:2: malformed shell: no closing quotation"),
    ("swift", "run.sh", SWIFT_OK.replace("4.6", "9.0") + "\n", "error: ms-swift version: 9.0 is not supported"),
    ("swift", "run.sh", SWIFT_OK + " --per_device_train_batch_size two\n",
     "error: --per_device_train_batch_size: 'two' is not an integer"),
    ("trl", "grpo.yaml", TRL_OK + "beta: [0.1\n", "error: {path}: malformed YAML at line"),
    ("trl", "grpo.yaml", TRL_OK.replace("1.16", "0.13"), "error: trl version: 0.13 is not supported"),
    ("trl", "grpo.yaml", TRL_OK + "vllm_gpu_memory_utilization: high\nuse_vllm: true\n",
     "error: vllm_gpu_memory_utilization: 'high' is not a number"),
    ("trl", "run.sh", "trl grpo --config 'grpo.yaml\n", "error: {path}:1: malformed shell: no closing quotation"),
]


@pytest.mark.parametrize(("framework", "name", "text", "prefix"), BAD, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)])
def test_bad_native_input_is_one_line(tmp_path: Path, framework: str, name: str, text: str, prefix: str) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    done = run_oomless("plan", "--from", framework, str(path), "--gpu", "A100-80GB")
    assert done.returncode == EXIT_BAD_INPUT
    assert_one_error_line(done, prefix.format(path=path))


def test_missing_gpu_is_named(tmp_path: Path) -> None:
    path = tmp_path / "run.sh"
    path.write_text(SWIFT_OK + "\n", encoding="utf-8")
    assert_one_error_line(run_oomless("plan", "--from", "swift", str(path)), "error: --gpu: required with --from swift")
