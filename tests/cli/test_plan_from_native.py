"""`oomless plan --from FRAMEWORK` on the seed cases in their native form: same verdict
(fits, binding phase and device) as the YAML seed specs; bad native input exits 2 with one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oomless.errors import EXIT_BAD_INPUT
from tests.cli.conftest import run_oomless
from tests.helpers import EXAMPLES

SEEDS = EXAMPLES / "seeds"
NATIVE_SEEDS = [
    # (framework, native file, YAML seed, hardware flags as in the native file's first comment)
    ("easyr1", "s2-before.yaml", "s2-before.yaml", ["--gpu", "A100-40GB", "--host-ram", "760"]),
    ("easyr1", "s2-after.yaml", "s2-after.yaml", ["--gpu", "A100-40GB", "--host-ram", "760"]),
    ("vlmr1", "s3-before.sh", "s3-before.yaml", ["--gpu", "H20"]),
    ("vlmr1", "s3-after.sh", "s3-after.yaml", ["--gpu", "H20"]),
    ("orz", "s4-before.py", "s4-before.yaml", ["--gpu", "A100-80GB"]),
    ("orz", "s4-after.py", "s4-after.yaml", ["--gpu", "A100-80GB"]),
]


def _verdict(*args: str) -> tuple[bool, str, str, int]:
    done = run_oomless("plan", *args, "--json")
    assert done.returncode in (0, 1), done.stderr
    plan = json.loads(done.stdout)
    return plan["fits"], plan["binding"]["phase"], plan["binding"]["device"], done.returncode


@pytest.mark.parametrize(("framework", "native", "seed", "flags"), NATIVE_SEEDS, ids=[n for _, n, _, _ in NATIVE_SEEDS])
def test_native_seed_plans_like_its_yaml_spec(framework: str, native: str, seed: str, flags: list[str]) -> None:
    path = SEEDS / "native" / native
    first_line = path.read_text().splitlines()[0 if not native.endswith(".sh") else 1]
    assert f"oomless plan --from {framework} examples/seeds/native/{native} {' '.join(flags)}" in first_line
    assert _verdict("--from", framework, str(path), *flags) == _verdict(str(SEEDS / seed))


BAD = [
    ("verl", "cfg.yaml", "actor_rollout_ref: [1,\n", "error: "),
    ("easyr1", "cfg.yaml", "# easyr1==9.9.9\nworker: {}\n", "error: {path}:1: unknown easyr1 version 9.9.9; allowed: 0.3.0 to 0.3.3"),
    ("openrlhf", "run.sh", "python3 -m openrlhf.cli.train_ppo_ray --pretrain 'unterminated\n", "error: "),
    ("openrlhf", "run.sh", "python3 -m openrlhf.cli.train_ppo_ray --pretrain m --vllm_gpu_memory_utilization high\n",
     "error: --vllm_gpu_memory_utilization: 'high' is not a valid float"),
    ("orz", "exp.py", "class PPOExpConfig(BasePPOExpConfig):\n    pretrain = (\n", "error: "),
    ("vlmr1", "run.sh", "echo nothing here\n", "error: {path}: no training command found (line 1: echo); allowed: "),
    ("verl", "cfg.yaml", "data:\n  max_prompt_length: ${nope.x}\n", "error: {path}:2: data.max_prompt_length: broken interpolation"),
]


@pytest.mark.parametrize(("framework", "name", "text", "start"), BAD, ids=[f"{f}-{i}" for i, (f, *_) in enumerate(BAD)])
def test_bad_native_input_is_one_line_and_exit_2(tmp_path: Path, framework: str, name: str, text: str, start: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    done = run_oomless("plan", "--from", framework, str(path), "--gpu", "A100-80GB")
    assert done.returncode == EXIT_BAD_INPUT
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(start.format(path=path)), done.stderr
    assert "Traceback" not in done.stderr
