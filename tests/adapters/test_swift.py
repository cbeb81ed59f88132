"""The ms-swift adapter: import of `swift rlhf` scripts, export back, golden files, round trips.

ms-swift cannot be installed beside TRL 1.16 (it needs trl < 1.0), so exported scripts are
checked against golden files and against `swift.keys.FLAGS` (each flag with the ms-swift
versions that have it and the file defining it) instead of ms-swift's own parser.
"""

from __future__ import annotations

import re

import os
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oomless.adapters import HardwareFlags, export_native, import_native
from oomless.adapters.swift import keys as SF
from oomless.adapters.common import parse_flags, parse_shell, parse_version, read_directives
from oomless.adapters.round_trip import same_spec_dict
from oomless.adapters.swift.writer import export_files
from oomless.errors import InputError
from oomless.memory import vision as VZ
from oomless.catalog.resolve import load_model
from oomless.planner.plan import make_plan
from oomless.spec.load import load_run, parse_spec, resolve
from tests.adapters.swift_cases import imported, imported_spec, script
from tests.helpers import EXAMPLES

NATIVE = EXAMPLES / "seeds" / "native"
GOLDEN = Path(__file__).resolve().parent / "golden" / "swift"
SEEDS = [("s0-before", "H20"), ("s0-after", "H20"), ("s1-before", "RTX-3090"), ("s1-after", "A10")]
SLOW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def native_spec(name: str, gpu: str):
    return parse_spec(import_native("swift", NATIVE / f"{name}.sh", HardwareFlags(gpu=gpu)).spec)


def verdict(spec):
    run = resolve(spec)
    plan = make_plan(run.spec, run.arch, run.gpu, run.archs)
    return plan.fits, plan.binding.phase, plan.binding.device, plan.binding.device_role


# --- native seeds ----------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "gpu"), SEEDS)
def test_native_seed_plans_like_its_yaml(name: str, gpu: str) -> None:
    assert verdict(native_spec(name, gpu)) == verdict(load_run(EXAMPLES / "seeds" / f"{name}.yaml").spec)


@pytest.mark.parametrize(("name", "gpu"), SEEDS)
def test_native_seed_reads_to_its_yaml_but_for_ms_swift_facts(name: str, gpu: str) -> None:
    """Only these fields differ, facts of ms-swift 3.x the YAML seeds leave at oomless'
    defaults: max_num_seqs (256 from VllmArguments, but a 3.5+ colocated engine sizes itself
    per device batch × TP × steps_per_generation), no empty_cache before a colocated engine
    wakes (gc_collect_after_offload false before 3.7; it matters only with sleep), and the
    whole-model weight sync the S1 YAMLs leave at None (the same for LoRA), the prompt bound, and
    the vLLM release the script's directive names with ms-swift's one-completion requests, and
    the foreach AdamW of transformers < 4.53 that ms-swift <= 3.6 pins, stepped by DeepSpeed as
    the Trainer's own optimizer (swift/optim.py; the YAMLs leave DeepSpeed's own)."""
    native = native_spec(name, gpu).model_dump(mode="json")
    offloaded = native["distribution"]["offload_optimizer"]
    assert native.pop("optimizer_implementation") == (None if offloaded else "foreach")
    written = load_run(EXAMPLES / "seeds" / f"{name}.yaml").spec.model_dump(mode="json")
    assert written.pop("optimizer_implementation") is None
    if written["finetune"]["method"] == "lora" and written["rollout"]["weight_sync_batches"] is None:
        written["rollout"]["weight_sync_batches"] = 1
    batch, rollout = native["batch"], native["rollout"]
    version = tuple(int(p) for p in re.search(r"ms-swift==([\d.]+)", (NATIVE / f"{name}.sh").read_text()).group(1).split("."))
    sized = rollout["engine"] == "vllm_colocate" and version >= (3, 5)
    steps = batch["steps_per_generation"] or batch["gradient_accumulation_steps"]
    expected = batch["micro_batch_size"] * rollout["tensor_parallel_size"] * steps if sized else 256
    assert rollout.pop("max_num_seqs") == expected and written["rollout"].pop("max_num_seqs") is None
    # the release the script's directive names, and ms-swift's one completion per request (RequestConfig(n=1))
    stated = re.search(r"vllm==([\d.]+)", (NATIVE / f"{name}.sh").read_text())
    if stated and rollout["engine"] != "hf":
        assert (rollout.pop("vllm_version"), rollout.pop("samples_per_request")) == (stated.group(1), 1)
        assert (written["rollout"].pop("vllm_version"), written["rollout"].pop("samples_per_request")) == (None, None)
    # The YAMLs read --max_length as prompt + completion; in GRPO it bounds the prompt alone
    # (ms-swift docs, Command-line-parameters.md), so the script's prompts are one completion longer.
    completion = native["lengths"]["max_completion_tokens"]
    assert native["lengths"].pop("max_prompt_tokens") == written["lengths"].pop("max_prompt_tokens") + completion
    if written["rollout"]["engine"] == "vllm_colocate":
        assert native["rollout"].pop("empty_cache_before_rollout") is False
        written["rollout"].pop("empty_cache_before_rollout")
    assert native == written


def test_native_seed_notes_and_ignored_flags() -> None:
    result = import_native("swift", NATIVE / "s1-before.sh", HardwareFlags(gpu="RTX-3090"))
    assert result.notes == ()  # versions and every memory knob are stated
    assert set(result.ignored) == {f"--{n}: no effect on memory" for n in
                                   ("dataset", "reward_funcs", "learning_rate", "output_dir")}


# --- golden files and the flag list ----------------------------------------------------------

def _golden_check(files: dict[str, str], folder: Path) -> None:
    for name, text in files.items():
        path = folder / name
        if os.environ.get("UPDATE_GOLDEN"):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        assert text == path.read_text(encoding="utf-8"), f"{path} differs (UPDATE_GOLDEN=1 rewrites it)"
    assert sorted(p.name for p in folder.iterdir()) == sorted(files)


@pytest.mark.parametrize(("name", "gpu"), SEEDS)
def test_export_of_native_seed_matches_golden(name: str, gpu: str) -> None:
    _golden_check(export_files(native_spec(name, gpu)), GOLDEN / name)


def test_export_of_quickstart_matches_golden() -> None:
    """The quickstart with ms-swift's whole-model weight sync (oomless' default is TRL's
    one parameter at a time, which no ms-swift flag gives): ZeRO-3 with DeepSpeed's own bucket
    sizes matches no ms-swift preset, so a ds_config.json is written beside the script."""
    data = yaml.safe_load((EXAMPLES / "quickstart.yaml").read_text(encoding="utf-8"))
    with pytest.raises(InputError, match="^rollout.weight_sync_batches: ms-swift 4.6 cannot express it"):
        export_files(parse_spec(data))
    data["rollout"]["weight_sync_batches"] = 1
    # ms-swift >= 3.11 sizes a colocated engine batch × TP × steps_per_generation unless
    # --vllm_max_num_seqs is given: the plan's unset value (vLLM's default on the quickstart's
    # A100-80GB, 256) is written out
    assert "--vllm_max_num_seqs 256" in export_files(parse_spec(data))["run_grpo.sh"]
    batch, rollout = data["batch"], data["rollout"]
    data["rollout"]["max_num_seqs"] = batch["micro_batch_size"] * rollout.get("tensor_parallel_size", 1) * batch["gradient_accumulation_steps"]
    _golden_check(export_files(parse_spec(data)), GOLDEN / "quickstart")


def exported_flags(text: str) -> tuple[tuple[int, ...], list[str]]:
    version = parse_version("v", read_directives(text)["ms-swift"])
    names = []
    for cmd in parse_shell(text, "run_grpo.sh"):
        if cmd.argv[:1] == ("swift",):
            names += list(parse_flags(cmd.argv[2:], "run_grpo.sh"))
    return version, names


def assert_flags_known(text: str) -> None:
    version, names = exported_flags(text)
    for name in names:
        assert name in SF.FLAGS, f"--{name} is not in swift.keys.FLAGS"
        first, gone, source = SF.FLAGS[name]
        assert first <= version and (gone is None or version < gone), f"--{name} is not in ms-swift {version} ({source})"


@pytest.mark.parametrize("folder", sorted(p.name for p in GOLDEN.iterdir()) if GOLDEN.exists() else [])
def test_every_golden_flag_is_in_the_flag_list(folder: str) -> None:
    assert_flags_known((GOLDEN / folder / "run_grpo.sh").read_text(encoding="utf-8"))


def test_flag_list_cites_a_source_for_every_flag() -> None:
    assert all(source and first >= SF.MIN_VERSION for first, _, source in SF.FLAGS.values())


# --- round trips -----------------------------------------------------------------------------

MODELS = {"Qwen/Qwen2.5-0.5B-Instruct": (1, 2), "meta-llama/Llama-3.2-1B-Instruct": (1, 2, 4),
          "Qwen/Qwen2.5-VL-3B-Instruct": (1, 2)}


@st.composite
def swift_scripts(draw) -> str:
    version = draw(st.sampled_from(["3.4", "3.6", "3.12", "4.6"]))
    v = parse_version("v", version)
    model = draw(st.sampled_from(sorted(MODELS)))
    nproc = draw(st.sampled_from([1, 2, 4]))
    env: dict = {"NPROC_PER_NODE": nproc}
    flags: dict = {"model": model}
    kind = draw(st.sampled_from(["full", "lora", "qlora"]))
    flags["tuner_type" if v >= (4,) else "train_type"] = "full" if kind == "full" else "lora"
    if kind != "full":
        flags.update(lora_rank=draw(st.sampled_from([4, 8, 16])), lora_alpha=draw(st.sampled_from([16, 32])),
                     lora_dropout=draw(st.sampled_from([0.0, 0.05])),
                     target_modules=draw(st.sampled_from(["all-linear", ["q_proj", "v_proj"]])))
    if kind == "qlora":
        flags["quant_bits"] = 4
    preset = draw(st.sampled_from([None, "zero0", "zero1", "zero2", "zero2_offload", "zero3", "zero3_offload"]))
    if preset:
        flags["deepspeed"] = preset
    elif kind != "full" and draw(st.booleans()):
        flags["lora_dtype"] = "float32"
    flags["torch_dtype"] = draw(st.sampled_from(["bfloat16", "float16"]))
    if draw(st.booleans()):
        flags["optim"] = "adamw_bnb_8bit"
    flags["gradient_checkpointing"] = draw(st.sampled_from(["true", "false"]))
    attn = draw(st.sampled_from([None, "flash_attn", "eager", "sdpa"]))
    if attn:
        flags["attn_impl"] = attn
    micro, accumulation = draw(st.integers(2, 4)), draw(st.integers(1, 4))
    batch = micro * nproc * (accumulation if v >= (3, 4) else 1)
    flags.update(per_device_train_batch_size=micro, gradient_accumulation_steps=accumulation,
                 num_generations=draw(st.sampled_from([d for d in range(2, batch + 1) if batch % d == 0])))
    completion = draw(st.sampled_from([128, 512]))
    images = 0
    if model.startswith("Qwen/Qwen2.5-VL"):
        pixels = draw(st.sampled_from([200704, 602112]))
        env["MAX_PIXELS"] = pixels
        images = VZ.max_image_tokens(load_model(model).vision, max_pixels=pixels)
        flags["freeze_vit"] = draw(st.sampled_from(["true", "false"]))
    flags.update(max_completion_length=completion, max_length=completion + images + draw(st.integers(16, 1024)),
                 beta=draw(st.sampled_from([0.0, 0.04])))
    if draw(st.booleans()):
        flags["use_liger_kernel"] = "true"
    pre = ""
    if draw(st.booleans()):
        flags["use_vllm"] = "true"
        tp = draw(st.sampled_from([t for t in MODELS[model] if nproc % t == 0]))
        flags.update(vllm_gpu_memory_utilization=draw(st.sampled_from([0.3, 0.5, 0.9])))
        if draw(st.booleans()):
            flags["vllm_max_model_len"] = draw(st.sampled_from([4096, 8192]))
        server = v >= (3, 5) and draw(st.booleans())
        if v >= (3, 5):
            flags["vllm_mode"] = "server" if server else "colocate"
            flags["vllm_tensor_parallel_size"] = tp
        elif tp > 1:
            flags["tensor_parallel_size"] = tp
        if server:
            flags["vllm_server_host"] = "127.0.0.1"
            devices = ",".join(str(nproc + i) for i in range(tp))
            pre = (f"CUDA_VISIBLE_DEVICES={devices} swift rollout --model {model} --vllm_tensor_parallel_size {tp} "
                   f"--vllm_gpu_memory_utilization 0.8 &")
            flags.pop("vllm_gpu_memory_utilization")
            flags.pop("vllm_max_model_len", None)
        else:
            flags.update(sleep_level=draw(st.sampled_from([0, 1, 2])), offload_model=draw(st.sampled_from(["true", "false"])))
            if v < (3, 5):
                workers = draw(st.sampled_from([1, nproc]))
                flags["num_infer_workers"] = workers
                env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(nproc + draw(st.integers(0, 1))))
                if workers == 1 and tp > 1:
                    flags.pop("tensor_parallel_size")
    return script(flags, env, version, draw(st.sampled_from([None, "0.8.5", "0.21"])), pre)


@SLOW
@given(swift_scripts())
def test_export_then_import_gives_the_same_spec(text: str) -> None:
    spec = imported_spec(text)
    files = export_files(spec)  # raises when the script does not read back to the spec
    assert_flags_known(files["run_grpo.sh"])
    back = parse_spec(_reimport(files))
    if spec.rollout.vllm_version is None and back.rollout.vllm_version is not None:
        # the script names the vLLM whose CUDA-graph placement the spec has (round_trip.unstated_releases)
        assert back.rollout.cuda_graphs_in_budget == spec.rollout.cuda_graphs_in_budget
        back = back.model_copy(update={"rollout": back.rollout.model_copy(update={
            "vllm_version": None, "samples_per_request": spec.rollout.samples_per_request})})
    assert back == spec


def overlay_files(files: dict[str, str]) -> dict[str, str]:
    return {n: t for n, t in files.items() if n != "run_grpo.sh"}


def _reimport(files: dict[str, str], gpu: str = "A100-80GB") -> dict:
    from oomless.adapters.swift.reader import import_text

    return import_text(files["run_grpo.sh"], Path("."), HardwareFlags(gpu=gpu), "run_grpo.sh",
                       overlay_files(files))[0]


def test_round_trip_through_files_on_disk(tmp_path: Path) -> None:
    spec = native_spec("s0-after", "H20")
    written = export_native("swift", spec, tmp_path, force=False)
    assert [p.name for p in written] == ["run_grpo.sh"]
    assert parse_spec(import_native("swift", written[0], HardwareFlags(gpu="H20")).spec) == spec
    with pytest.raises(InputError, match=r"run_grpo\.sh: file exists; pass --force"):
        export_native("swift", spec, tmp_path, force=False)
    assert export_native("swift", spec, tmp_path, force=True) == written


def test_yaml_seed_exports_when_ms_swift_sizes_the_engine_as_the_plan_does() -> None:
    """An unset max_num_seqs is vLLM's default for the GPU (256 on S1's 24 GB cards): ms-swift's
    `swift rollout` states 256, the same engine, so S1 exports as it is; S0 (its cache kept
    before rollout, which only ms-swift < 3.7 can say) needs a 3.5-3.10 release, whose colocated
    engine is sized 32 (batch × TP × steps) where the plan's default is 1024 (H20, 96 GB)."""
    s1 = parse_spec(yaml.safe_load((EXAMPLES / "seeds" / "s1-before.yaml").read_text(encoding="utf-8")))
    assert "# oomless: ms-swift==" in export_files(s1)["run_grpo.sh"]
    data = yaml.safe_load((EXAMPLES / "seeds" / "s0-after.yaml").read_text(encoding="utf-8"))
    with pytest.raises(InputError, match=r"older releases fail on .*3\.6: rollout\.max_num_seqs"):
        export_files(parse_spec(data))
    data["rollout"]["max_num_seqs"] = 32
    spec = parse_spec(data)
    files = export_files(spec)
    arch = load_model(spec.model)  # equal up to spellings of one value (same_spec_dict)
    assert same_spec_dict(_reimport(files, spec.hardware.gpu), arch) == same_spec_dict(spec, arch)


def test_export_names_the_field_no_release_can_express() -> None:
    data = yaml.safe_load((EXAMPLES / "quickstart.yaml").read_text(encoding="utf-8"))
    data["rollout"]["max_num_batched_tokens"] = 4096
    data["rollout"]["max_num_seqs"] = 16  # what ms-swift 3.5+ sizes the quickstart's colocated engine to (4 × 1 × 4)
    with pytest.raises(InputError, match=r"^rollout.max_num_batched_tokens: ms-swift 4.6 cannot express it"):
        export_files(parse_spec(data))


# --- versions and layouts --------------------------------------------------------------------

BASE = {"model": "Qwen/Qwen2.5-1.5B-Instruct", "max_length": 1024, "num_generations": 4}


def test_ms_swift_3_4_engine_on_the_last_gpu() -> None:
    shared = imported_spec(script({**BASE, "use_vllm": "true"}, {"NPROC_PER_NODE": 4}, "3.4"))
    assert shared.placement.groups is not None and shared.rollout.engine.value == "vllm_colocate"
    assert [(g.gpus_per_node, [r.value for r in g.roles]) for g in shared.placement.groups] == [
        (3, ["actor"]), (1, ["actor", "vllm"])]
    assert shared.rollout.engine_in_trainer_process is False and shared.hardware.gpus_per_node == 4
    own = imported_spec(script({**BASE, "use_vllm": "true", "num_generations": 3},
                               {"NPROC_PER_NODE": 3, "CUDA_VISIBLE_DEVICES": "0,1,2,3"}, "3.4"))
    assert own.rollout.engine.value == "vllm_separate" and own.rollout.num_gpus == 1 and own.hardware.gpus_per_node == 4
    per_rank = imported_spec(script({**BASE, "use_vllm": "true", "num_infer_workers": 4}, {"NPROC_PER_NODE": 4}, "3.4"))
    assert per_rank.placement.groups is None and per_rank.rollout.engine.value == "vllm_colocate"


def test_vllm_mode_and_version_notes() -> None:
    spec, ignored, notes = imported(script({**BASE, "use_vllm": "true", "vllm_mode": "colocate"}, {"NPROC_PER_NODE": 4}, None))
    assert any("ms-swift 4.6 assumed" in n for n in notes)
    # the colocated engine sized by ms-swift: per device batch 1 (default) × TP 1 × steps 1
    assert spec["rollout"]["cuda_graphs_in_budget"] is True and spec["rollout"]["max_num_seqs"] == 1
    _, _, notes = imported(script({**BASE, "use_vllm": "true"}, {"NPROC_PER_NODE": 4}, "3.11.1"))
    assert any("--vllm_mode unset" in n for n in notes)
    spec, _, notes = imported(script({**BASE, "use_vllm": "true"}, {"NPROC_PER_NODE": 4}, "3.6"))
    assert spec["rollout"]["engine"] == "vllm_colocate" and not any("--vllm_mode" in n for n in notes)
    spec, ignored, _ = imported(script({**BASE, "use_vllm": "true", "vllm_mode": "colocate"}, {"NPROC_PER_NODE": 4}, "3.4"))
    assert "--vllm_mode: not a flag of ms-swift 3.4 (it exists from 3.5 on)" in ignored
    spec, ignored, _ = imported(script({**BASE, "use_vllm": "true", "vllm_mode": "colocate", "sleep_level": 1,
                                        "gc_collect_after_offload": "true"}, {"NPROC_PER_NODE": 4}, "3.6", "0.8.5"))
    assert spec["rollout"]["sleep_level"] == 1 and "empty_cache_before_rollout" not in spec["rollout"]
    # 3.6 has no --vllm_max_num_seqs: the engine is per device batch 1 × TP 1 × steps 1 (v3.6.4 grpo_trainer.py)
    assert spec["rollout"]["max_num_seqs"] == 1 and spec["rollout"]["cuda_graphs_in_budget"] is False


def test_3_5_to_3_11_take_the_mode_from_the_server_host() -> None:
    """ms-swift 3.5.0-3.11.0 override --vllm_mode from --vllm_server_host (rlhf_args.py v3.8.0 L216-225);
    3.11.1 keeps the flag as written (v3.11.1 L360)."""
    contradicts = {**BASE, "use_vllm": "true", "vllm_mode": "colocate", "vllm_server_host": "10.0.0.2"}
    spec, _, notes = imported(script(contradicts, {"NPROC_PER_NODE": 4}, "3.8"))
    assert spec["rollout"]["engine"] == "vllm_separate"
    assert any("--vllm_mode colocate with a vLLM server host" in n and "as server" in n for n in notes)
    for kept in ("3.11.2", "3.12"):
        spec, _, _ = imported(script(contradicts, {"NPROC_PER_NODE": 4}, kept))
        assert spec["rollout"]["engine"] == "vllm_colocate"
    spec, _, notes = imported(script({**BASE, "use_vllm": "true", "vllm_mode": "server"}, {"NPROC_PER_NODE": 4}, "3.11.0"))
    assert spec["rollout"]["engine"] == "vllm_colocate" and any("runs it as colocate" in n for n in notes)


def test_server_mode_without_a_rollout_command_assumes_a_default_server() -> None:
    text = script({**BASE, "use_vllm": "true", "vllm_mode": "server", "vllm_server_host": "10.0.0.2"},
                  {"NPROC_PER_NODE": 4})
    spec, _, notes = imported(text)
    assert spec["rollout"]["engine"] == "vllm_separate" and spec["rollout"]["num_gpus"] == 1
    assert spec["hardware"]["gpus_per_node"] == 5
    assert any("without a `swift rollout` command: planned the trainer on NPROC_PER_NODE=4" in n for n in notes)
    spec = imported_spec(text, gpus_per_node=6)
    assert spec.rollout.engine.value == "vllm_separate" and spec.rollout.num_gpus == 2
    assert spec.rollout.gpu_memory_utilization == 0.9  # swift rollout's default


def test_deepspeed_presets_differ_between_3x_and_4x() -> None:
    old = imported_spec(script({**BASE, "deepspeed": "zero3_offload"}, {"NPROC_PER_NODE": 4}, "3.6"))
    new = imported_spec(script({**BASE, "deepspeed": "zero3_offload"}, {"NPROC_PER_NODE": 4}, "4.6"))
    assert (old.distribution.overlap_comm, old.distribution.offload_params, old.distribution.offload_optimizer) == (True, True, False)
    assert (new.distribution.overlap_comm, new.distribution.offload_params, new.distribution.offload_optimizer) == (False, True, True)


def test_custom_deepspeed_json_next_to_the_script(tmp_path: Path) -> None:
    (tmp_path / "ds.json").write_text('{"zero_optimization": {"stage": 2, "reduce_bucket_size": 1e8, '
                                      '"allgather_bucket_size": 1e8}, "bf16": {"enabled": true}}')
    run = tmp_path / "run.sh"
    run.write_text(script({**BASE, "deepspeed": "ds.json"}, {"NPROC_PER_NODE": 4}), encoding="utf-8")
    result = import_native("swift", run, HardwareFlags(gpu="A100-80GB"))
    assert result.spec["distribution"] == {"strategy": "zero2", "reduce_bucket_size": 100_000_000, "overlap_comm": False}
    assert "ds.json: zero_optimization.allgather_bucket_size affects memory but is not modelled" in result.ignored


def test_flags_without_a_spec_field_are_reported_with_the_reason() -> None:
    spec, ignored, _ = imported(script({**BASE, "padding_free": "true", "sequence_parallel_size": 2, "learning_rate": 1e-6,
                                        "frobnicate": 1}, {"NPROC_PER_NODE": 4}))
    assert spec["batch"]["padding_free"] is True and spec["distribution"]["sequence_parallel_size"] == 2
    assert "--learning_rate: no effect on memory" in ignored
    assert "--frobnicate: not a ms-swift key in any release 3.2–4.6 (nor of transformers 4.46–5.24)" in ignored


def test_precision_rules() -> None:
    def precision(**flags) -> str:
        return imported_spec(script({**BASE, **flags}, {"NPROC_PER_NODE": 4})).precision.value

    assert precision(tuner_type="full") == "bf16"  # plain DDP trains bf16 weights in bf16
    assert precision(tuner_type="full", deepspeed="zero0") == "bf16_mixed"  # DeepSpeed keeps fp32 masters
    assert precision(tuner_type="lora", lora_dtype="float32") == "bf16_mixed"
    assert precision(torch_dtype="float16", deepspeed="zero2") == "fp16_mixed"


# --- bad input -------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "message"), [
    (script(BASE, version="2.6"), "ms-swift version: 2.6 is not supported; supported: >=3.2,<5"),
    (script({**BASE, "vllm_gpu_memory_utilization": "lots", "use_vllm": "true"}),
     "--vllm_gpu_memory_utilization: 'lots' is not a number"),
    (script({**BASE, "deepspeed": "zero4"}), "--deepspeed: 'zero4' is not a preset"),
    (script({**BASE, "tuner_type": "boft"}), "--tuner_type: 'boft' is not planned"),
    (script({**BASE, "num_generations": 3}), "--num_generations: 3 does not divide"),
    (script({**BASE, "num_generations": 1}), "--num_generations: 1: GRPO needs at least 2"),
    (script({**BASE, "model": "Qwen/Qwen2.5-VL-3B-Instruct", "max_length": 300}, {"MAX_PIXELS": 602112, "NPROC_PER_NODE": 4}),
     "--max_length: 300 leaves no prompt text beside 768 image tokens"),
    (script({**BASE, "sleep_level": 3, "use_vllm": "true", "vllm_mode": "colocate"}), "--sleep_level: 3 is not allowed"),
    (script({"model": "Qwen/Qwen2.5-1.5B-Instruct"}).replace("--rlhf_type grpo", "--rlhf_type dpo"), "--rlhf_type: 'dpo'"),
    (script({"model": "no/such-model"}), "--model: 'no/such-model' not found"),
    ("echo hello\n", "run.sh: no `swift rlhf` command found"),
    ("megatron rlhf --rlhf_type grpo\n", "run.sh: `megatron rlhf` (Megatron-SWIFT) is not supported"),
    ("swift rlhf --rlhf_type 'grpo\n", "run.sh:1: malformed shell: no closing quotation"),
])
def test_bad_input_is_one_named_input_error(text: str, message: str) -> None:
    with pytest.raises(InputError) as caught:
        imported(text)
    assert str(caught.value).startswith(message), str(caught.value)
    assert "\n" not in str(caught.value)


def test_the_gpu_type_must_come_from_the_command_line() -> None:
    with pytest.raises(InputError, match="^--gpu: required with --from swift"):
        imported(script(BASE, {"NPROC_PER_NODE": 4}), gpu=None)


def test_conflicting_gpu_count_is_named() -> None:
    with pytest.raises(InputError, match=r"^--gpus-per-node: 8, but the script runs on 4 GPUs per node"):
        imported(script(BASE, {"NPROC_PER_NODE": 4}), gpus_per_node=8)


def test_directive_keys_are_checked() -> None:
    with pytest.raises(InputError, match="oomless directive swift: unknown key"):
        imported(script(BASE).replace("ms-swift==4.6", "swift==4.6"))
