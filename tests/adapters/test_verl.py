"""verl adapter: Hydra YAML + dotted overrides, defaults of verl 0.9.1, export, round trip,
and (where verl installs) verl's own `validate_config` accepting the exported YAML."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from oomless.adapters import HardwareFlags, import_native
from oomless.adapters import verl as V
from oomless.errors import InputError
from tests.adapters.native_helpers import DATA, check_golden, imported, round_trip

SCRIPT = DATA / "verl_gsm8k.sh"


def test_launch_overrides_map_to_the_spec_over_verl_defaults() -> None:
    spec = imported("verl", SCRIPT, gpu="H100-80GB")
    assert spec.model == "Qwen/Qwen2.5-7B-Instruct"
    assert (spec.hardware.gpus_per_node, spec.hardware.num_nodes) == (8, 1)
    assert (spec.batch.micro_batch_size, spec.batch.logprob_micro_batch_size, spec.batch.num_generations) == (16, 32, 5)
    assert (spec.lengths.max_prompt_tokens, spec.lengths.max_completion_tokens) == (512, 1024)
    ro = spec.rollout
    assert (ro.gpu_memory_utilization, ro.tensor_parallel_size, ro.max_num_batched_tokens, ro.max_num_seqs) == (0.6, 2, 8192, 256)
    # verl 0.9.1: vLLM in its own worker processes, level-2 sleep for full weights when free_cache_engine.
    assert (ro.sleep_level, ro.engine_in_trainer_process) == (2, False)
    assert spec.kl_beta == 0.001 and spec.distribution.strategy.value == "fsdp"
    assert spec.attention.value == "flash_attention_2" and spec.ray.enabled


def test_unknown_and_memoryless_keys_are_listed() -> None:
    result = import_native("verl", SCRIPT, HardwareFlags(gpu="H100-80GB"))
    assert "actor_rollout_ref.actor.typo_key=3: not a verl 0.9.1 key" in result.ignored
    # data.train_batch_size is read now: the round (adapters/schedule.py), not a memoryless key.
    assert not any(line.startswith("data.train_batch_size=") for line in result.ignored)
    batch = result.spec["batch"]
    assert batch["steps_per_generation"] * batch["micro_batch_size"] * 8 == 1024 * batch["num_generations"]
    assert not any("gpu_memory_utilization" in line for line in result.ignored)


def test_yaml_config_with_overrides_in_a_script(tmp_path: Path) -> None:
    (tmp_path / "cfg.yaml").write_text("actor_rollout_ref:\n  model: {path: Qwen/Qwen2.5-1.5B-Instruct, lora_rank: 32}\n"
                                       "  actor: {ppo_micro_batch_size_per_gpu: 4}\n"
                                       "  rollout: {log_prob_micro_batch_size_per_gpu: 8, name: vllm}\n")
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo --config-path=. --config-name=cfg actor_rollout_ref.rollout.gpu_memory_utilization=0.3\n")
    spec = imported("verl", script, gpu="A100-80GB")
    assert spec.finetune.method.value == "lora" and spec.finetune.lora_rank == 32
    assert spec.rollout.gpu_memory_utilization == 0.3 and spec.rollout.sleep_level == 1  # LoRA sleeps at level 1


@pytest.mark.parametrize(("override", "field"), [
    ("actor_rollout_ref.actor.strategy=megatron", "actor_rollout_ref.actor.strategy"),
    ("actor_rollout_ref.rollout.gpu_memory_utilization=1.5", "actor_rollout_ref.rollout.gpu_memory_utilization"),
    ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=null", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"),
    ("trainer.n_gpus_per_node=eight", "trainer.n_gpus_per_node"),
])
def test_bad_values_name_the_key(tmp_path: Path, override: str, field: str) -> None:
    script = tmp_path / "run.sh"
    script.write_text(SCRIPT.read_text() .replace(" $@", f" {override}"))
    with pytest.raises(InputError) as err:
        imported("verl", script, gpu="H100-80GB")
    assert err.value.field == field


def test_unknown_version_and_missing_gpu(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text(SCRIPT.read_text().replace("verl==0.9.1", "verl==0.12.0"))
    with pytest.raises(InputError, match="unknown verl version"):
        imported("verl", script, gpu="H100-80GB")
    with pytest.raises(InputError, match="--gpu"):
        imported("verl", SCRIPT)


def test_export_round_trips_and_matches_golden(tmp_path: Path) -> None:
    spec = imported("verl", SCRIPT, gpu="H100-80GB")
    assert round_trip("verl", spec, tmp_path, gpu="H100-80GB") == [spec, spec]
    check_golden(tmp_path / "verl_ppo.yaml", "verl/verl_ppo.yaml")


def test_export_refuses_what_verl_cannot_express(tmp_path: Path) -> None:
    spec = imported("verl", SCRIPT, gpu="H100-80GB")
    for update, field in (({"strategy": "zero3"}, "distribution.strategy"),):
        bad = spec.model_copy(update={"distribution": spec.distribution.model_copy(update=update)})
        with pytest.raises(InputError) as err:
            V.export_spec(bad, tmp_path, force=False)
        assert err.value.field == field
    V.export_spec(spec, tmp_path, force=False)
    with pytest.raises(InputError, match="--force"):
        V.export_spec(spec, tmp_path, force=False)
    assert V.export_spec(spec, tmp_path, force=True)


VALIDATE = '''
import sys
from pathlib import Path
from hydra import compose, initialize_config_dir
from verl.trainer.main_ppo import need_critic, need_reference_policy
from verl.utils.config import omega_conf_to_dataclass, validate_config
path = Path(sys.argv[1])
with initialize_config_dir(config_dir=str(path.parent), version_base=None):
    cfg = compose(config_name=path.stem)
validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
'''


def _verl_python() -> str | None:
    """An interpreter with verl installed: OOMLESS_VERL_PYTHON, else this one."""
    python = os.environ.get("OOMLESS_VERL_PYTHON")
    if python:
        return python
    # verl's config composition needs hydra too (a bare `verl` folder on the path is not an install)
    installed = all(importlib.util.find_spec(name) is not None for name in ("verl", "hydra"))
    return sys.executable if installed else None


@pytest.mark.parametrize("source", ["script", "offload"])
def test_verl_accepts_the_exported_yaml(tmp_path: Path, source: str) -> None:
    python = _verl_python()
    if python is None:
        pytest.skip("verl is not installed (pip install --no-deps verl==0.9.1; see adapters/verl/reader.py)")
    spec = imported("verl", SCRIPT, gpu="H100-80GB")
    if source == "offload":  # (LoRA needs vLLM and a PPO critic the hub to validate: not here)
        data = spec.model_dump(mode="json")
        data["distribution"].update(offload_params=True, offload_optimizer=True)
        data["rollout"].update(offload_model=True, offload_optimizer=True)
        data.update(precision="bf16")
        spec = type(spec).model_validate(data)
    V.export_spec(spec, tmp_path, force=False)
    done = subprocess.run([python, "-c", VALIDATE, str(tmp_path / "verl_ppo.yaml")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
