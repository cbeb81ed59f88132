"""EasyR1 adapter: the native S2 configs are the seed specs; export, round trip, bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomless.adapters import HardwareFlags, import_native
from oomless.adapters import easyr1 as E
from oomless.errors import InputError
from tests.adapters.native_helpers import NATIVE, check_golden, imported, round_trip, seed_spec

HW = {"gpu": "A100-40GB", "host_ram_gib": 760}


@pytest.mark.parametrize("case", ["before", "after"])
def test_native_s2_is_the_seed_spec(case: str) -> None:
    assert imported("easyr1", NATIVE / f"s2-{case}.yaml", **HW) == seed_spec(f"s2-{case}.yaml")


def test_defaults_and_reported_keys(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("worker:\n  actor:\n    model: {model_path: Qwen/Qwen2.5-7B-Instruct}\n    ulysses_size: 2\n"
                    "    optim: {strategy: adamw_bf16}\n  ref:\n    fsdp: {enable_cpu_offload: true}\n  rollout: {limit_images: 2}\n"
                    "algorithm: {disable_kl: true}\nfoo: 1\n")
    result = import_native("easyr1", path, HardwareFlags(gpu="A100-80GB"))
    spec = result.spec
    # EasyR1 dataclass defaults: micro 4 / 16, TP 2 at 0.6, prompt/response 512, sleep level 1.
    # The round (adapters/schedule.py): Ulysses 2 leaves 4 data-parallel ranks; 512 prompts a round
    # and 256 an optimizer step, n 1, micro 4: 512 / 4 / 4 = 32 micro-batches a round, 256 / 4 / 4 = 16 a step.
    # dynamic_batching (default true from 0.3.2): budgets of 4 and 16 rows of 512 + 512 tokens for
    # the Ulysses group of 2 (padding-free rows are split over it): 2,048 and 8,192 a GPU.
    assert spec["batch"] == {"micro_batch_size": 4, "logprob_micro_batch_size": 16, "num_generations": 1, "padding_free": True,
                             "max_tokens_per_gpu": 2048, "logprob_max_tokens_per_gpu": 8192,
                             "gradient_accumulation_steps": 16, "steps_per_generation": 32}
    assert spec["distribution"]["sequence_parallel_size"] == 2
    assert spec["rollout"]["tensor_parallel_size"] == 2 and spec["rollout"]["sleep_level"] == 1
    assert spec["rollout"]["limit_images_per_prompt"] == 2 and spec["kl_beta"] == 0.0
    joined = "\n".join(result.ignored)
    for key in ("foo=1: not understood", "worker.actor.optim.strategy=adamw_bf16", "worker.ref.fsdp.enable_cpu_offload=true"):
        assert key in joined
    assert "ulysses_size" not in joined  # planned: distribution.sequence_parallel_size


def test_launch_script_with_config_and_overrides(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text((NATIVE / "s2-before.yaml").read_text())
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main config=config.yaml worker.rollout.gpu_memory_utilization=0.5 "
                      "worker.actor.offload.offload_params=false\n")
    spec = imported("easyr1", script, **HW)
    assert spec.rollout.gpu_memory_utilization == 0.5 and not spec.rollout.offload_model


MODEL = "worker:\n  actor:\n    model: {model_path: Qwen/Qwen2.5-7B-Instruct}\n"


@pytest.mark.parametrize(("text", "field"), [
    ("worker: [1, 2\n", "c.yaml:2"),
    (MODEL + "  rollout: {tensor_parallel_size: two}\n", "worker.rollout.tensor_parallel_size"),
    (MODEL + "    fsdp: {enable_full_shard: false, enable_cpu_offload: true}\n", "worker.actor.fsdp.enable_cpu_offload"),
    ("# easyr1==0.1.0\n" + MODEL, "c.yaml:1"),
    ("worker: {}\n", "worker.actor.model.model_path"),
])
def test_bad_input_names_the_key(tmp_path: Path, text: str, field: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        imported("easyr1", path, gpu="A100-80GB")
    assert err.value.field.endswith(field)


@pytest.mark.parametrize("case", ["before", "after"])
def test_export_round_trips(tmp_path: Path, case: str) -> None:
    spec = imported("easyr1", NATIVE / f"s2-{case}.yaml", **HW)
    assert round_trip("easyr1", spec, tmp_path, **HW) == [spec]
    if case == "before":
        check_golden(tmp_path / "easyr1_config.yaml", "easyr1/easyr1_config.yaml")


def test_export_refuses_a_layout_easyr1_cannot_run(tmp_path: Path) -> None:
    data = seed_spec("s2-before.yaml").model_dump(mode="json")
    data["rollout"]["sleep_level"] = 0
    with pytest.raises(InputError) as err:
        E.export_spec(type(seed_spec("s2-before.yaml")).model_validate(data), tmp_path, force=False)
    assert err.value.field == "rollout.sleep_level"


@pytest.mark.parametrize("case", ["before", "after"])
def test_yaml_seed_spec_round_trips(tmp_path: Path, case: str) -> None:
    seed = seed_spec(f"s2-{case}.yaml")
    assert round_trip("easyr1", seed, tmp_path, **HW) == [seed]


def test_round_and_schedule_from_easyr1_counts(tmp_path: Path) -> None:
    """trainer.max_steps and save_freq count rounds; the spec counts optimizer steps."""
    path = tmp_path / "c.yaml"
    path.write_text("data: {rollout_batch_size: 64}\nworker:\n  actor:\n    model: {model_path: Qwen/Qwen2.5-7B-Instruct}\n"
                    "    global_batch_size: 16\n    micro_batch_size_per_device_for_update: 2\n  rollout: {n: 8}\n"
                    "trainer: {max_steps: 10, save_freq: 3, save_model_only: true, n_gpus_per_node: 4}\n")
    spec = import_native("easyr1", path, HardwareFlags(gpu="A100-80GB")).spec
    # 64 x 8 / 4 GPUs = 128 sequences a round per GPU, 16 x 8 / 4 = 32 a step: 4 steps a round.
    assert spec["batch"]["steps_per_generation"] == 64 and spec["batch"]["gradient_accumulation_steps"] == 16
    assert spec["schedule"] == {"max_steps": 40, "save_steps": 12, "save_only_model": True}
    assert spec["rollout"]["samples_per_request"] == 8


def test_round_that_does_not_divide_is_noted(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("data: {rollout_batch_size: 6}\nworker:\n  actor:\n    model: {model_path: Qwen/Qwen2.5-7B-Instruct}\n"
                    "    global_batch_size: 6\n  rollout: {n: 1}\n")
    result = import_native("easyr1", path, HardwareFlags(gpu="A100-80GB"))
    assert "steps_per_generation" not in result.spec["batch"]
    assert any("do not divide" in note for note in result.notes)


BASE = ("data: {rollout_batch_size: 64}\nworker:\n  actor:\n    model: {model_path: Qwen/Qwen2.5-7B-Instruct}\n"
        "    global_batch_size: 16\n    micro_batch_size_per_device_for_update: 2\n  rollout: {n: 8}\n")


@pytest.mark.parametrize("trainer, prompts, rounds", [
    ("trainer: {n_gpus_per_node: 4, total_episodes: 3}\n", 1000, 15 * 3),   # 1000 // 64 = 15 rounds an epoch
    ("trainer: {n_gpus_per_node: 4, total_epochs: 2}\n", 64, 2),
    ("trainer: {n_gpus_per_node: 4}\n", 130, 2 * 15),                         # EasyR1's default: 15 epochs
    ("trainer: {n_gpus_per_node: 4, total_epochs: 2, max_steps: 7}\n", 1000, 7),  # max_steps wins, as in EasyR1
])
def test_run_length_from_the_training_set_size(tmp_path: Path, trainer: str, prompts: int, rounds: int) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(f"# oomless: train_prompts={prompts}\n" + BASE + trainer)
    spec = import_native("easyr1", path, HardwareFlags(gpu="A100-80GB")).spec
    assert spec["schedule"]["max_steps"] == rounds * 4  # 4 optimizer steps a round (see above)


def test_vllm_version_directive_reaches_the_growth_terms(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("# oomless: vllm==0.7.3.post1\n" + BASE)
    assert import_native("easyr1", path, HardwareFlags(gpu="A100-80GB")).spec["rollout"]["vllm_version"] == "0.7.3"
    path.write_text(BASE)
    assert "vllm_version" not in import_native("easyr1", path, HardwareFlags(gpu="A100-80GB")).spec["rollout"]


@pytest.mark.parametrize("directive, field", [
    ("# oomless: vllm==seven\n", "vllm version"),
    ("# oomless: trl==1.0\n", "oomless directive trl"),
    ("# oomless: train_prompts=10\n", "oomless directive train_prompts"),  # fewer than one round of 64
    ("# oomless: train_prompts=-3\n", "train_prompts"),
])
def test_bad_directives_name_the_key(tmp_path: Path, directive: str, field: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(directive + BASE)
    with pytest.raises(InputError) as err:
        import_native("easyr1", path, HardwareFlags(gpu="A100-80GB"))
    assert err.value.field == field


def test_prompt_bound_counts_the_image_tokens(tmp_path: Path) -> None:
    """EasyR1's max_prompt_length bounds the processor's input_ids (images included)."""
    path = tmp_path / "c.yaml"
    path.write_text(BASE.replace("Qwen2.5-7B-Instruct", "Qwen2.5-VL-7B-Instruct"))
    assert import_native("easyr1", path, HardwareFlags(gpu="A100-80GB")).spec["lengths"]["max_prompt_counts_images"] is True



def test_directives_of_the_scripts_config_file_count_and_the_script_wins(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("# oomless: vllm==0.7.3 train_prompts=640\n" + BASE)
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main config=config.yaml trainer.n_gpus_per_node=4\n")
    spec = import_native("easyr1", script, HardwareFlags(gpu="A100-80GB")).spec
    assert spec["rollout"]["vllm_version"] == "0.7.3" and spec["schedule"]["max_steps"] == 640 // 64 * 15 * 4
    script.write_text("# oomless: vllm==0.8.5\npython3 -m verl.trainer.main config=config.yaml trainer.n_gpus_per_node=4\n")
    assert import_native("easyr1", script, HardwareFlags(gpu="A100-80GB")).spec["rollout"]["vllm_version"] == "0.8.5"
    (tmp_path / "config.yaml").write_text("# oomless: vllm==x\n" + BASE)
    script.write_text("python3 -m verl.trainer.main config=config.yaml trainer.n_gpus_per_node=4\n")
    with pytest.raises(InputError) as err:
        import_native("easyr1", script, HardwareFlags(gpu="A100-80GB"))
    assert err.value.field == "vllm version"


@pytest.mark.parametrize(("padding_free", "mode"), [("true", "bf16_flash_ce"), ("false", "full_bf16")])
def test_padding_free_picks_the_logits_path(tmp_path: Path, padding_free: str, mode: str) -> None:
    """dp_actor.py: padding-free runs every real token's logits through flash-attn's cross-entropy
    in place (verl/utils/torch_functional.py `log_probs_from_logits_flash_attn`)."""
    text = (NATIVE / "s2-before.yaml").read_text().replace("padding_free: true", f"padding_free: {padding_free}")
    path = tmp_path / "config.yaml"
    path.write_text(text)
    assert imported("easyr1", path, **HW).logits.value == mode


def test_lora_adapters_go_to_vllm_unmerged(tmp_path: Path) -> None:
    """sharding_manager/fsdp_vllm.py `_collect_lora_weights`: per layer, unmerged (TensorLoRARequest)."""
    import yaml

    from tests.helpers import component, plan_of

    config = yaml.safe_load((NATIVE / "s2-before.yaml").read_text())
    config["worker"]["actor"]["model"]["lora"] = {"rank": 16, "alpha": 32, "target_modules": "all-linear"}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    spec = imported("easyr1", path, **HW)
    assert (spec.finetune.method.value, spec.rollout.lora_sync.value) == ("lora", "adapter_layers")
    assert component(plan_of(spec.model_dump(mode="json")), "weight_sync", "sync.lora_merge_delta") == 0


BUDGETED = MODEL + "    micro_batch_size_per_device_for_update: 2\n    micro_batch_size_per_device_for_experience: 8\n"


@pytest.mark.parametrize(("head", "extra", "budgets"), [
    ("", "", (2 * 3072, 8 * 3072)),  # main's default: on
    ("# easyr1==0.3.2\n", "", (2 * 3072, 8 * 3072)),
    ("", "    dynamic_batching: false\n", (None, None)),
    ("# easyr1==0.3.1\n", "", (None, None)),  # before PR #417: fixed micro-batches
])
def test_dynamic_batching_budgets_the_padded_rows(tmp_path: Path, head: str, extra: str, budgets: tuple) -> None:
    """dp_actor.py: budget = micro-batch size × input_ids.size(-1), the prompt padded to
    max_prompt_length and the response to max_response_length (2048 + 1024 here)."""
    path = tmp_path / "c.yaml"
    path.write_text(head + "data: {max_prompt_length: 2048, max_response_length: 1024}\n" + BUDGETED + extra)
    result = import_native("easyr1", path, HardwareFlags(gpu="A100-80GB"))
    batch = result.spec["batch"]
    assert (batch.get("max_tokens_per_gpu"), batch.get("logprob_max_tokens_per_gpu")) == budgets
    assert any("dynamic_batching" in note for note in result.notes) == (budgets[0] is not None)


def test_dynamic_batching_is_not_a_key_before_0_3_2(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("# easyr1==0.3.0\n" + MODEL + "    dynamic_batching: true\n")
    with pytest.raises(InputError) as err:
        imported("easyr1", path, gpu="A100-80GB")
    assert err.value.field == "worker.actor.dynamic_batching" and "0.3.2" in err.value.message


def test_budgeted_spec_round_trips_and_a_budget_easyr1_cannot_say_is_named(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("data: {max_prompt_length: 2048, max_response_length: 1024}\n" + BUDGETED)
    spec = imported("easyr1", path, gpu="A100-80GB")
    assert spec.batch.max_tokens_per_gpu == 6144
    assert round_trip("easyr1", spec, tmp_path / "out", gpu="A100-80GB") == [spec]
    odd = spec.model_copy(update={"batch": spec.batch.model_copy(update={"max_tokens_per_gpu": 5000})})
    with pytest.raises(InputError) as err:
        E.export_spec(odd, tmp_path / "odd", force=False)
    assert err.value.field == "batch.max_tokens_per_gpu" and "2 × 3072" in err.value.message


def _fit_written(tmp_path: Path, text: str, gpu: str, *flags: str) -> tuple[dict, object]:
    """`fit --from easyr1 --write` on ``text``: the written actor section and its read-back spec."""
    import yaml
    from typer.testing import CliRunner

    from oomless.cli.main import app

    source = tmp_path / "c.yaml"
    source.write_text(text)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["fit", "--from", "easyr1", str(source), "--gpu", gpu, *flags, "--write", str(out), "--top", "0"])
    assert result.exit_code == 0, result.output
    assert "reads it back: fits" in result.stdout
    return yaml.safe_load((out / "c.yaml").read_text())["worker"]["actor"], imported("easyr1", out / "c.yaml", gpu=gpu)


@pytest.mark.parametrize("ulysses", [1, 2])
def test_fit_cuts_the_budgets_in_easyr1s_micro_batch_keys(tmp_path: Path, ulysses: int) -> None:
    """A budget that does not fit is cut through the micro-batch sizes it is made of (the only
    keys EasyR1 has for it); the patched file reads back with budgets of the new sizes, the
    Ulysses group's budget halved a GPU at ulysses_size 2."""
    text = ("data: {max_prompt_length: 4096, max_response_length: 4096, rollout_batch_size: 128}\n"
            "worker:\n  actor:\n    global_batch_size: 64\n    micro_batch_size_per_device_for_update: 8\n"
            f"    micro_batch_size_per_device_for_experience: 32\n    ulysses_size: {ulysses}\n"
            "    model: {model_path: Qwen/Qwen2.5-7B-Instruct}\n  rollout: {n: 8}\ntrainer: {n_gpus_per_node: 8}\n")
    (tmp_path / "in").mkdir()
    before_path = tmp_path / "in" / "c.yaml"
    before_path.write_text(text)
    before = imported("easyr1", before_path, gpu="A100-80GB")
    actor, after = _fit_written(tmp_path, text, "A100-80GB")
    assert after.distribution.sequence_parallel_size == ulysses
    assert after.batch.logprob_max_tokens_per_gpu < before.batch.logprob_max_tokens_per_gpu
    assert after.batch.max_tokens_per_gpu == actor["micro_batch_size_per_device_for_update"] * 8192 // ulysses
    assert after.batch.logprob_max_tokens_per_gpu == actor["micro_batch_size_per_device_for_experience"] * 8192 // ulysses
    assert "dynamic_batching" not in actor  # still EasyR1's default, untouched


def test_fit_length_cut_keeps_easyr1s_budget_of_whole_rows(tmp_path: Path) -> None:
    """`--allow lengths` under dynamic batching: the budget follows the new padded length
    (fit/space.py `_with_budgets`), so the cut can be written in EasyR1's keys."""
    _, back = _fit_written(tmp_path, LENGTH_CASE, "A100-40GB", "--allow", "lengths")
    assert back.lengths.max_completion_tokens < 30720
    assert back.batch.max_tokens_per_gpu == back.lengths.max_prompt_tokens + back.lengths.max_completion_tokens


LENGTH_CASE = ("data: {max_prompt_length: 2048, max_response_length: 30720, rollout_batch_size: 64}\nworker:\n  actor:\n"
               "    global_batch_size: 32\n    micro_batch_size_per_device_for_update: 1\n"
               "    micro_batch_size_per_device_for_experience: 1\n    model: {model_path: Qwen/Qwen2.5-7B-Instruct}\n"
               "  rollout: {n: 8}\ntrainer: {n_gpus_per_node: 8}\n")


@pytest.mark.parametrize("padding_free", [True, False])
def test_ulysses_splits_padding_free_rows_only(tmp_path: Path, padding_free: bool) -> None:
    """dp_actor.py: ulysses_pad_and_slice_inputs on the packed row; the padded path runs whole
    rows on every GPU of the group (its share of data is the group's: fsdp_workers.py
    global_batch_size // (world // ulysses_size))."""
    path = tmp_path / "c.yaml"
    path.write_text("data: {max_prompt_length: 2048, max_response_length: 6144}\n" + BUDGETED
                    + f"    ulysses_size: 4\n    padding_free: {str(padding_free).lower()}\n")
    result = import_native("easyr1", path, HardwareFlags(gpu="A100-80GB"))
    spec = imported("easyr1", path, gpu="A100-80GB")
    assert spec.distribution.sequence_parallel_size == (4 if padding_free else 1)
    # the group's budget 2 × 8,192, a quarter a GPU when the rows are split
    assert spec.batch.max_tokens_per_gpu == (2 * 8192 // 4 if padding_free else 2 * 8192)
    assert any("ulysses_size=4" in line for line in result.ignored) == (not padding_free)
    assert round_trip("easyr1", spec, tmp_path / "out", gpu="A100-80GB") == [spec]


def test_ulysses_must_divide_the_gpus(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(MODEL + "    ulysses_size: 4\ntrainer: {n_gpus_per_node: 6}\n")
    with pytest.raises(InputError) as err:
        imported("easyr1", path, gpu="A100-80GB")
    assert err.value.field == "worker.actor.ulysses_size" and "6 GPUs" in err.value.message
