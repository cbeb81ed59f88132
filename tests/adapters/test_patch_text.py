"""The text patchers: only the changed keys' bytes move; comments, layout and other words stay."""

from __future__ import annotations

import ast

from oomless.adapters.patch.python_text import patch_python
from oomless.adapters.patch.shell_text import patch_shell
from oomless.adapters.patch.yaml_text import patch_yaml

SCRIPT = """#!/bin/bash
# keep this comment
export X=1
swift rlhf \\
    --model Qwen/Qwen2-7B \\
    --vllm_gpu_memory_utilization 0.8 \\
    --reward_funcs accuracy format \\
    --use_liger_kernel=false \\
    --output_dir out   # trailing comment
echo done
"""


def _unchanged_lines(before: str, after: str, changed: set[str]) -> None:
    kept = [line for line in before.splitlines() if not any(word in line for word in changed)]
    for line in kept:
        assert line in after.splitlines(), line


def test_flags_edited_in_place_and_appended_on_a_continued_line() -> None:
    keys = ["vllm_gpu_memory_utilization", "use_liger_kernel", "reward_funcs", "sleep_level"]
    out = patch_shell(SCRIPT, {"vllm_gpu_memory_utilization": 0.4, "use_liger_kernel": True, "sleep_level": 2,
                               "reward_funcs": ["accuracy"]}, "flags", "run.sh", keys)
    assert "--vllm_gpu_memory_utilization 0.4 \\" in out
    assert "--use_liger_kernel=true \\" in out
    assert "--reward_funcs accuracy \\" in out
    assert "--output_dir out \\\n    --sleep_level 2   # trailing comment" in out
    _unchanged_lines(SCRIPT, out, {"vllm_gpu", "liger", "reward_funcs", "output_dir"})


def test_removed_flag_takes_its_value_and_continuation_with_it() -> None:
    out = patch_shell(SCRIPT, {"vllm_gpu_memory_utilization": None}, "flags", "run.sh", ["vllm_gpu_memory_utilization"])
    assert "vllm_gpu_memory_utilization" not in out and "0.8" not in out
    assert out.replace(" \\\n    --reward_funcs", "") != out  # the next flag keeps its own line
    assert out.count("\\\n") == SCRIPT.count("\\\n") - 1


def test_switches_are_present_or_absent() -> None:
    text = "python3 -m openrlhf.cli.train_ppo_ray --train.colocate_all --vllm.num_engines 2\n"
    out = patch_shell(text, {"--train.colocate_all": False, "--ds.enable_sleep": True}, "switch_flags", "r.sh",
                      ["--train.colocate_all", "--vllm.num_engines"])
    assert out == "python3 -m openrlhf.cli.train_ppo_ray --vllm.num_engines 2 --ds.enable_sleep\n"


def test_hydra_overrides_edited_or_appended_before_trailing_args() -> None:
    text = ("python3 -m verl.trainer.main_ppo \\\n    actor_rollout_ref.rollout.gpu_memory_utilization=0.6 \\\n"
            "    +actor_rollout_ref.model.use_fused_kernels=False \\\n    \"$@\"\n")
    keys = ["actor_rollout_ref.rollout.gpu_memory_utilization", "actor_rollout_ref.model.use_fused_kernels"]
    out = patch_shell(text, {keys[0]: 0.4, keys[1]: True, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": 2},
                      "hydra", "run.sh", keys)
    assert "    actor_rollout_ref.rollout.gpu_memory_utilization=0.4 \\\n" in out
    assert "    +actor_rollout_ref.model.use_fused_kernels=True \\\n" in out  # the script's spelling kept
    assert out.endswith("    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2 \\\n    \"$@\"\n")


def test_append_before_a_trailing_args_word_on_the_same_line() -> None:
    text = "python3 -m verl.trainer.main_ppo \\\n    a.b=1 \\\n    c.d=2 $@\n"
    out = patch_shell(text, {"e.f": 3}, "hydra", "run.sh", ["a.b", "c.d"])
    assert out == "python3 -m verl.trainer.main_ppo \\\n    a.b=1 \\\n    c.d=2 \\\n    e.f=3 $@\n"


def test_the_training_command_is_the_one_setting_most_keys() -> None:
    text = "trl vllm-serve --model m --gpu_memory_utilization 0.9\ntrl grpo --config c.yaml --gpu_memory_utilization 0.5 --lora_r 8\n"
    out = patch_shell(text, {"lora_r": 4}, "flags", "r.sh", ["gpu_memory_utilization", "lora_r"])
    assert out.splitlines()[0] == text.splitlines()[0] and "--lora_r 4" in out.splitlines()[1]


def test_yaml_round_trip_keeps_comments_and_order() -> None:
    text = "# top comment\nmodel_name_or_path: Qwen/Qwen2.5-7B  # the model\nvllm_gpu_memory_utilization: 0.3\nbeta: 0.0\n"
    out = patch_yaml(text, {"vllm_gpu_memory_utilization": 0.4, "use_liger_kernel": True, "beta": None}, "c.yaml")
    assert out == ("# top comment\nmodel_name_or_path: Qwen/Qwen2.5-7B  # the model\nvllm_gpu_memory_utilization: 0.4\n"
                   "use_liger_kernel: true\n")


def test_yaml_nested_keys_created() -> None:
    out = patch_yaml("worker:\n  rollout:\n    n: 5  # samples\n", {"worker.rollout.gpu_memory_utilization": 0.5,
                                                                  "worker.actor.fsdp.enable_cpu_offload": True}, "e.yaml")
    assert "n: 5  # samples" in out and "gpu_memory_utilization: 0.5" in out and "enable_cpu_offload: true" in out


PY = '''import os
TOTAL = 8


@dataclass
class PPOExpConfig(BasePPOExpConfig):
    zero_stage: int = 3  # ZeRO
    vllm_num_engines: int = TOTAL // 2
    gpu_memory_utilization: float = 0.5


if __name__ == "__main__":
    run()
'''


def test_python_literals_replaced_at_their_spans_only() -> None:
    out = patch_python(PY, {"zero_stage": 2, "vllm_num_engines": 4, "adam_offload": True}, "exp.py")
    assert "    zero_stage: int = 2  # ZeRO\n" in out and "    vllm_num_engines: int = 4\n" in out
    assert "    gpu_memory_utilization: float = 0.5\n    adam_offload: bool = True\n" in out
    assert out.replace("= 2  #", "= 3  #").replace("= 4\n", "= TOTAL // 2\n").replace("    adam_offload: bool = True\n", "") == PY
    ast.parse(out)
