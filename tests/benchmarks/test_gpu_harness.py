"""The GPU validation harness's CPU-side parts (issue 14): its specs plan, a real `oomless train`
run on CPU aggregates into rows, and the table renders. The CUDA run itself is not faked."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from oomless.planner.plan import make_plan
from oomless.spec.load import parse_spec, resolve

ROOT = Path(__file__).resolve().parents[2]


def _harness():
    spec = importlib.util.spec_from_file_location("grpo_phases", ROOT / "benchmarks" / "gpu" / "grpo_phases.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


H = _harness()
R = sys.modules["phase_report"]  # imported by the harness from beside it


@pytest.mark.parametrize("engine", ["hf", "vllm_colocate"])
@pytest.mark.parametrize("model_id", H.MODELS)
def test_harness_specs_plan_and_fit_on_the_gpu_they_run_on(tmp_path: Path, model_id: str, engine: str) -> None:
    config = H.write_model_config(model_id, tmp_path)
    assert not any(k.startswith("_") for k in json.loads(config.read_text()))
    spec = parse_spec(H.harness_spec(config.name, gpu="H100-80GB", engine=engine, steps=2, output_dir="run"))
    run = resolve(spec, tmp_path)
    plan = make_plan(run.spec, run.arch, run.gpu, run.archs)
    names = {p.name for g in plan.devices for p in g.phases}
    assert {"load", "rollout", "train", "optimizer"} <= names
    assert plan.fits, f"{model_id} with {engine} must fit an H100 to be measured"


@pytest.mark.parametrize("method", ["lora", "qlora"])
def test_adapter_specs_plan_the_notebook_adapter(tmp_path: Path, method: str) -> None:
    """--method lora/qlora trains LORA's adapter (r 32 on all seven projections): the plan's
    trainable parameters are those adapters, and the QLoRA base is smaller than the LoRA one."""
    config = H.write_model_config("Qwen/Qwen2.5-1.5B-Instruct", tmp_path)
    specs = {m: parse_spec(H.harness_spec(config.name, gpu="H100-80GB", engine="hf", steps=2, output_dir="run",
                                          method=m, optimizer="adamw_8bit")) for m in ("lora", method)}
    plans = {}
    for m, spec in specs.items():
        run = resolve(spec, tmp_path)
        plans[m] = make_plan(run.spec, run.arch, run.gpu, run.archs)
        assert plans[m].fits and spec.finetune.lora_rank == 32 and len(spec.finetune.lora_targets) == 7

    def load(plan):
        return next(p for g in plan.devices for p in g.phases if p.name == "load").peak_bytes

    assert (load(plans[method]) < load(plans["lora"])) == (method == "qlora")


def test_gpu_catalog_id_of_cuda_device_names() -> None:
    assert H.gpu_catalog_id("NVIDIA H100 80GB HBM3") == "H100-80GB"
    assert H.gpu_catalog_id("NVIDIA H200") == "H200"
    with pytest.raises(SystemExit):
        H.gpu_catalog_id("Some Other Card")


def test_a_real_cpu_run_aggregates_into_rows_and_a_table(tmp_path: Path) -> None:
    """The harness's flow on a tiny Qwen2-shaped model (vocabulary 512, so the character
    tokenizer is padded): `oomless train` on CPU, then rows, the report and its table."""
    tiny = {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "hidden_size": 32, "intermediate_size": 64,
            "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 512,
            "max_position_embeddings": 256, "tie_word_embeddings": True, "torch_dtype": "bfloat16"}
    work = tmp_path / "tiny"
    work.mkdir()
    (work / "config.json").write_text(json.dumps(tiny))
    spec = H.harness_spec("config.json", gpu="H100-80GB", engine="hf", steps=2, output_dir="run")
    spec["hardware"] = {"gpu_capacity_gib": 2, "gpus_per_node": 1, "host_ram_gib": 8}
    spec["batch"] = {"micro_batch_size": 4, "gradient_accumulation_steps": 1, "num_generations": 4}
    spec["lengths"] = {"max_prompt_tokens": 8, "max_completion_tokens": 4}
    spec["train"]["cpu_threads"] = 1
    (work / "spec.yaml").write_text(yaml.safe_dump(spec))
    done = subprocess.run([sys.executable, "-c", "from oomless.cli.main import main; main()", "train",
                           str(work / "spec.yaml"), "--force"], capture_output=True, text=True, timeout=600,
                          cwd=work, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = H.rows_from_run("tiny", "hf", work / "run")
    by_phase = {r["phase"]: r for r in rows}
    assert {"rollout", "train", "optimizer"} <= set(by_phase)
    assert by_phase["train"]["steps"] == [2] and by_phase["train"]["steady"]
    assert all(r["reserved_peak_bytes"] > 0 and r["plan_at_run_bytes"] > 0 for r in rows)
    (tmp_path / "gpu-phases.json").write_text(json.dumps({"environment": {"gpu": "cpu"}, "rows": rows, "failures": []}))
    table = R.markdown(R.report(tmp_path, replan=False))
    assert "| tiny | hf | train | 2 |" in table
    assert "plan now" not in table  # nothing replanned


def test_the_notebook_probe_parses_its_arguments_without_a_gpu() -> None:
    """benchmarks/gpu/qlora_notebook_probe.py needs a GPU to run; its command line and imports
    do not (torch and transformers load only inside build/run)."""
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu" / "qlora_notebook_probe.py"), "--help"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and "--prompt-chars" in done.stdout


def test_the_notebook_replay_report_is_what_the_planner_gives_today() -> None:
    """benchmarks/results/gpu-qlora-notebook/report.json (docs/validation.md section 5) holds the
    current plan of each probe: after a planner change, rerun `qlora_notebook_probe.py report`."""
    spec = importlib.util.spec_from_file_location("qlora_notebook_probe", ROOT / "benchmarks" / "gpu" / "qlora_notebook_probe.py")
    probe_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe_module)
    folder = ROOT / "benchmarks" / "results" / "gpu-qlora-notebook"
    stored = json.loads((folder / "report.json").read_text())
    assert probe_module.report(folder) == stored, "run: python benchmarks/gpu/qlora_notebook_probe.py report --dir " + str(folder)
    assert all(abs(row["step_error_vs_allocated_pct"]) < 5 for row in stored["rows"])
