"""OpenRLHF adapter: classic (<= 0.10.1) and dotted (>= 0.10.2) flags, placement groups,
export in both styles checked against the flag tables of the wheels, round trip, bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomless.adapters import HardwareFlags, import_native
from oomless.adapters import _native as N
from oomless.adapters import common
from oomless.adapters.openrlhf.reader import CLASSIC, DOTTED, MARKERS, _parse_args
from oomless.adapters.openrlhf.keys import FLAGS
from oomless.errors import InputError
from tests.adapters.native_helpers import DATA, check_golden, imported, round_trip

DOTTED_SH, CLASSIC_SH = DATA / "openrlhf_dotted.sh", DATA / "openrlhf_classic.sh"
HW = {"gpu": "A100-80GB"}


def test_both_flag_styles_give_the_same_spec() -> None:
    spec = imported("openrlhf", DOTTED_SH, **HW)
    assert spec == imported("openrlhf", CLASSIC_SH, **HW)
    assert [(list(map(str, g.roles)), g.gpus_per_node) for g in spec.placement.groups] == [
        (["Role.actor", "Role.reference", "Role.vllm"], 8)]
    assert spec.placement.process_per_role and spec.placement.offload_idle_models
    ro = spec.rollout
    assert (ro.engine.value, ro.sleep_level, ro.tensor_parallel_size, ro.gpu_memory_utilization) == ("vllm_colocate", 1, 2, 0.5)
    assert (ro.engine_in_trainer_process, ro.engine_starts_first) == (False, True)
    assert (spec.lengths.max_prompt_tokens, spec.lengths.max_completion_tokens) == (1024, 2048)
    assert spec.algorithm.value == "grpo" and spec.kl_beta == 0.001


def _write(tmp_path: Path, flags: str, version: str = "") -> Path:
    path = tmp_path / "run.sh"
    path.write_text((f"# openrlhf=={version}\n" if version else "") + "python3 -m openrlhf.cli.train_ppo_ray " + flags + "\n")
    return path


def test_separate_layout_with_critic_and_reward(tmp_path: Path) -> None:
    path = _write(tmp_path, "--pretrain Qwen/Qwen2.5-1.5B-Instruct --reward_pretrain Qwen/Qwen2.5-0.5B-Instruct "
                  "--actor_num_gpus_per_node 2 --ref_num_gpus_per_node 2 --critic_num_gpus_per_node 2 "
                  "--reward_num_gpus_per_node 2 --colocate_actor_ref --colocate_critic_reward --vllm_num_engines 2 "
                  "--vllm_enable_sleep --max_len 1024")
    result = import_native("openrlhf", path, HardwareFlags(**HW))
    spec = imported("openrlhf", path, **HW)
    groups = [([r.value for r in g.roles], g.gpus_per_node) for g in spec.placement.groups]
    assert groups == [(["actor", "reference"], 2), (["critic", "reward"], 2), (["vllm"], 2)]
    assert spec.hardware.gpus_per_node == 6 and spec.algorithm.value == "ppo"  # gae: critic from the reward model
    assert spec.critic.model == "Qwen/Qwen2.5-0.5B-Instruct" and spec.rollout.engine.value == "vllm_separate"
    assert any("--vllm_enable_sleep" in line for line in result.ignored)  # off without colocate_all
    assert any("max_new_tokens is not set" in line for line in result.notes)


@pytest.mark.parametrize(("flags", "version", "field"), [
    ("--pretrain m --train.colocate_all --colocate_actor_ref", "", "--pretrain"),
    ("--pretrain m --vllm_num_engines two", "", "--vllm_num_engines"),
    ("--pretrain m --advantage_estimator grpo", "", "--advantage_estimator"),
    ("--pretrain m --colocate_all_models 1", "", "--colocate_all_models"),
    ("--actor.model_name_or_path m", "0.9.3", "--actor.model_name_or_path"),
    ("--pretrain m", "0.7.0", "run.sh:1"),
    ("--colocate_all_models", "", "--pretrain"),
])
def test_bad_input_names_the_flag(tmp_path: Path, flags: str, version: str, field: str) -> None:
    with pytest.raises(InputError) as err:
        imported("openrlhf", _write(tmp_path, flags, version), **HW)
    assert err.value.field.endswith(field)


def test_unknown_and_memoryless_flags_are_listed(tmp_path: Path) -> None:
    path = _write(tmp_path, "--pretrain Qwen/Qwen2.5-1.5B-Instruct --vllm_num_engines 8 --colocate_all_models "
                  "--no_such_flag 3 --save_path /x --ring_attn_size 2")
    ignored = import_native("openrlhf", path, HardwareFlags(**HW)).ignored
    assert "--no_such_flag=3: not a train_ppo_ray flag of openrlhf 0.10.1" in ignored
    assert "--save_path=/x: no effect on the planned memory" in ignored
    spec = imported("openrlhf", path, **HW)
    assert spec.distribution.sequence_parallel_size == 2  # ring attention splits each sequence over 2 GPUs


def test_classic_08_lengths(tmp_path: Path) -> None:
    spec = imported("openrlhf", _write(tmp_path, "--pretrain Qwen/Qwen2.5-1.5B-Instruct --prompt_max_len 256 "
                                       "--generate_max_len 768 --bf16 --vllm_num_engines 8 --colocate_all_models"), **HW)
    assert (spec.lengths.max_prompt_tokens, spec.lengths.max_completion_tokens) == (256, 768)
    assert spec.batch.micro_batch_size == 4  # 0.8.11 default micro_train_batch_size


def test_export_round_trips_in_both_styles_and_uses_only_real_flags(tmp_path: Path) -> None:
    spec = imported("openrlhf", DOTTED_SH, **HW)
    assert round_trip("openrlhf", spec, tmp_path, **HW) == [spec, spec]
    for name, version in (("train_ppo_ray.sh", DOTTED), ("train_ppo_ray_classic.sh", CLASSIC)):
        text = (tmp_path / name).read_text()
        args = common.command_with(common.parse_shell(text, name), MARKERS)[1]
        out = N.Collected()
        _parse_args(args, FLAGS[version], version, out)  # types, choices and arity of that version
        assert out.ignored == [], out.ignored
        check_golden(tmp_path / name, f"openrlhf/{name}")


def test_export_refuses_what_openrlhf_cannot_set(tmp_path: Path) -> None:
    from oomless.adapters import export_native
    from tests.adapters.native_helpers import seed_spec

    with pytest.raises(InputError) as err:  # S4's spec (ORZ) runs vLLM with max_num_batched_tokens 2048 and
        export_native("openrlhf", seed_spec("s4-before.yaml"), tmp_path, force=False)  # bf16 completion logits
    assert err.value.field in ("logits", "ray.enabled", "rollout.max_num_batched_tokens")
    assert "rollout.max_num_batched_tokens" in str(err.value)
