"""`optimizer_implementation` (how torch's AdamW steps) read from each framework's own keys and
written back in them (adapters/optim_impl.py and each adapter's optim module): TRL and ms-swift
`optim` with transformers' default by release, verl `optim.override_optimizer_config`, EasyR1
`optim.strategy`, OpenRLHF's DeepSpeed FusedAdam. The field is stated only where it changes the
plan: foreach is what an unset field plans under DDP/FSDP, fused what it plans under ZeRO."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from oomless.adapters import HardwareFlags, import_native
from oomless.adapters.patch import plan_patch, read_back
from oomless.adapters.trl.reader import import_path
from oomless.cli.import_cmd import load_native
from oomless.errors import InputError
from oomless.spec.load import parse_spec
from tests.adapters.native_helpers import NATIVE
from tests.adapters.swift_cases import imported_spec, script
from tests.adapters.test_patch_keys import CORPUS, _changed

# --- TRL ---------------------------------------------------------------------------------------

GRPO_YAML = """model_name_or_path: Qwen/Qwen2.5-0.5B-Instruct
dataset_name: trl-lib/DeepMath-103K
reward_funcs: [accuracy_reward]
per_device_train_batch_size: 8
num_generations: 8
bf16: true
use_vllm: true
vllm_mode: colocate
"""
"""A `trl grpo --config` file as TRL's docs write one (1.16 key names), launched on 8 GPUs."""


def trl_read(directive: str = "", extra: str = "", accelerate: str = "multi_gpu", files: dict[str, str] | None = None) -> dict:
    text = directive + GRPO_YAML + extra + f"accelerate_config: {accelerate}\n"
    spec, _, _ = import_path(Path("grpo.yaml"), HardwareFlags(gpu="H100-80GB", gpus_per_node=8),
                             {"grpo.yaml": text, **(files or {})})
    return spec


@pytest.mark.parametrize(("directive", "extra", "accelerate", "expected"), [
    ("", "", "multi_gpu", "fused"),  # TRL 1.16 needs transformers >= 4.56.2: adamw_torch_fused by default
    ("# oomless: transformers==4.53.3\n", "", "multi_gpu", None),  # adamw_torch: foreach, what unset plans under DDP
    ("# oomless: transformers==4.54.0\n", "", "multi_gpu", "fused"),
    ("", "optim: adamw_torch\n", "multi_gpu", None),
    ("# oomless: transformers==4.53.3\n", "optim: adamw_torch_fused\n", "multi_gpu", "fused"),
    ("# oomless: trl==0.20\n", "", "multi_gpu", None),  # TRL 0.20 admits transformers 4.53.2: foreach
    ("# oomless: trl==0.21\n", "", "multi_gpu", "fused"),  # TRL 0.21 requires transformers >= 4.55.0
    ("", "", "fsdp2", "fused"),
    ("", "", "zero2", None),  # the Trainer's fused AdamW under ZeRO: no temporaries, as unset plans
    ("", "optim: adamw_torch\n", "zero3", "foreach"),  # the Trainer's foreach AdamW stepped by DeepSpeed
    ("# oomless: trl==0.20\n", "", "zero2", "foreach"),
    ("", "optim: adamw_bnb_8bit\n", "multi_gpu", None),  # not torch's AdamW
])
def test_trl_reads_optim_and_the_releases_default(directive: str, extra: str, accelerate: str, expected: str | None) -> None:
    assert trl_read(directive, extra, accelerate).get("optimizer_implementation") == expected


def test_an_assumed_default_is_noted_and_a_stated_release_is_not() -> None:
    hardware = HardwareFlags(gpu="H100-80GB", gpus_per_node=8)
    for directive, noted in (("", True), ("# oomless: transformers==4.57.1\n", False)):
        _, _, notes = import_path(Path("grpo.yaml"), hardware,
                                  {"grpo.yaml": directive + GRPO_YAML + "accelerate_config: multi_gpu\n"})
        assert any(n.startswith("optim unset: adamw_torch_fused (fused AdamW)") for n in notes) == noted, notes
    from tests.adapters.swift_cases import imported

    _, _, notes = imported(script(SWIFT_FLAGS, {"NPROC_PER_NODE": 8}, version="4.6"), gpus_per_node=8)
    assert any(n.startswith("--optim unset: adamw_torch_fused (fused AdamW)") and "ms-swift 4.6" in n for n in notes)


@pytest.mark.parametrize(("flags", "expected"), [("", "fused"), ("--optim adamw_torch ", None),
                                                ("--optim adamw_torch_fused ", "fused")])
def test_trl_launch_flags_say_it_too(flags: str, expected: str | None) -> None:
    """An `accelerate launch` of TRL's examples/scripts/grpo_vlm.py, as its docstring runs it."""
    text = ("accelerate launch --num_processes 8 examples/scripts/grpo_vlm.py --model_name_or_path "
            f"Qwen/Qwen2.5-VL-3B-Instruct --output_dir out {flags}--use_vllm --vllm_mode colocate\n")
    spec, _, _ = import_path(Path("launch.sh"), HardwareFlags(gpu="H100-80GB"), {"launch.sh": text})
    assert spec["distribution"]["strategy"] == "ddp" and spec.get("optimizer_implementation") == expected


def test_trl_deepspeed_config_with_its_own_optimizer_leaves_it_unset() -> None:
    ds = '{"zero_optimization": {"stage": 2}, "optimizer": {"type": "AdamW", "params": {"lr": "auto"}}}'
    spec = trl_read(extra="optim: adamw_torch\ndeepspeed: ds.json\n", files={"ds.json": ds})
    assert spec["distribution"]["strategy"] == "zero2" and "optimizer_implementation" not in spec
    assert "optimizer_implementation" in trl_read(extra="optim: adamw_torch\ndeepspeed: ds.json\n",
                                                  files={"ds.json": ds.replace(', "optimizer": {"type": "AdamW", "params": {"lr": "auto"}}', "")})


def _trl_export(**fields) -> dict:
    from oomless.adapters.trl.writer import export_files

    base = {"model": "Qwen/Qwen2.5-0.5B-Instruct", "hardware": {"gpu": "H100-80GB", "gpus_per_node": 8},
            "finetune": {"method": "full"}, "distribution": {"strategy": "ddp"}, "precision": "bf16",
            "batch": {"micro_batch_size": 8, "num_generations": 8}, "logits": "chunked_head",
            "lengths": {"max_prompt_tokens": 512, "max_completion_tokens": 512},
            "rollout": {"engine": "hf"}, "kl_beta": 0.0}
    files = export_files(parse_spec({**base, **fields}))  # raises unless the files read back to the spec
    return yaml.safe_load(files["grpo_config.yaml"])


@pytest.mark.parametrize(("fields", "optim"), [
    ({"optimizer_implementation": "fused"}, "adamw_torch_fused"),
    ({}, "adamw_torch"),  # unset under DDP is foreach: said, since TRL 1.16's default is fused
    ({"optimizer_implementation": "foreach"}, "adamw_torch"),
    ({"transformers_version": "4.53.3"}, None),  # that release's default already is adamw_torch
    ({"transformers_version": "4.53.3", "optimizer_implementation": "fused"}, "adamw_torch_fused"),
    ({"distribution": {"strategy": "zero3"}, "precision": "bf16_mixed"}, None),
    ({"distribution": {"strategy": "zero3"}, "precision": "bf16_mixed", "optimizer_implementation": "foreach"}, "adamw_torch"),
])
def test_trl_writes_optim_that_reads_back(fields: dict, optim: str | None) -> None:
    assert _trl_export(**fields).get("optim") == optim


def test_trl_cannot_write_a_per_parameter_loop() -> None:
    with pytest.raises(InputError, match="optimizer_implementation"):
        _trl_export(optimizer_implementation="for_loop")


def test_trl_patch_says_fused_in_the_users_optim(tmp_path: Path) -> None:
    path = tmp_path / "grpo.yaml"
    path.write_text("# oomless: trl==1.16 max_prompt_tokens=512\n" + GRPO_YAML + "optim: adamw_torch  # ours\n"
                    "accelerate_config: multi_gpu\n")
    hardware = HardwareFlags(gpu="H100-80GB", gpus_per_node=8)
    run, _ = load_native(path, "trl", hardware)
    assert run.spec.optimizer_implementation is None
    wanted = _changed(run.spec, {"optimizer_implementation": "fused"})
    patch = plan_patch("trl", path, path.read_text(), run.spec, wanted)
    assert [c.shown for c in patch.changes] == ["optim: adamw_torch → adamw_torch_fused"]
    assert read_back(patch, hardware, wanted, run.arch) == ()


# --- ms-swift ----------------------------------------------------------------------------------

SWIFT_FLAGS = {"model": "Qwen/Qwen2.5-7B-Instruct", "train_type": "full", "torch_dtype": "bfloat16",
               "max_length": 2048, "max_completion_length": 1024, "num_generations": 8,
               "per_device_train_batch_size": 2, "use_vllm": "true", "vllm_mode": "colocate"}
"""The flags of ms-swift's examples/train/grpo/internal scripts (full GRPO, colocated vLLM)."""


@pytest.mark.parametrize(("version", "transformers", "extra", "expected"), [
    ("4.6", None, {}, "fused"),  # ms-swift >= 3.10 documents torch 2.8 / transformers 4.57: adamw_torch_fused
    ("3.9", None, {}, None),  # 3.7-3.9 document torch 2.7.1: adamw_torch, foreach (unset's plan under DDP)
    ("4.6", "4.53.3", {}, None),
    ("3.5", "4.57.1", {}, "fused"),
    ("3.5", None, {"deepspeed": "zero2"}, "foreach"),  # 3.5 pins transformers < 4.53; DeepSpeed steps it
    ("4.6", None, {"deepspeed": "zero3"}, None),
    ("3.5", None, {"deepspeed": "zero2_offload"}, None),  # stepped on the CPU
    ("4.6", None, {"optim": "adamw_torch"}, None),
    ("3.5", None, {"optim": "adamw_torch_fused"}, "fused"),
])
def test_swift_reads_optim_and_the_releases_default(version: str, transformers: str | None, extra: dict,
                                                    expected: str | None) -> None:
    text = script({**SWIFT_FLAGS, **extra}, {"NPROC_PER_NODE": 8}, version=version)
    if transformers:
        text = f"# oomless: transformers=={transformers}\n" + text
    spec = imported_spec(text, gpus_per_node=8)
    assert getattr(spec.optimizer_implementation, "value", None) == expected


def test_swift_export_writes_fused_as_its_flag() -> None:
    from oomless.adapters.swift.writer import export_files

    spec = imported_spec(script({**SWIFT_FLAGS, "optim": "adamw_torch_fused"}, {"NPROC_PER_NODE": 8}, version="3.5"),
                         gpus_per_node=8)
    assert spec.optimizer_implementation.value == "fused"
    assert "--optim adamw_torch_fused" in export_files(spec)["run_grpo.sh"]  # raises unless it reads back


def test_swift_patch_adds_fused_to_the_script(tmp_path: Path) -> None:
    path = tmp_path / "s1-before.sh"
    path.write_text((NATIVE / "s1-before.sh").read_text())
    hardware = HardwareFlags(gpu="RTX-3090")
    run, _ = load_native(path, "swift", hardware)
    assert run.spec.optimizer_implementation.value == "foreach"  # ms-swift 3.4 under ZeRO-2: the Trainer's foreach
    wanted = _changed(run.spec, {"optimizer_implementation": "fused"})
    patch = plan_patch("swift", path, path.read_text(), run.spec, wanted)
    assert [c.shown for c in patch.changes] == ["--optim (unset) → adamw_torch_fused"]
    assert read_back(patch, hardware, wanted, run.arch) == ()


# --- verl --------------------------------------------------------------------------------------

VERL_EXAMPLE = CORPUS / "verl/HEAD/examples/grpo_trainer/run_qwen2-7b.sh"


def verl_read(tmp_path: Path, *overrides: str) -> tuple[dict, tuple[str, ...]]:
    text = VERL_EXAMPLE.read_text()
    path = tmp_path / "run.sh"
    path.write_text(text.replace("python3 -m verl.trainer.main_ppo", "python3 -m verl.trainer.main_ppo " + " ".join(overrides)))
    result = import_native("verl", path, HardwareFlags(gpu="A100-80GB"))
    return result.spec, result.notes


@pytest.mark.parametrize(("overrides", "expected"), [
    ((), None),  # torch AdamW without flags: foreach, what an unset field plans under FSDP
    (("+actor_rollout_ref.actor.optim.override_optimizer_config.fused=True",), "fused"),
    (("+actor_rollout_ref.actor.optim.override_optimizer_config.foreach=False",), "for_loop"),
    (("'actor_rollout_ref.actor.optim.override_optimizer_config={fused: true}'",), "fused"),
    (("+actor_rollout_ref.actor.optim.override_optimizer_config.fused=True", "actor_rollout_ref.actor.strategy=fsdp2",
      "actor_rollout_ref.actor.fsdp_config.offload_policy=True"), None),  # stepped on the CPU
])
def test_verl_reads_the_optimizer_overrides(tmp_path: Path, overrides: tuple[str, ...], expected: str | None) -> None:
    assert verl_read(tmp_path, *overrides)[0].get("optimizer_implementation") == expected


def test_verl_notes_another_optimizer_class(tmp_path: Path) -> None:
    spec, notes = verl_read(tmp_path, "actor_rollout_ref.actor.optim.optimizer_impl=bitsandbytes.optim",
                            "actor_rollout_ref.actor.optim.optimizer=AdamW8bit")
    assert "optimizer_implementation" not in spec
    assert any("bitsandbytes.optim" in n and "AdamW8bit" in n for n in notes)


def test_verl_patch_writes_the_override_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / VERL_EXAMPLE.name
    path.write_text(VERL_EXAMPLE.read_text())
    hardware = HardwareFlags(gpu="A100-80GB")
    run, _ = load_native(path, "verl", hardware)
    wanted = _changed(run.spec, {"optimizer_implementation": "fused"})
    patch = plan_patch("verl", path, path.read_text(), run.spec, wanted)
    assert [c.shown for c in patch.changes] == ["actor_rollout_ref.actor.optim.override_optimizer_config.fused=(unset) → true"]
    assert read_back(patch, hardware, wanted, run.arch) == ()


# --- EasyR1 and OpenRLHF -----------------------------------------------------------------------

def easyr1_read(tmp_path: Path, actor: str) -> dict:
    path = tmp_path / "config.yaml"
    path.write_text("worker:\n  actor:\n    model: {model_path: Qwen/Qwen2.5-VL-7B-Instruct}\n" + actor)
    return import_native("easyr1", path, HardwareFlags(gpu="A100-80GB")).spec


@pytest.mark.parametrize(("actor", "expected"), [
    ("", "fused"),  # examples/config.yaml: optim.strategy adamw, torch AdamW(fused=True)
    ("    optim: {strategy: adamw_bf16}\n    fsdp: {torch_dtype: bf16}\n", "for_loop"),  # AnyPrecisionAdamW
    ("    fsdp: {enable_full_shard: false}\n", None),  # planned as ZeRO-2, where fused is what unset plans
    ("    fsdp: {enable_full_shard: false}\n    optim: {strategy: adamw_bf16}\n", "for_loop"),
    ("    fsdp: {enable_cpu_offload: true}\n", None),
])
def test_easyr1_reads_the_optim_strategy(tmp_path: Path, actor: str, expected: str | None) -> None:
    assert easyr1_read(tmp_path, actor).get("optimizer_implementation") == expected


def test_easyr1_writes_the_strategy_and_refuses_foreach(tmp_path: Path) -> None:
    from oomless.adapters.easyr1.writer import render_files

    spec = parse_spec(easyr1_read(tmp_path, "    optim: {strategy: adamw_bf16}\n    fsdp: {torch_dtype: bf16}\n"))
    assert yaml.safe_load(render_files(spec)["easyr1_config.yaml"])["worker"]["actor"]["optim"]["strategy"] == "adamw_bf16"
    fused = spec.model_copy(update={"optimizer_implementation": spec.optimizer_implementation.__class__("fused")})
    assert yaml.safe_load(render_files(fused)["easyr1_config.yaml"])["worker"]["actor"]["optim"]["strategy"] == "adamw"
    with pytest.raises(InputError, match="optimizer_implementation"):
        render_files(spec.model_copy(update={"optimizer_implementation": None}))


@pytest.mark.parametrize(("stage", "expected"), [("0", "fused"), ("2", None), ("3", None)])
def test_openrlhf_steps_deepspeeds_fused_adam_at_every_stage(tmp_path: Path, stage: str, expected: str | None) -> None:
    path = tmp_path / "run.sh"
    path.write_text(f"python3 -m openrlhf.cli.train_ppo_ray --pretrain Qwen/Qwen2.5-1.5B-Instruct --zero_stage {stage}\n")
    assert import_native("openrlhf", path, HardwareFlags(gpu="A100-80GB")).spec.get("optimizer_implementation") == expected

