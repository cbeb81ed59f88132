"""ms-swift facts read per release from its own sources (cited in adapters/swift/keys.py and
reader.py): GRPO's --max_length bounds the prompt, images only where the script names them,
num_generations 1 with a teacher (4.5+), the generation-batch rule before 3.5, and the
colocated engine's max_num_seqs."""

from __future__ import annotations

import pytest

from oomless.adapters import key_tables as KT
from oomless.adapters.swift.writer import native_settings
from oomless.catalog.resolve import load_model
from oomless.errors import InputError
from oomless.memory import vision as VZ
from tests.adapters.swift_cases import imported, imported_spec, script

TEXT = {"model": "Qwen/Qwen2.5-1.5B-Instruct", "num_generations": 4}
VL = "Qwen/Qwen2.5-VL-3B-Instruct"


def test_max_length_bounds_the_prompt_and_the_completion_comes_beside_it() -> None:
    run = imported_spec(script({**TEXT, "max_length": 2048, "max_completion_length": 8192}, {"NPROC_PER_NODE": 4}))
    assert (run.lengths.max_prompt_tokens, run.lengths.max_completion_tokens) == (2048, 8192)
    longer = imported_spec(script({**TEXT, "max_length": 4096, "max_completion_length": 8192}, {"NPROC_PER_NODE": 4}))
    assert longer.lengths.max_prompt_tokens - run.lengths.max_prompt_tokens == 4096 - 2048


def test_images_only_where_the_script_names_them() -> None:
    flags = {**TEXT, "model": VL, "max_length": 4096}
    text_only, _, notes = imported(script(flags, {"NPROC_PER_NODE": 4}))
    assert text_only["vision"]["images_per_prompt"] == 0 and text_only["lengths"]["max_prompt_tokens"] == 4096
    assert any("planned text-only" in n for n in notes)
    pixels = 602112
    images = VZ.max_image_tokens(load_model(VL).vision, max_pixels=pixels)
    with_images, _, _ = imported(script(flags, {"NPROC_PER_NODE": 4, "MAX_PIXELS": pixels}))
    assert "images_per_prompt" not in with_images["vision"] and with_images["lengths"]["max_prompt_tokens"] == 4096 - images
    limited, _, _ = imported(script({**flags, "max_length": 20000, "use_vllm": "true", "vllm_mode": "colocate",
                                     "vllm_limit_mm_per_prompt": '{"image": 2}'}, {"NPROC_PER_NODE": 4}))
    assert "images_per_prompt" not in limited["vision"]


@pytest.mark.parametrize(("version", "teacher", "allowed"), [("4.6", True, True), ("4.6", False, False),
                                                               ("4.3", True, False)])
def test_one_generation_needs_a_teacher_and_ms_swift_4_5(version: str, teacher: bool, allowed: bool) -> None:
    flags = {**TEXT, "num_generations": 1, **({"teacher_model": "Qwen/Qwen2.5-7B-Instruct"} if teacher else {})}
    text = script(flags, {"NPROC_PER_NODE": 2}, version)
    if allowed:
        spec, ignored, _ = imported(text)
        assert spec["batch"]["num_generations"] == 1
        assert any(line.startswith("--teacher_model: affects memory, not modelled: the OPD-RL teacher") for line in ignored)
    else:
        with pytest.raises(InputError, match=r"^--num_generations: 1: GRPO needs at least 2"):
            imported(text)


@pytest.mark.parametrize(("version", "divides"), [("3.3", False), ("3.4", True), ("3.5", True)])
def test_generation_batch_rule_before_3_5(version: str, divides: bool) -> None:
    # 2 per device × 2 processes = 4; × 3 accumulation = 12: num_generations 3 divides only the latter.
    text = script({**TEXT, "per_device_train_batch_size": 2, "gradient_accumulation_steps": 3, "num_generations": 3},
                  {"NPROC_PER_NODE": 2}, version)
    if divides:
        assert imported_spec(text).batch.num_generations == 3
    else:
        with pytest.raises(InputError, match=r"^--num_generations: 3 does not divide the 4 completions of "
                                             r"per_device_train_batch_size × processes \(ms-swift 3.3"):
            imported_spec(text)


@pytest.mark.parametrize(("version", "flag_read"), [("3.5", False), ("3.10", False), ("3.11", True), ("4.6", True)])
def test_colocated_engine_max_num_seqs(version: str, flag_read: bool) -> None:
    flags = {**TEXT, "use_vllm": "true", "vllm_mode": "colocate", "per_device_train_batch_size": 2,
             "gradient_accumulation_steps": 3, "vllm_max_num_seqs": 64}
    spec, ignored, _ = imported(script(flags, {"NPROC_PER_NODE": 2}, version))
    assert spec["rollout"]["max_num_seqs"] == (64 if flag_read else 2 * 1 * 3)
    assert any(line.startswith("--vllm_max_num_seqs: no effect") for line in ignored) is not flag_read


@pytest.mark.parametrize("dialect", [(3, 5), (3, 6), (3, 7), (4, 6)])
def test_export_writes_vllm_max_num_seqs_only_where_the_release_has_it(dialect: tuple[int, int]) -> None:
    spec = imported_spec(script({**TEXT, "use_vllm": "true", "vllm_mode": "colocate", "max_length": 1024},
                                {"NPROC_PER_NODE": 4}))
    written = native_settings(spec, dialect)
    assert ("vllm_max_num_seqs" in written) is KT.load("swift").exists_in("vllm_max_num_seqs", dialect)
    assert dialect != (3, 6) or "vllm_max_num_seqs" not in written  # 3.5 deprecated it, 3.6 removed it, 3.7 restored it


@pytest.mark.parametrize("version", ["3.6", "4.6"])
def test_swift_rollout_server_defaults_to_256_sequences(version: str) -> None:
    # RolloutArguments inherit VllmArguments' max_num_seqs 256 (3.x infer_args.py; 4.x args_mixin.py)
    text = script({**TEXT, "use_vllm": "true", "vllm_mode": "server", "vllm_server_host": "127.0.0.1"},
                  {"NPROC_PER_NODE": 4}, version,
                  pre="CUDA_VISIBLE_DEVICES=4 swift rollout --model Qwen/Qwen2.5-1.5B-Instruct &")
    assert imported_spec(text).rollout.max_num_seqs == 256


def test_a_server_host_makes_the_engine_external_in_3_4(tmp_path) -> None:
    """ms-swift 3.4 has no --vllm_mode; `is_external_vllm = use_vllm and vllm_server_host is not
    None` (v3.4.0 grpo_trainer.py L232): the trainer's GPUs hold no engine."""
    from oomless.adapters import HardwareFlags, import_native

    script = tmp_path / "run.sh"
    script.write_text("# oomless: ms-swift==3.4\nNPROC_PER_NODE=8 swift rlhf --rlhf_type grpo --model Qwen/Qwen2.5-7B-Instruct "
                      "--use_vllm true --vllm_server_host 10.0.0.1 --vllm_server_port 8000 --train_type full "
                      "--deepspeed zero3 --per_device_train_batch_size 1 --num_generations 8\n")
    result = import_native("swift", script, HardwareFlags(gpu="A100-80GB"))
    assert result.spec["rollout"]["engine"] == "vllm_separate"
    assert any("--vllm_server_host with ms-swift 3.4" in note for note in result.notes)
