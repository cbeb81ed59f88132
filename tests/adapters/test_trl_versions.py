"""TRL 0.14 … 1.x read under the stated release (`# oomless: trl==X.Y`): defaults from the
generated key table, and the release's own batch rule, vLLM placement and log-prob path
(adapters/trl/versions.py cites the release files each comes from)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from oomless.adapters import HardwareFlags
from oomless.adapters import key_tables as KT
from oomless.adapters.trl.reader import import_path
from oomless.errors import InputError
from oomless.spec.load import parse_spec

MODEL = "model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct\nbf16: true\n"


def from_yaml(text: str, **hw: Any) -> tuple[Any, list[str], list[str]]:
    spec, ignored, notes = import_path(Path("c.yaml"), HardwareFlags(gpu="H100-80GB", **hw), {"c.yaml": text})
    return parse_spec(spec), ignored, notes


def table_default(key: str, release: str) -> Any:
    return KT.load("trl").default(key, release)


@pytest.mark.parametrize(("directive", "release"), [("0.18", "0.18.2"), ("0.19", "0.19.1"), ("0.23", "0.23.1"),
                                                     ("1.16", "1.16.0")])
def test_defaults_follow_the_key_table_of_the_stated_release(directive: str, release: str) -> None:
    run, _, _ = from_yaml(f"# oomless: trl=={directive}\n" + MODEL + "use_vllm: true\nvllm_mode: colocate\nnum_processes: 2\n")
    assert run.kl_beta == table_default("beta", release)
    assert run.lengths.max_completion_tokens == table_default("max_completion_length", release)
    assert run.rollout.gpu_memory_utilization == table_default("vllm_gpu_memory_utilization", release)
    assert run.batch.micro_batch_size == 8  # TrainingArguments' default: GRPOConfig overrides it only in 0.14


def test_an_older_release_reads_differently_from_the_latest() -> None:
    old, _, notes = from_yaml("# oomless: trl==0.18\n" + MODEL + "use_vllm: true\nvllm_mode: colocate\nnum_processes: 2\n")
    new, _, _ = from_yaml("# oomless: trl==1.16\n" + MODEL + "use_vllm: true\nvllm_mode: colocate\nnum_processes: 2\n")
    assert (old.kl_beta, new.kl_beta) == (0.04, 0.0)  # beta default 0.04 until 0.19 (grpo_config.py)
    assert old.lengths.max_prompt_tokens == 512 and any("truncates prompts to its default 512" in n for n in notes)
    assert old.rollout.max_model_len == 512 + old.lengths.max_completion_tokens  # 0.18 colocate max_model_len
    assert old.rollout.max_num_batched_tokens is None and new.rollout.max_num_batched_tokens == 4096
    assert (old.logits.value, new.logits.value) == ("full_bf16", "chunked_head")
    assert old.gradient_checkpointing is False and new.gradient_checkpointing is True


@pytest.mark.parametrize(("directive", "logits"), [("0.16", "full_bf16"), ("1.14", "full_bf16"), ("1.15", "chunked_head")])
def test_the_tiled_lm_head_starts_with_1_15(directive: str, logits: str) -> None:
    assert from_yaml(f"# oomless: trl=={directive}\n" + MODEL)[0].logits.value == logits


BATCH = MODEL + "num_processes: 4\nper_device_train_batch_size: 2\ngradient_accumulation_steps: 3\nnum_generations: 3\n"


def test_the_generation_batch_rule_is_the_releases() -> None:
    # 0.15-0.16: 2 × 4 = 8 is not a multiple of 3; 0.17 counts accumulation: 2 × 4 × 3 = 24 is.
    with pytest.raises(InputError, match=r"^num_generations: 3 does not divide the generation batch of 8 completions .*TRL 0.16"):
        from_yaml("# oomless: trl==0.16\n" + BATCH)
    assert from_yaml("# oomless: trl==0.17\n" + BATCH)[0].batch.num_generations == 3
    assert from_yaml("# oomless: trl==1.16\n" + BATCH)[0].batch.num_generations == 3


def test_trl_0_14_counts_prompts_per_device() -> None:
    run = from_yaml("# oomless: trl==0.14\n" + BATCH)[0]
    assert run.batch.micro_batch_size == 2 * 3  # each prompt's 3 completions in one batch; no divisibility check
    default = from_yaml("# oomless: trl==0.14\n" + MODEL + "num_processes: 1\n")[0]
    assert (default.batch.micro_batch_size, default.batch.gradient_accumulation_steps) == (
        table_default("per_device_train_batch_size", "0.14.0") * 8, table_default("gradient_accumulation_steps", "0.14.0"))


def test_vllm_placement_by_release() -> None:
    vllm = MODEL + "use_vllm: true\nnum_processes: 7\n"
    engine = from_yaml("# oomless: trl==0.14\n" + vllm)[0]  # vllm_device "auto": the GPU after the processes
    assert (engine.rollout.engine.value, engine.hardware.gpus_per_node, engine.rollout.gpu_memory_utilization) == (
        "vllm_separate", 8, table_default("vllm_gpu_memory_utilization", "0.14.0"))
    server, ignored, _ = from_yaml("# oomless: trl==0.16\n" + vllm + "vllm_device: cuda:7\n", gpus_per_node=8)
    assert (server.rollout.engine.value, server.rollout.num_gpus) == ("vllm_separate", 1)
    assert any(line.startswith("vllm_device: deprecated and unused in TRL 0.16") for line in ignored)
    with pytest.raises(InputError, match="^--gpus-per-node: vllm_mode server"):  # 0.18-0.29 default server
        from_yaml("# oomless: trl==0.20\n" + vllm)
    assert from_yaml("# oomless: trl==1.0\n" + vllm)[0].rollout.engine.value == "vllm_colocate"


def test_unset_bf16_before_0_19_is_fp32_unless_accelerate_says_bf16() -> None:
    bare = "model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct\nnum_processes: 2\n"
    with pytest.raises(InputError, match="^bf16: unset: TRL 0.18 then trains in fp32"):
        from_yaml("# oomless: trl==0.18\n" + bare)
    assert from_yaml("# oomless: trl==0.18\n" + bare.replace("num_processes: 2\n", "accelerate_config: zero2\n")
                     )[0].precision.value == "bf16_mixed"
    assert from_yaml("# oomless: trl==0.19\n" + bare)[0].precision.value == "bf16_mixed"


def test_keys_of_older_releases_without_a_directive_keep_their_note() -> None:
    run, _, notes = from_yaml(MODEL + "max_prompt_length: 1024\n")
    assert run.lengths.max_prompt_tokens == 1024 and any(n.startswith("`max_prompt_length`: TRL ≤ 0.27") for n in notes)


def test_an_open_r1_era_config_plans_under_its_release_and_the_latest_refusal_says_how() -> None:
    # per_device_train_batch_size 16 on 7 processes (the 8th GPU is vllm_device "auto"): 0.15 checks 16 × 7.
    config = (MODEL + "use_vllm: true\nper_device_train_batch_size: 16\ngradient_accumulation_steps: 8\n"
              "num_generations: 7\n")
    run, _, notes = from_yaml("# oomless: trl==0.15\n" + config, gpus_per_node=8)
    assert (run.hardware.gpus_per_node, run.rollout.engine.value, run.rollout.num_gpus) == (8, "vllm_separate", 1)
    assert any("7 process(es) per node" in n for n in notes)
    with pytest.raises(InputError, match=r"rejects this; for an earlier TRL add `# oomless: trl==X.Y`\)$"):
        from_yaml(config, gpus_per_node=8)
