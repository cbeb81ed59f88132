"""The TRL adapter: GRPOConfig YAML / launch scripts → spec, spec → files TRL's own parsers accept.

TRL 1.16 is installed (extra `train`), so exported configs are fed to `trl grpo`'s TrlParser,
to `transformers.HfArgumentParser` over (GRPOScriptArguments, GRPOConfig, ModelConfig), to
accelerate's config loader and to accelerate's DeepSpeedPlugin. GRPOConfig refuses bf16 on a
machine without a GPU, so the parse adds `use_cpu=True` (as TRL's docs say for CPU runs).
"""

from __future__ import annotations

import json
import tempfile
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oomless.adapters import HardwareFlags, export_native, import_native
from oomless.adapters.trl.reader import import_path
from oomless.adapters.trl.writer import export_files
from oomless.errors import InputError
from oomless.spec.enums import LogitsMode
from oomless.spec.load import load_run, parse_spec

pytest.importorskip("trl")

QUICKSTART_TRL = {
    "model": "Qwen/Qwen2.5-1.5B-Instruct",
    "hardware": {"gpu": "A100-80GB", "gpus_per_node": 4, "host_ram_gib": 512},
    "finetune": {"method": "full"},
    "distribution": {"strategy": "zero3"},
    "batch": {"micro_batch_size": 4, "gradient_accumulation_steps": 4, "num_generations": 8},
    "lengths": {"max_prompt_tokens": 1024, "max_completion_tokens": 1024},
    "kl_beta": 0.04,
    "logits": "chunked_head",
    "rollout": {"engine": "vllm_colocate", "gpu_memory_utilization": 0.4, "sleep_level": 2,
                "max_num_seqs": 16, "max_num_batched_tokens": 4096, "max_model_len": 2048},
}
"""examples/quickstart.yaml as TRL runs it: sleep level 2, the colocated engine's fixed
max_num_seqs (4 × 1 × 4) and max_num_batched_tokens (4096), max_model_len written out, and
TRL 1.x's tiled LM-head log-probs."""


def from_files(files: dict[str, str], entry: str = "launch.sh", gpu: str = "A100-80GB", **hw: Any):
    return import_path(Path(entry), HardwareFlags(gpu=gpu, **hw), files)


def spec_of(files: dict[str, str], entry: str = "launch.sh", **hw: Any):
    return parse_spec(from_files(files, entry, **hw)[0])


def accepted_by_trl(folder: Path) -> Any:
    """Parse the exported files with TRL's, transformers' and accelerate's own code."""
    from accelerate.commands.config.config_args import load_config_from_file
    from accelerate.utils import DeepSpeedPlugin
    from transformers import HfArgumentParser
    from trl import GRPOConfig, ModelConfig
    from trl.scripts.grpo import GRPOScriptArguments, make_parser

    config = folder / "grpo_config.yaml"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        parsed = make_parser().parse_args_and_config(["--config", str(config), "--use_cpu", "true"],
                                                     return_remaining_strings=True, separate_remaining_strings=True)
        *_, from_config, from_cli = parsed
        assert from_config == ["--accelerate_config", "accelerate_config.yaml"] and from_cli == []
        data = yaml.safe_load(config.read_text(encoding="utf-8"))
        data.pop("accelerate_config")
        _, grpo, model = HfArgumentParser((GRPOScriptArguments, GRPOConfig, ModelConfig)).parse_dict({**data, "use_cpu": True})
    accelerate = load_config_from_file(str(folder / "accelerate_config.yaml"))
    if (folder / "ds_config.json").exists():
        plugin = DeepSpeedPlugin(hf_ds_config=str(folder / "ds_config.json"))
        assert plugin.zero_stage == json.loads((folder / "ds_config.json").read_text())["zero_optimization"]["stage"]
    return grpo, model, accelerate


def test_exported_quickstart_is_accepted_by_trl_and_reads_back(tmp_path: Path) -> None:
    spec = parse_spec(QUICKSTART_TRL)
    written = export_native("trl", spec, tmp_path, force=False)
    assert sorted(p.name for p in written) == ["accelerate_config.yaml", "ds_config.json", "grpo_config.yaml", "launch.sh"]
    grpo, model, accelerate = accepted_by_trl(tmp_path)
    assert (grpo.beta, grpo.per_device_train_batch_size, grpo.gradient_accumulation_steps) == (0.04, 4, 4)
    assert (grpo.use_vllm, grpo.vllm_mode, grpo.vllm_gpu_memory_utilization, grpo.vllm_enable_sleep_mode) == (
        True, "colocate", 0.4, True)
    assert grpo.generation_batch_size == 16 and grpo.vllm_max_model_length == 2048
    assert (model.model_name_or_path, model.dtype, model.use_peft) == ("Qwen/Qwen2.5-1.5B-Instruct", "bfloat16", False)
    assert (accelerate.distributed_type.value, accelerate.num_processes) == ("DEEPSPEED", 4)
    for entry in ("launch.sh", "grpo_config.yaml"):
        again = import_native("trl", tmp_path / entry, HardwareFlags(gpu="A100-80GB", host_ram_gib=512))
        assert parse_spec(again.spec) == spec
    with pytest.raises(InputError, match=r"\.(json|yaml|sh): file exists; pass --force"):
        export_native("trl", spec, tmp_path, force=False)


def test_oomless_quickstart_needs_trl_values_to_export() -> None:
    spec = load_run(Path(__file__).resolve().parents[2] / "examples" / "quickstart.yaml").spec
    # The first setting TRL 1.16 cannot express: log-probs, then the engine's fixed max_num_seqs.
    with pytest.raises(InputError, match=r"^logits: 'full_bf16' cannot be exported to TRL 1.16: its files give 'chunked_head'"):
        export_files(spec)
    with pytest.raises(InputError, match=r"^rollout.max_num_seqs: None cannot be exported to TRL 1.16: its files give 16"):
        export_files(spec.model_copy(update={"logits": LogitsMode.chunked_head}))


# --- import: defaults and launch forms ---------------------------------------------------------

def test_trl_defaults_apply() -> None:
    files = {"c.yaml": "model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct\nuse_vllm: true\n"
                       "accelerate_config: zero3\nnum_processes: 4\n"}
    spec, ignored, notes = from_files(files, "c.yaml")
    run = parse_spec(spec)
    assert (run.kl_beta, run.batch.micro_batch_size, run.batch.num_generations, run.lengths.max_completion_tokens) == (0.0, 8, 8, 512)
    assert (run.rollout.gpu_memory_utilization, run.rollout.max_num_seqs, run.rollout.max_num_batched_tokens) == (0.3, 8, 4096)
    assert run.rollout.max_model_len == 32768 and run.lengths.max_prompt_tokens == 32768 - 512
    assert run.precision.value == "bf16_mixed" and run.distribution.strategy.value == "zero3"
    assert run.distribution.overlap_comm is True and run.distribution.reduce_bucket_size == 500_000_000
    assert run.hardware.gpus_per_node == 4
    assert any("TRL 1.16 assumed" in n for n in notes) and any("does not truncate prompts" in n for n in notes)


def test_peft_defaults_and_float32_base_warning() -> None:
    files = {"c.yaml": "# oomless: trl==1.16 max_prompt_tokens=256\nmodel_name_or_path: Qwen/Qwen2.5-1.5B-Instruct\n"
                       "use_peft: true\nper_device_train_batch_size: 2\nlearning_rate: 1.0e-6\nnum_generations: 2\n"}
    spec, ignored, notes = from_files(files, "c.yaml")
    assert spec["finetune"] == {"method": "lora", "lora_rank": 16, "lora_alpha": 32.0, "lora_dropout": 0.05,
                                "lora_targets": ["q_proj", "v_proj"]}
    assert spec["lengths"]["max_prompt_tokens"] == 256 and spec["rollout"] == {"engine": "hf"}
    assert any(line.startswith("dtype: float32 base weights are planned as bf16") for line in ignored)
    assert "learning_rate: no effect on memory" in ignored


def test_accelerate_launch_script_with_a_vllm_server(tmp_path: Path) -> None:
    (tmp_path / "ds.json").write_text(json.dumps({"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}))
    (tmp_path / "acc.yaml").write_text("distributed_type: DEEPSPEED\ndeepspeed_config:\n  deepspeed_config_file: ds.json\n"
                                       "num_processes: 8\nnum_machines: 1\n")
    (tmp_path / "run.sh").write_text(
        "# oomless: trl==1.10 vllm==0.8.5 max_prompt_tokens=512\n"
        "CUDA_VISIBLE_DEVICES=6,7 trl vllm-serve --model Qwen/Qwen2.5-7B-Instruct --tensor_parallel_size 2 &\n"
        "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5 accelerate launch --config_file acc.yaml --num_processes 6 train_grpo.py \\\n"
        "  --model_name_or_path Qwen/Qwen2.5-7B-Instruct --dtype bfloat16 --use_vllm --vllm_mode server \\\n"
        "  --per_device_train_batch_size 2 --num_generations 12 --beta 0.04 --use_liger_kernel true\n")
    result = import_native("trl", tmp_path / "run.sh", HardwareFlags(gpu="H100-80GB"))
    run = parse_spec(result.spec)
    assert run.hardware.gpus_per_node == 8 and run.rollout.engine.value == "vllm_separate"
    assert (run.rollout.num_gpus, run.rollout.tensor_parallel_size, run.rollout.gpu_memory_utilization) == (2, 2, 0.9)
    assert run.rollout.cuda_graphs_in_budget is False and run.logits.value == "fused"
    assert (run.distribution.strategy.value, run.distribution.offload_optimizer) == ("zero2", True)
    assert run.precision.value == "bf16_mixed" and run.kl_beta == 0.04 and run.finetune.method.value == "full"


def test_torchrun_launch_counts_processes() -> None:
    files = {"run.sh": "torchrun --nproc_per_node 2 --nnodes 2 train.py --model_name_or_path "
                       "meta-llama/Llama-3.2-1B-Instruct --dtype bfloat16 --num_generations 4\n"}
    run = spec_of(files, "run.sh")
    assert (run.hardware.gpus_per_node, run.hardware.num_nodes, run.precision.value) == (2, 2, "bf16")


# --- round trips ---------------------------------------------------------------------------

MODELS = {"Qwen/Qwen2.5-0.5B-Instruct": (1, 2), "meta-llama/Llama-3.2-1B-Instruct": (1, 2, 4)}


@st.composite
def trl_launches(draw) -> dict[str, str]:
    model = draw(st.sampled_from(sorted(MODELS)))
    processes = draw(st.sampled_from([1, 2, 4]))
    config: dict[str, Any] = {"model_name_or_path": model}
    accelerate: dict[str, Any] = {"num_processes": processes, "num_machines": 1, "distributed_type": "MULTI_GPU"}
    files: dict[str, str] = {}
    if draw(st.booleans()):
        config.update(use_peft=True, lora_r=draw(st.sampled_from([8, 16])), lora_dropout=draw(st.sampled_from([0.0, 0.05])),
                      lora_target_modules=draw(st.sampled_from([None, ["all-linear"], ["q_proj", "k_proj"]])))
        config["load_in_4bit"] = draw(st.booleans())
    fp16 = draw(st.booleans())
    config["dtype"] = draw(st.sampled_from(["float32", "bfloat16", "auto"] + (["float16"] if fp16 else [])))
    if fp16:
        config.update(fp16=True, bf16=False)
    strategy = draw(st.sampled_from(["ddp", "zero1", "zero2", "zero3", "json", "fsdp"]))
    if strategy.startswith("zero"):
        accelerate.update(distributed_type="DEEPSPEED", deepspeed_config={
            "zero_stage": int(strategy[-1]), "offload_optimizer_device": draw(st.sampled_from(["none", "cpu"]))})
    elif strategy == "json":
        files["ds.json"] = json.dumps({"zero_optimization": {"stage": 3, "reduce_bucket_size": "auto",
                                                             "stage3_prefetch_bucket_size": 1e7}})
        config["deepspeed"] = "ds.json"
    elif strategy == "fsdp":
        accelerate.update(distributed_type="FSDP", fsdp_config={"fsdp_offload_params": draw(st.booleans())})
    if draw(st.booleans()):
        config["optim"] = "adamw_bnb_8bit"
    config["gradient_checkpointing"] = draw(st.booleans())
    attn = draw(st.sampled_from([None, "eager", "flash_attention_2"]))
    if attn:
        config["attn_implementation"] = attn
    micro, accumulation = draw(st.integers(2, 4)), draw(st.integers(1, 3))
    steps = draw(st.sampled_from([None, 1, 2]))
    per_process = micro * (steps or accumulation)  # GRPOConfig checks it in this one-process test
    config.update(per_device_train_batch_size=micro, gradient_accumulation_steps=accumulation,
                  num_generations=draw(st.sampled_from([d for d in range(2, per_process + 1) if per_process % d == 0])),
                  max_completion_length=draw(st.sampled_from([128, 512])), beta=draw(st.sampled_from([0.0, 0.04])))
    if steps:
        config["steps_per_generation"] = steps
    logits = draw(st.sampled_from([None, "use_liger_kernel", "cast_lm_head_to_fp32"]))
    if logits:
        config[logits] = True
    launch = "# oomless: trl==1.16 max_prompt_tokens=300\n"
    if draw(st.booleans()):
        tp = draw(st.sampled_from([t for t in MODELS[model] if processes % t == 0]))
        config.update(use_vllm=True, vllm_mode="colocate", vllm_tensor_parallel_size=tp,
                      vllm_gpu_memory_utilization=draw(st.sampled_from([0.3, 0.5])),
                      vllm_enable_sleep_mode=draw(st.booleans()))
        if draw(st.booleans()):
            config["vllm_max_model_length"] = 4096
        if draw(st.booleans()):
            config["vllm_mode"] = "server"
            devices = ",".join(str(processes + i) for i in range(tp))
            launch += (f"CUDA_VISIBLE_DEVICES={devices} trl vllm-serve --model {model} --tensor_parallel_size {tp} "
                       "--gpu_memory_utilization 0.7 --max_model_len 4096 &\n")
    config["accelerate_config"] = "acc.yaml"
    files["acc.yaml"] = yaml.safe_dump(accelerate)
    files["c.yaml"] = yaml.safe_dump(config)
    files["launch.sh"] = launch + "trl grpo --config c.yaml\n"
    return files


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trl_launches())
def test_import_export_import_gives_the_same_spec_and_trl_accepts_it(files: dict[str, str]) -> None:
    spec = spec_of(files)
    exported = export_files(spec)  # raises when its files do not read back to the spec
    assert spec_of(exported) == spec
    with tempfile.TemporaryDirectory() as folder:
        for name, text in exported.items():
            (Path(folder) / name).write_text(text, encoding="utf-8")
        grpo, model, _ = accepted_by_trl(Path(folder))
    assert grpo.per_device_train_batch_size == spec.batch.micro_batch_size and grpo.beta == spec.kl_beta
    assert model.use_peft == (spec.finetune.method.value != "full")


# --- bad input -----------------------------------------------------------------------------

MODEL = "model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct\n"


@pytest.mark.parametrize(("text", "message"), [
    ("# oomless: trl==0.13\n" + MODEL, "trl version: 0.13 is not supported; supported: >=0.14,<2"),
    ("# oomless: trl==2.0\n" + MODEL, "trl version: 2.0 is not supported; supported: >=0.14,<2"),
    (MODEL + "beta: lots\n", "beta: 'lots' is not a number"),
    (MODEL + "use_vllm: maybe\n", "use_vllm: 'maybe' is not a boolean"),
    (MODEL + "use_peft: true\nload_in_8bit: true\n", "load_in_8bit: an 8-bit base is not planned"),
    (MODEL + "bf16: false\n", "bf16: false without fp16 is fp32 training"),
    (MODEL + "use_vllm: true\nvllm_mode: remote\n", "vllm_mode: 'remote' is not allowed"),
    (MODEL + "num_generations: 3\n", "num_generations: 3 does not divide the generation batch of 8"),
    (MODEL + "num_generations: 1\n", "num_generations: 1: GRPO needs at least 2"),
    (MODEL + "accelerate_config: zero9\n", "zero9: cannot read"),
    ("use_peft: true\n", "model_name_or_path: required"),
    ("model_name_or_path: [unclosed\n", "c.yaml: malformed YAML at line"),
    ("- a\n- b\n", "c.yaml: expected a mapping"),
])
def test_bad_input_is_one_named_input_error(text: str, message: str) -> None:
    with pytest.raises(InputError) as caught:
        from_files({"c.yaml": text}, "c.yaml")
    assert str(caught.value).startswith(message), str(caught.value)
    assert "\n" not in str(caught.value)


def test_bad_launch_script_is_named() -> None:
    with pytest.raises(InputError, match="^run.sh: no `trl grpo`"):
        from_files({"run.sh": "echo hi\n"}, "run.sh")
    with pytest.raises(InputError, match="malformed shell"):
        from_files({"run.sh": "trl grpo --config 'c.yaml\n"}, "run.sh")


@pytest.mark.parametrize(("device", "engine", "gpus"), [("auto", "vllm_separate", 8), ("cuda:7", "vllm_separate", 8),
                                                        ("cuda:0", "vllm_colocate", 7)])
def test_trl_0_14_vllm_device_is_one_engine_on_its_own_gpu(device: str, engine: str, gpus: int) -> None:
    files = {"c.yaml": "model_name_or_path: Qwen/Qwen2.5-7B-Instruct\nuse_vllm: true\nnum_processes: 7\n"
                       f"vllm_device: {device}\nvllm_gpu_memory_utilization: 0.7\nvllm_max_model_len: 4096\n"}
    spec, _, notes = from_files(files, "c.yaml", gpu="H100-80GB")
    run = parse_spec(spec)
    assert (run.rollout.engine.value, run.hardware.gpus_per_node) == (engine, gpus)
    assert (run.rollout.gpu_memory_utilization, run.rollout.max_model_len, run.rollout.tensor_parallel_size) == (0.7, 4096, 1)
    assert any("vllm_device" in n for n in notes)
    default = parse_spec(from_files({"c.yaml": "model_name_or_path: Qwen/Qwen2.5-7B-Instruct\nuse_vllm: true\n"
                                               "num_processes: 7\nvllm_device: auto\n"}, "c.yaml", gpu="H100-80GB")[0])
    assert default.rollout.gpu_memory_utilization == 0.9  # TRL 0.14-0.17 default
