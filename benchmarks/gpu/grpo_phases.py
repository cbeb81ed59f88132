"""GPU validation harness (issue 14): real TRL GRPO steps on one GPU, three model sizes, the
measured peak of every phase against the plan, in one command.

    python benchmarks/gpu/grpo_phases.py --out benchmarks/results/gpu        # on a CUDA machine
    python benchmarks/gpu/grpo_phases.py --replan benchmarks/results/gpu     # anywhere: current plan vs those runs
    python benchmarks/gpu/grpo_phases.py --markdown benchmarks/results/gpu/gpu-phases.json

Each model is built from its shipped catalog config.json with random weights and the character
tokenizer padded to the model's vocabulary (no network: the lent GPU machines reach nothing), then
trained for a few optimizer steps with `oomless train --force`, which applies the plan and records
per step and phase `torch.cuda.max_memory_reserved`/`max_memory_allocated` after a reset at the
phase's start and NVML's used bytes (`oomless.train.telemetry`). Rollout uses vLLM colocated with
the trainer when vLLM imports, else TRL's HF generation (the engine is recorded per row).

The parts that need no GPU (specs, aggregation, the markdown table) are imported by
tests/benchmarks/test_gpu_harness.py; the CUDA run itself happens only in `main` here.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from phase_report import markdown, read_telemetry, report, steady_phase_peaks, write_model_config  # noqa: E402  (beside this file)
from qlora_notebook_probe import NOTEBOOK_LORA_TARGETS  # noqa: E402  (beside this file)

MODELS = ("Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-1.5B-Instruct", "Qwen/Qwen2.5-3B-Instruct")
"""Three sizes of one family (tied and untied embeddings: 0.5B/1.5B/3B tie, so the family's
largest term, the vocabulary-wide logits, is the same shape at every size)."""
STEPS = 2
"""Step 1 creates AdamW's states; step 2 is the steady state every phase is compared at."""
RUN_TIMEOUT_S = 240
"""Per model. On the H200 (2026-11-27) 0.5B and 1.5B took ~214 s together and the 3B alone ~200 s
(building and saving 6 GB of random weights, loading them, 2 steps, saving the final model): the
three stay under the 10-minute limit of one device call."""
VLLM_GPU_MEMORY_UTILIZATION = 0.2
"""vLLM's share when colocated: its weights (≤ 6.2 GB for the 3B in bf16) plus a KV cache of 64
sequences × 288 tokens (≤ 0.7 GiB for the 3B: 36 layers × 2 × 2 KV heads × 128 × 2 bytes per token)
fit in 16 GiB of an 80 GB card, and the 3B's trainer (~58 GiB at its optimizer step, measured on
the H200) keeps room beside it (at 0.3 its plan does not fit an H100)."""
MIB = 1 << 20
NVML_BEFORE_CUDA_ENV = "NVML_USED_BEFORE_CUDA_MIB"
"""NVML's used MiB before anything on the machine initialised CUDA, set by device_run.sh
(`nvidia-smi` as its first command): the driver's own reservation, apart from any CUDA context."""


LORA = {"lora_rank": 32, "lora_alpha": 32, "lora_dropout": 0.05, "lora_targets": list(NOTEBOOK_LORA_TARGETS)}
"""LoRA/QLoRA runs: the adapter TRL's QLoRA notebook (examples/notebooks/grpo_trl_lora_qlora.ipynb)
trains, r 32 on all seven projections, with PEFT's default dropout 0.05 as TRL's ModelConfig sets it."""


def harness_spec(config_file: str, *, gpu: str, engine: str, steps: int, output_dir: str,
                 host_ram_gib: float = 64.0, completion_tokens: int = 256, method: str = "full",
                 optimizer: str = "adamw") -> dict[str, Any]:
    """The spec planned and trained for one model: full fine-tuning (or LoRA/QLoRA with `LORA`),
    AdamW (or bitsandbytes' 8-bit AdamW), one GPU, worst-case lengths reached (random weights
    rarely emit EOS, so completions run to the limit)."""
    rollout: dict[str, Any] = {"engine": engine}
    if engine == "vllm_colocate":
        rollout.update(gpu_memory_utilization=VLLM_GPU_MEMORY_UTILIZATION, tensor_parallel_size=1, sleep_level=0)
    return {
        "model": config_file,
        "hardware": {"gpu": gpu, "gpus_per_node": 1, "num_nodes": 1, "host_ram_gib": host_ram_gib},
        "finetune": {"method": method, **(LORA if method != "full" else {})},
        "precision": "bf16_mixed",
        "optimizer": optimizer,
        "distribution": {"strategy": "ddp"},
        "gradient_checkpointing": True,
        "attention": "sdpa",
        "batch": {"micro_batch_size": 8, "gradient_accumulation_steps": 1, "num_generations": 8},
        "lengths": {"max_prompt_tokens": 32, "max_completion_tokens": completion_tokens},
        "logits": "chunked_head",
        "kl_beta": 0.0,
        "rollout": rollout,
        "train": {
            "build_model": {"seed": 0},
            "data": {"arithmetic": {"num_samples": 256, "max_operand": 9, "seed": 0}},
            "rewards": ["accuracy"],
            "max_steps": steps,
            "save_steps": 0,
            "logging_steps": 1,
            "seed": 0,
            "output_dir": output_dir,
        },
    }


def rows_from_run(model_id: str, engine: str, run_dir: Path) -> list[dict[str, Any]]:
    """gpu-phases.json's rows of one run: per phase the steady-state peaks and the plan recorded
    by the telemetry (`phase_report.steady_phase_peaks`)."""
    return [{"model": model_id, "engine": engine, **row} for row in steady_phase_peaks(read_telemetry(run_dir))]


def nvml_gpu() -> tuple[str, int] | None:
    """GPU 0's name and NVML used bytes, read through NVML (nvidia-ml-py) so this parent process
    never initialises CUDA itself (only its `oomless train` children do); None without a GPU."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            name = pynvml.nvmlDeviceGetName(handle)
            used = int(pynvml.nvmlDeviceGetMemoryInfo(handle).used)
        finally:
            pynvml.nvmlShutdown()
    except pynvml.NVMLError:
        return None
    return (name.decode() if isinstance(name, bytes) else name), used


def nvml_used_before_cuda_bytes(environ: dict[str, str]) -> int | None:
    """device_run.sh's reading of NVML used MiB before any CUDA initialisation, in bytes."""
    value = environ.get(NVML_BEFORE_CUDA_ENV, "").strip().splitlines()
    return int(float(value[0])) * MIB if value and value[0].replace(".", "", 1).isdigit() else None


def _environment(gpu_name: str) -> dict[str, Any]:
    import torch  # the version only: importing torch initialises no CUDA
    import transformers
    import trl

    def version(name: str) -> str | None:
        from importlib.metadata import PackageNotFoundError
        from importlib.metadata import version as installed

        try:
            return installed(name)
        except PackageNotFoundError:
            return None

    return {"gpu": gpu_name, "torch": torch.__version__, "transformers": transformers.__version__,
            "trl": trl.__version__, "vllm": version("vllm"), "peft": version("peft"),
            "bitsandbytes": version("bitsandbytes"), "python": platform.python_version(),
            "date": time.strftime("%Y-%m-%d"), "nvml_used_before_cuda_bytes": nvml_used_before_cuda_bytes(dict(os.environ))}


def gpu_catalog_id(device_name: str) -> str:
    """The catalog GPU for a CUDA device name (``NVIDIA H100 80GB HBM3`` → ``H100-80GB``)."""
    name = device_name.upper()
    for key, gpu in (("H200", "H200"), ("H100", "H100-80GB"), ("H800", "H800-80GB"), ("A100", "A100-80GB"),
                     ("L40S", "L40S"), ("4090", "RTX-4090"), ("A10G", "A10G")):
        if key in name:
            return gpu
    raise SystemExit(f"no catalog GPU for {device_name!r}; add it to catalog/data/gpus.json")


def run_model(model_id: str, out: Path, engine: str, gpu: str, steps: int, *, timeout_s: int = RUN_TIMEOUT_S,
              completion_tokens: int = 256, method: str = "full",
              optimizer: str = "adamw") -> tuple[list[dict[str, Any]], dict | None]:
    """Plan and train one model in ``out/<name>``; the run's files land in ``out/<name>/run`` (the
    spec's output_dir is relative to the working directory, so the run starts there)."""
    import yaml

    work = (out / model_id.split("/")[-1]).resolve()
    config = write_model_config(model_id, work)
    spec = harness_spec(config.name, gpu=gpu, engine=engine, steps=steps, output_dir="run",
                        completion_tokens=completion_tokens, method=method, optimizer=optimizer)
    spec_path = work / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    cmd = [sys.executable, "-c", "from oomless.cli.main import main; main()", "train", str(spec_path), "--force"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False, cwd=work)
    except subprocess.TimeoutExpired as stopped:
        tail = (stopped.stderr or b"")[-400:]
        return [], {"model": model_id, "exit_code": "timeout", "tail": tail.decode(errors="replace") if isinstance(tail, bytes) else tail}
    (work / "train.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0 or not (work / "run" / "summary.json").exists():
        return [], {"model": model_id, "exit_code": done.returncode, "tail": (done.stderr or done.stdout)[-400:]}
    return rows_from_run(model_id, engine, work / "run"), None


def replan_main(results: Path) -> int:
    """--replan: the committed measurements against the current planner; writes gpu-replan.json
    and gpu-phases.md in ``results`` and prints the table."""
    if not (results / "gpu-phases.json").exists():
        print(f"--replan: {results}/gpu-phases.json not found (a folder written by the harness on a GPU)", file=sys.stderr)
        return 2
    rep = report(results, replan=True)
    (results / "gpu-replan.json").write_text(json.dumps(rep, indent=2) + "\n")
    (results / "gpu-phases.md").write_text(markdown(rep))
    print(markdown(rep), end="")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="Folder for specs, runs and gpu-phases.json/.md.")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--engine", choices=("auto", "hf", "vllm_colocate"), default="auto")
    parser.add_argument("--timeout", type=int, default=RUN_TIMEOUT_S, help="Seconds per model.")
    parser.add_argument("--completion-tokens", type=int, default=256)
    parser.add_argument("--method", choices=("full", "lora", "qlora"), default="full",
                        help="Fine-tuning of every model (lora/qlora: the adapter in LORA; qlora needs bitsandbytes).")
    parser.add_argument("--optimizer", choices=("adamw", "adamw_8bit"), default="adamw")
    parser.add_argument("--markdown", type=Path, help="Only render this gpu-phases.json (with the telemetry beside it) as markdown.")
    parser.add_argument("--replan", type=Path, metavar="RESULTS",
                        help="No GPU needed: replan each run in RESULTS (e.g. benchmarks/results/gpu) with the current planner "
                             "against its measurements; writes RESULTS/gpu-replan.json and RESULTS/gpu-phases.md.")
    args = parser.parse_args(argv)
    if args.replan is not None:
        return replan_main(args.replan)
    if args.markdown is not None:
        print(markdown(report(args.markdown.parent, replan=False)), end="")
        return 0
    gpu_now = nvml_gpu()
    if gpu_now is None:
        import torch  # no NVML: ask CUDA (this parent then holds a context during the runs)

        gpu_now = (torch.cuda.get_device_name(0), 0) if torch.cuda.is_available() else None
    if args.out is None or gpu_now is None:
        print("needs --out and a CUDA GPU (the harness's CPU parts are tested in tests/benchmarks)", file=sys.stderr)
        return 2
    engine = args.engine if args.engine != "auto" else (
        "vllm_colocate" if importlib.util.find_spec("vllm") is not None else "hf")
    gpu = gpu_catalog_id(gpu_now[0])
    args.out.mkdir(parents=True, exist_ok=True)
    document: dict[str, Any] = {"environment": _environment(gpu_now[0]), "rows": [], "failures": [],
                                "harness": {"method": args.method, "optimizer": args.optimizer, "engine": engine,
                                            "steps": args.steps, "completion_tokens": args.completion_tokens},
                                "nvml_used_before_model_bytes": {}}
    for model_id in args.models.split(","):
        before = nvml_gpu()
        document["nvml_used_before_model_bytes"][model_id] = before[1] if before else None
        rows, failure = run_model(model_id, args.out, engine, gpu, args.steps, timeout_s=args.timeout,
                                  completion_tokens=args.completion_tokens, method=args.method, optimizer=args.optimizer)
        document["rows"] += rows
        if failure:
            document["failures"].append(failure)
        (args.out / "gpu-phases.json").write_text(json.dumps(document, indent=2))
    table = markdown(report(args.out, replan=False))
    (args.out / "gpu-phases.md").write_text(table)
    print(table)
    return 0 if document["rows"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
