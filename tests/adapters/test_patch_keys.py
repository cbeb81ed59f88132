"""A spec change shown and patched as the framework's own key (issue 16: `--vllm_gpu_memory_utilization 0.4`,
`actor_rollout_ref.rollout.gpu_memory_utilization=0.4`, `use_liger_kernel: true`), through the
writers' `native_settings` — the mapping their exporters use."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from oomless.adapters import HardwareFlags
from oomless.adapters.patch import plan_patch
from oomless.cli.import_cmd import load_native

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT / "examples" / "seeds" / "native"
CORPUS = ROOT / "tests" / "real_configs"
TRL = """# oomless: trl==1.16 max_prompt_tokens=1024
model_name_or_path: Qwen/Qwen2.5-7B-Instruct  # the policy
per_device_train_batch_size: 8
max_completion_length: 2048
use_vllm: true
vllm_mode: colocate
vllm_gpu_memory_utilization: 0.3
accelerate_config: zero3
"""
CASES = [
    ("swift", SEEDS / "s1-before.sh", "RTX-3090", {"rollout.gpu_memory_utilization": 0.4}, "--vllm_gpu_memory_utilization 0.8 → 0.4"),
    ("verl", CORPUS / "verl/HEAD/examples/grpo_trainer/run_qwen2-7b.sh", "A100-80GB", {"rollout.gpu_memory_utilization": 0.4},
     "actor_rollout_ref.rollout.gpu_memory_utilization=0.6 → 0.4"),
    ("easyr1", SEEDS / "s2-before.yaml", "A100-40GB", {"rollout.gpu_memory_utilization": 0.4},
     "worker.rollout.gpu_memory_utilization: 0.6 → 0.4"),
    ("openrlhf", CORPUS / "openrlhf/HEAD/examples/scripts/train_ppo_with_reward_fn.sh", "A100-80GB",
     {"gradient_checkpointing": False}, "--actor.gradient_checkpointing_enable: removed"),
    ("orz", SEEDS / "s4-before.py", "A100-80GB", {"rollout.gpu_memory_utilization": 0.4}, "gpu_memory_utilization = "),
    ("vlmr1", SEEDS / "s3-before.sh", "H20", {"gradient_checkpointing": False}, "--gradient_checkpointing true → false"),
]


def _changed(spec, overrides):
    data = spec.model_dump(mode="json", exclude_unset=True)  # fields the input left out stay left out
    for dotted, value in overrides.items():
        *parents, leaf = dotted.split(".")
        node = data
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return type(spec).model_validate(data)


@pytest.mark.parametrize(("framework", "path", "gpu", "overrides", "shown"), CASES, ids=[c[0] for c in CASES])
def test_change_in_the_frameworks_key(framework: str, path: Path, gpu: str, overrides: dict, shown: str) -> None:
    run, _ = load_native(path, framework, HardwareFlags(gpu=gpu))
    patch = plan_patch(framework, path, path.read_text(), run.spec, _changed(run.spec, overrides))
    lines = [c.shown for c in patch.changes]
    assert any(line.startswith(shown) for line in lines), lines
    assert len(lines) == 1 and not patch.unexpressed
    diff = [line for line in difflib.unified_diff(path.read_text().splitlines(), patch.patched.splitlines(), lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert 1 <= len(diff) <= 2, diff  # one line edited (or removed, or appended after the last)


def test_trl_yaml_keeps_comments_and_speaks_trl(tmp_path: Path) -> None:
    path = tmp_path / "grpo.yaml"
    path.write_text(TRL)
    run, _ = load_native(path, "trl", HardwareFlags(gpu="H100", gpus_per_node=8))
    patch = plan_patch("trl", path, TRL, run.spec, _changed(run.spec, {"liger_kernels": True, "rollout.gpu_memory_utilization": 0.4}))
    assert sorted(c.shown for c in patch.changes) == ["use_liger_kernel: (unset) → true", "vllm_gpu_memory_utilization: 0.3 → 0.4"]
    assert "# the policy" in patch.patched and "# oomless: trl==1.16" in patch.patched
    assert "vllm_gpu_memory_utilization: 0.4\n" in patch.patched and "use_liger_kernel: true\n" in patch.patched
