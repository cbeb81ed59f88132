"""What the GPU harness's telemetry says, per model and phase: the plan against the allocated peak
of the phase at steady state, and per run the plan's largest phase against reserved and NVML memory.

Why allocated, at steady state:
- `torch.cuda.max_memory_reserved` after a reset at a phase's start cannot fall below what the
  caching allocator already holds, and the allocator keeps the blocks of the run's high-water
  mark (the first optimizer step: AdamW states appear there). From then on every phase's reserved
  peak is that mark, whatever the phase needs; it is reported, and compared once per run.
- Step 1 is not steady: AdamW's states are created by the first optimizer step (torch
  `optim/adamw.py` `_init_group`, lazy state), so step 1's rollout and train phases run without
  them. Steps 2 and later hold what every later step holds.

The replan (`replan_phases`) takes the run's committed spec through the code path `oomless train`
takes (`load_run` → `make_plan` → `oomless.train.telemetry.planned_phases` for a CUDA device), so
after a planner change the same measurements are judged against the current plan.

Used by `grpo_phases.py` (beside this file), `scripts/make_validation_doc.py` and
tests/benchmarks/test_gpu_harness.py; nothing here needs a GPU.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

GIB = 1 << 30
FIRST_STEADY_STEP = 2
"""The first optimizer step that starts with AdamW's states resident (see the module doc)."""
TELEMETRY = "telemetry.jsonl"
ROOT = Path(__file__).resolve().parents[2]
PLANNER_SOURCES = ("src/oomless/planner", "src/oomless/memory", "src/oomless/spec", "src/oomless/catalog",
                   "src/oomless/train/telemetry.py")
"""What a plan of these specs is computed from (checked for uncommitted changes when replanning)."""


def write_model_config(model_id: str, folder: Path) -> Path:
    """The catalog's config.json of ``model_id`` (annotations dropped) as ``folder/config.json``."""
    from oomless.catalog.resolve import catalog_config

    config = {k: v for k, v in catalog_config(model_id).items() if not k.startswith("_")}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config.json"
    path.write_text(json.dumps(config, indent=2))
    return path


def run_folder(results: Path, model_id: str) -> Path:
    """Where a model's telemetry is: ``<name>/run`` as the harness leaves it, or ``<name>`` when
    the run's files were moved up beside its spec (as committed)."""
    folder = results / model_id.split("/")[-1]
    return folder / "run" if (folder / "run" / TELEMETRY).exists() else folder


def read_telemetry(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / TELEMETRY
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def error_pct(planned: int | None, measured: int | None) -> float | None:
    """(planned − measured) / measured in %, or None when either side is missing."""
    if not isinstance(planned, int) or not isinstance(measured, int) or measured <= 0:
        return None
    return round(100 * (planned - measured) / measured, 2)


def _max(records: Iterable[dict[str, Any]], key: str) -> int | None:
    values = [r[key] for r in records if isinstance(r.get(key), int)]
    return max(values) if values else None


def steady_phase_peaks(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per phase (in the order first recorded): the steps measured, whether they are steady
    (≥ FIRST_STEADY_STEP; a phase without such steps, e.g. load, uses its first step), and the
    largest allocated, reserved and NVML bytes and the recorded plan over those steps, with the
    allocated peak of the phase's first step beside them."""
    phases: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        phases.setdefault(record.get("phase", "?"), []).append(record)
    out = []
    for phase, recs in phases.items():
        steps = sorted({r["step"] for r in recs})
        steady = [s for s in steps if s >= FIRST_STEADY_STEP]
        chosen = steady or steps[:1]
        used = [r for r in recs if r["step"] in chosen]
        first = [r for r in recs if r["step"] == steps[0]]
        allocated = _max(used, "peak_allocated_bytes")
        planned = _max(used, "planned_bytes")
        out.append({
            "phase": phase, "steps": chosen, "steady": bool(steady),
            "allocated_peak_bytes": allocated, "reserved_peak_bytes": _max(used, "peak_bytes"),
            "nvml_used_bytes": _max(used, "gpu_used_bytes"),
            "first_step": steps[0], "first_step_allocated_bytes": _max(first, "peak_allocated_bytes"),
            "plan_at_run_bytes": planned, "plan_at_run_total_bytes": _max(used, "planned_total_bytes"),
            "error_at_run_pct": error_pct(planned, allocated),
        })
    return out


def run_peaks(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The whole run: its largest allocated, reserved and NVML bytes over every step and phase,
    and the recorded plan's largest phase (as reserved memory sees it, and whole)."""
    return {
        "max_allocated_bytes": _max(records, "peak_allocated_bytes"),
        "max_reserved_bytes": _max(records, "peak_bytes"),
        "max_nvml_used_bytes": _max(records, "gpu_used_bytes"),
        "plan_at_run_peak_bytes": _max(records, "planned_bytes"),
        "plan_at_run_peak_total_bytes": _max(records, "planned_total_bytes"),
    }


def replan_phases(spec_path: Path, model_id: str) -> dict[str, dict[str, int]]:
    """Each phase's planned bytes for the spec at ``spec_path`` with the current planner, as
    `oomless train` computes them for its telemetry on a CUDA device (`load_run`, `make_plan`,
    `planned_phases`); the spec's ``model: config.json`` is rewritten from the catalog."""
    from oomless.planner.plan import make_plan
    from oomless.spec.load import load_run
    from oomless.train.telemetry import planned_phases

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_model_config(model_id, folder)
        shutil.copyfile(spec_path, folder / "spec.yaml")
        run = load_run(folder / "spec.yaml")
        plan = make_plan(run.spec, run.arch, run.gpu, run.archs)
    return {name: {"planned_bytes": p.planned_bytes, "planned_total_bytes": p.planned_total_bytes}
            for name, p in planned_phases(plan, "cuda").items()}


def planner_identity() -> dict[str, Any]:
    """Which planner replanned: the repository's commit and whether the planner's sources had
    uncommitted changes then."""
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    dirty = git("status", "--porcelain", "--", *PLANNER_SOURCES)
    return {"commit": git("rev-parse", "--short=12", "HEAD"), "uncommitted_changes": bool(dirty) if dirty is not None else None,
            "replanned_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def model_report(model_id: str, engine: str, run_dir: Path, replanned: dict[str, dict[str, int]] | None) -> dict[str, Any]:
    """One model's phase rows and run row; with ``replanned``, the current plan beside the recorded one."""
    records = read_telemetry(run_dir)
    phases = steady_phase_peaks(records)
    run = run_peaks(records)
    if replanned is not None:
        for row in phases:
            now = replanned.get(row["phase"], {})
            row["plan_now_bytes"] = now.get("planned_bytes")
            row["plan_now_total_bytes"] = now.get("planned_total_bytes")
            row["error_now_pct"] = error_pct(row["plan_now_bytes"], row["allocated_peak_bytes"])
        measured = {row["phase"] for row in phases}
        run["plan_now_peak_bytes"] = max((p["planned_bytes"] for n, p in replanned.items() if n in measured), default=None)
        run["plan_now_peak_total_bytes"] = max((p["planned_total_bytes"] for n, p in replanned.items() if n in measured), default=None)
    side = "now" if replanned is not None else "at_run"
    run["error_vs_reserved_pct"] = error_pct(run[f"plan_{side}_peak_bytes"], run["max_reserved_bytes"])
    run["error_vs_nvml_pct"] = error_pct(run[f"plan_{side}_peak_total_bytes"], run["max_nvml_used_bytes"])
    return {"model": model_id, "engine": engine, "phases": phases, "run": run}


def read_spec(spec_path: Path) -> dict[str, Any] | None:
    import yaml

    return yaml.safe_load(spec_path.read_text()) if spec_path.exists() else None


def models_of(document: dict[str, Any]) -> list[tuple[str, str]]:
    """(model, engine) of every model the harness's document has rows for, in row order."""
    seen: dict[str, str] = {}
    for row in document.get("rows", []):
        seen.setdefault(row["model"], row.get("engine", "?"))
    return list(seen.items())


def report(results: Path, *, replan: bool) -> dict[str, Any]:
    """The report of a harness folder (its gpu-phases.json, and per model spec.yaml and telemetry)."""
    document = json.loads((results / "gpu-phases.json").read_text())
    models = []
    for model_id, engine in models_of(document):
        spec_path = results / model_id.split("/")[-1] / "spec.yaml"
        replanned = replan_phases(spec_path, model_id) if replan else None
        models.append({**model_report(model_id, engine, run_folder(results, model_id), replanned), "spec": read_spec(spec_path)})
    out = {"environment": document.get("environment", {}), "runs": document.get("runs", []),
           "failures": document.get("failures", []), "models": models}
    if replan:
        out["planner"] = planner_identity()
    return out


def gib(value: Any) -> str:
    return f"{value / GIB:.2f} GiB" if isinstance(value, int) else "—"


def pct(value: Any) -> str:
    return f"{round(value, 1) + 0.0:+.1f} %" if isinstance(value, (int, float)) else "—"  # + 0.0: no "-0.0"


def steps_label(row: dict[str, Any]) -> str:
    steps = row["steps"]
    label = str(steps[0]) if len(steps) == 1 else f"{steps[0]}–{steps[-1]}"
    return label if row["steady"] else f"{label} (only)"


def environment_line(env: dict[str, Any]) -> str:
    nvml = env.get("nvml_used_before_cuda_bytes")
    before = f"; NVML used before any CUDA initialisation {gib(nvml)}" if isinstance(nvml, int) else ""
    return (f"{env.get('device') or env.get('gpu', '?')}; torch {env.get('torch', '?')}, transformers "
            f"{env.get('transformers', '?')}, trl {env.get('trl', '?')}, datasets {env.get('datasets', '?')}, "
            f"Python {env.get('python', '?')}, vLLM {env.get('vllm') or 'not installed (rollout by HF generation)'}; "
            f"recorded {env.get('date', '?')}{before}.")


READING = [
    "- **allocated (steady)**: `torch.cuda.max_memory_allocated` after a reset at the phase's start, the "
    "largest over steps ≥ 2 (step 1 runs before AdamW's states exist: they appear in its optimizer phase); a "
    "phase measured only once (load) uses that step, marked *(only)*. **step 1 allocated** is the first "
    "step's figure, for comparison.",
    "- **error** = (plan − allocated) / allocated. The plan's side is `planned_bytes`: the phase peak less "
    "what the allocator cannot see (CUDA context, NCCL), fragmentation kept.",
    "- **reserved** (`max_memory_reserved` after the same reset) never falls below what the caching "
    "allocator holds, and it keeps the blocks of the run's high-water mark (step 1's optimizer phase) for "
    "the rest of the run: from step 2 on, every phase reads that mark. It says nothing about one phase; "
    "it is compared once per run below.",
    "- **Run**: the plan's largest phase peak against the run's largest reserved bytes, and the whole "
    "phase peak (`planned_total_bytes`, with the CUDA context) against the largest NVML used bytes "
    "(every process on the GPU, the driver's own reservation included).",
]


def markdown(rep: dict[str, Any]) -> str:
    """gpu-phases.md: the phase table and the run table of a report (with the current plan when replanned)."""
    now = "planner" in rep
    planner = rep.get("planner", {})
    lines = ["# GPU validation: TRL GRPO phases against the plan", "",
             f"Machine: {environment_line(rep.get('environment', {}))}", ""]
    for run in rep.get("runs", []):
        lines.append(f"- `{run['command']}` ({', '.join(run.get('models', []))})" + (f": {run['note']}" if run.get("note") else ""))
    if now:
        lines += ["", f"Plan now: replanned from each run's spec.yaml at commit {planner.get('commit')}"
                  f"{' with uncommitted planner changes' if planner.get('uncommitted_changes') else ''} "
                  f"({planner.get('replanned_at')}) by `python benchmarks/gpu/grpo_phases.py --replan benchmarks/results/gpu`. "
                  "Plan at run: what the telemetry recorded when the run was made."]
    lines += ["", *READING, "",
              "| model | engine | phase | steps | " + ("plan now | error now | " if now else "")
              + "plan at run | error at run | allocated (steady) | step 1 allocated | reserved | NVML used |",
              "|---|---|---|---|" + ("---:|---:|" if now else "") + "---:|---:|---:|---:|---:|---:|"]
    for m in rep.get("models", []):
        for r in m["phases"]:
            cells = [m["model"], m["engine"], r["phase"], steps_label(r)]
            if now:
                cells += [gib(r.get("plan_now_bytes")), pct(r.get("error_now_pct"))]
            cells += [gib(r["plan_at_run_bytes"]), pct(r["error_at_run_pct"]), gib(r["allocated_peak_bytes"]),
                      gib(r["first_step_allocated_bytes"]), gib(r["reserved_peak_bytes"]), gib(r["nvml_used_bytes"])]
            lines.append("| " + " | ".join(cells) + " |")
    side = "now" if now else "at_run"
    lines += ["", f"Run level (plan {'now' if now else 'at run'}):", "",
              "| model | plan peak | max allocated | max reserved | error vs reserved | plan peak with CUDA context | max NVML used | error vs NVML |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for m in rep.get("models", []):
        r = m["run"]
        lines.append(f"| {m['model']} | {gib(r[f'plan_{side}_peak_bytes'])} | {gib(r['max_allocated_bytes'])} | "
                     f"{gib(r['max_reserved_bytes'])} | {pct(r['error_vs_reserved_pct'])} | "
                     f"{gib(r[f'plan_{side}_peak_total_bytes'])} | {gib(r['max_nvml_used_bytes'])} | {pct(r['error_vs_nvml_pct'])} |")
    for failure in rep.get("failures", []):
        lines.append(f"\n- {failure['model']}: exit {failure['exit_code']}: {failure['tail']}")
    return "\n".join(lines) + "\n"
