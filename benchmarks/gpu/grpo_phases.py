"""GPU validation harness (issue 14): real TRL GRPO steps on one GPU, three model sizes, the
measured peak of every phase against the plan, in one command.

    python benchmarks/gpu/grpo_phases.py --out benchmarks/results/gpu        # on a CUDA machine
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
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

MODELS = ("Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-1.5B-Instruct", "Qwen/Qwen2.5-3B-Instruct")
"""Three sizes of one family (tied and untied embeddings: 0.5B/1.5B/3B tie, so the family's
largest term, the vocabulary-wide logits, is the same shape at every size)."""
STEPS = 3
RUN_TIMEOUT_S = 170
"""Per model, so three models stay under the 10-minute budget of one device call."""
GIB = 1 << 30


def harness_spec(config_file: str, *, gpu: str, engine: str, steps: int, output_dir: str,
                 host_ram_gib: float = 64.0, completion_tokens: int = 256) -> dict[str, Any]:
    """The spec planned and trained for one model: full fine-tuning, AdamW, one GPU, worst-case
    lengths reached (random weights rarely emit EOS, so completions run to the limit)."""
    rollout: dict[str, Any] = {"engine": engine}
    if engine == "vllm_colocate":
        rollout.update(gpu_memory_utilization=0.3, tensor_parallel_size=1, sleep_level=0)
    return {
        "model": config_file,
        "hardware": {"gpu": gpu, "gpus_per_node": 1, "num_nodes": 1, "host_ram_gib": host_ram_gib},
        "finetune": {"method": "full"},
        "precision": "bf16_mixed",
        "optimizer": "adamw",
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


def write_model_config(model_id: str, folder: Path) -> Path:
    """The catalog's config.json of ``model_id`` (annotations dropped) as ``folder/config.json``."""
    from oomless.catalog.resolve import catalog_config

    config = {k: v for k, v in catalog_config(model_id).items() if not k.startswith("_")}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config.json"
    path.write_text(json.dumps(config, indent=2))
    return path


def rows_from_run(model_id: str, engine: str, run_dir: Path) -> list[dict[str, Any]]:
    """Plan-vs-measured rows of one run: the summary's per-phase peaks (max over steps) with
    the largest allocated and NVML bytes of that phase from the telemetry."""
    summary = json.loads((run_dir / "summary.json").read_text())
    extra: dict[str, dict[str, int]] = {}
    telemetry = run_dir / "telemetry.jsonl"
    for line in telemetry.read_text().splitlines() if telemetry.exists() else ():
        record = json.loads(line)
        phase = extra.setdefault(record.get("phase", "?"), {})
        for key in ("peak_allocated_bytes", "gpu_used_bytes", "planned_total_bytes"):
            if isinstance(record.get(key), int):
                phase[key] = max(phase.get(key, 0), record[key])
    rows = []
    for row in summary.get("plan_vs_actual", []):
        more = extra.get(row["phase"], {})
        planned, peak = row.get("planned_bytes"), row.get("peak_bytes")
        rows.append({
            "model": model_id, "engine": engine, "phase": row["phase"],
            "planned_bytes": planned, "reserved_peak_bytes": peak,
            "allocated_peak_bytes": more.get("peak_allocated_bytes"),
            "nvml_used_bytes": more.get("gpu_used_bytes"),
            "planned_total_bytes": more.get("planned_total_bytes"),
            "error_pct": round(100 * (planned - peak) / peak, 2) if planned and peak else None,
            "steps": row.get("num_steps"),
        })
    return rows


def markdown(document: dict[str, Any]) -> str:
    """The committed table: per model and phase, plan vs measured reserved bytes."""
    env = document.get("environment", {})
    lines = [
        "# GPU validation: TRL GRPO phases against the plan",
        "",
        f"Machine: {env.get('gpu', '?')}; torch {env.get('torch', '?')}, transformers {env.get('transformers', '?')}, "
        f"trl {env.get('trl', '?')}, vLLM {env.get('vllm') or 'not installed (HF generation)'}; "
        f"recorded {env.get('date', '?')} by `python benchmarks/gpu/grpo_phases.py`.",
        "",
        "Error = (planned − measured) / measured, measured = `torch.cuda.max_memory_reserved` after a reset at "
        "the phase's start (max over steps); planned = the plan's phase peak less what reserved memory cannot see "
        "(CUDA context, NCCL). NVML includes the CUDA context.",
        "",
        "| model | engine | phase | planned | reserved peak | allocated peak | NVML used | error |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]

    def gib(v: Any) -> str:
        return f"{v / GIB:.2f} GiB" if isinstance(v, int) else "—"

    for r in document.get("rows", []):
        err = f"{r['error_pct']:+.1f} %" if r.get("error_pct") is not None else "—"
        lines.append(f"| {r['model']} | {r['engine']} | {r['phase']} | {gib(r['planned_bytes'])} | "
                     f"{gib(r['reserved_peak_bytes'])} | {gib(r['allocated_peak_bytes'])} | {gib(r['nvml_used_bytes'])} | {err} |")
    for failure in document.get("failures", []):
        lines.append(f"\n- {failure['model']}: exit {failure['exit_code']}: {failure['tail']}")
    return "\n".join(lines) + "\n"


def _environment() -> dict[str, Any]:
    import torch
    import transformers
    import trl

    vllm = None
    if importlib.util.find_spec("vllm") is not None:
        import vllm as vllm_module

        vllm = vllm_module.__version__
    return {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "transformers": transformers.__version__,
            "trl": trl.__version__, "vllm": vllm, "python": platform.python_version(),
            "date": time.strftime("%Y-%m-%d")}


def gpu_catalog_id(device_name: str) -> str:
    """The catalog GPU for a CUDA device name (``NVIDIA H100 80GB HBM3`` → ``H100-80GB``)."""
    name = device_name.upper()
    for key, gpu in (("H200", "H200"), ("H100", "H100-80GB"), ("H800", "H800-80GB"), ("A100", "A100-80GB"),
                     ("L40S", "L40S"), ("4090", "RTX-4090"), ("A10G", "A10G")):
        if key in name:
            return gpu
    raise SystemExit(f"no catalog GPU for {device_name!r}; add it to catalog/data/gpus.json")


def run_model(model_id: str, out: Path, engine: str, gpu: str, steps: int, *, timeout_s: int = RUN_TIMEOUT_S,
              completion_tokens: int = 256) -> tuple[list[dict[str, Any]], dict | None]:
    """Plan and train one model in ``out/<name>``; the run's files land in ``out/<name>/run`` (the
    spec's output_dir is relative to the working directory, so the run starts there)."""
    import yaml

    work = (out / model_id.split("/")[-1]).resolve()
    config = write_model_config(model_id, work)
    spec = harness_spec(config.name, gpu=gpu, engine=engine, steps=steps, output_dir="run",
                        completion_tokens=completion_tokens)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="Folder for specs, runs and gpu-phases.json/.md.")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--engine", choices=("auto", "hf", "vllm_colocate"), default="auto")
    parser.add_argument("--timeout", type=int, default=RUN_TIMEOUT_S, help="Seconds per model.")
    parser.add_argument("--completion-tokens", type=int, default=256)
    parser.add_argument("--markdown", type=Path, help="Only render this gpu-phases.json as markdown.")
    args = parser.parse_args(argv)
    if args.markdown is not None:
        print(markdown(json.loads(args.markdown.read_text())), end="")
        return 0
    import torch

    if args.out is None or not torch.cuda.is_available():
        print("needs --out and a CUDA GPU (the harness's CPU parts are tested in tests/benchmarks)", file=sys.stderr)
        return 2
    engine = args.engine if args.engine != "auto" else (
        "vllm_colocate" if importlib.util.find_spec("vllm") is not None else "hf")
    gpu = gpu_catalog_id(torch.cuda.get_device_name(0))
    args.out.mkdir(parents=True, exist_ok=True)
    document: dict[str, Any] = {"environment": _environment(), "rows": [], "failures": []}
    for model_id in args.models.split(","):
        rows, failure = run_model(model_id, args.out, engine, gpu, args.steps, timeout_s=args.timeout,
                                  completion_tokens=args.completion_tokens)
        document["rows"] += rows
        if failure:
            document["failures"].append(failure)
        (args.out / "gpu-phases.json").write_text(json.dumps(document, indent=2))
    (args.out / "gpu-phases.md").write_text(markdown(document))
    print(markdown(document))
    return 0 if document["rows"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
