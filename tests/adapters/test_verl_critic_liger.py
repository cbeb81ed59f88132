"""verl's `critic.model.use_liger`: the spec's `liger_kernels` is the actor's (`planner.gpu_phases.
liger_kernels_in`), and verl 0.9.1's FSDP engine applies Liger to the critic it builds from
`critic.model` (`workers/engine/fsdp/transformer_impl.py`; verl <= 0.7's `CriticWorker` never did):
the key is named among the unplanned ones, never read as the actor's and never dropped silently."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomless.adapters import HardwareFlags, import_native
from oomless.spec.load import parse_spec

ROOT = Path(__file__).resolve().parents[2]
PPO = ROOT / "tests/real_configs/verl/HEAD/examples/ppo_trainer/run_deepseek7b_llm.sh"
ANCHOR = "    critic.model.path=deepseek-ai/deepseek-llm-7b-chat \\\n"


def _read(tmp_path: Path, *lines: str):
    text = PPO.read_text()
    assert ANCHOR in text
    path = tmp_path / "run.sh"
    path.write_text(text.replace(ANCHOR, ANCHOR + "".join(f"    {line} \\\n" for line in lines)))
    result = import_native("verl", path, HardwareFlags(gpu="H100-80GB"))
    return parse_spec(result.spec), [line for line in result.ignored if line.startswith("critic.model.use_liger")]


@pytest.mark.parametrize("actor", [False, True])
def test_critic_use_liger_is_named_and_the_actor_keeps_its_own(tmp_path: Path, actor: bool) -> None:
    spec, named = _read(tmp_path, "critic.model.use_liger=True", f"actor_rollout_ref.model.use_liger={actor}")
    assert spec.algorithm.value == "ppo"
    assert spec.liger_kernels is actor
    assert len(named) == 1 and "critic" in named[0] and "transformer_impl.py" in named[0]
    plain, _ = _read(tmp_path, f"actor_rollout_ref.model.use_liger={actor}")
    assert spec == plain  # the critic's key moves nothing the spec plans


def test_critic_use_liger_false_says_nothing(tmp_path: Path) -> None:
    _, named = _read(tmp_path, "critic.model.use_liger=False")
    assert named == []
