"""Plan every published, measured GPU-memory figure and compare: results.json and docs/published-figures.md.

Usage:
    .venv/bin/python scripts/published_figures.py            # write both files
    .venv/bin/python scripts/published_figures.py --check    # exit 1 if either is out of date

The figure set is tests/published_figures/figures.yaml: per figure its source, a quote, the quantity
it measures, the measured value, the config, and `compare`, the plan number it corresponds to. Each
entry with a `plan` is planned as a user would plan it, `oomless plan [--from FW] FILE [--gpu G]
--json` from tests/published_figures/, in a subprocess. The error is (planned - measured) /
measured. Only `informative: true` figures enter the median; the others are listed with why (and
their plan, where one exists, for reference). Nothing here is fitted: the planner runs unchanged.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
FIGURES_DIR = ROOT / "tests" / "published_figures"
FIGURES = FIGURES_DIR / "figures.yaml"
RESULTS = FIGURES_DIR / "results.json"
DOC = ROOT / "docs" / "published-figures.md"
COMMAND = ".venv/bin/python scripts/published_figures.py"
TIMEOUT_S = 60
GIB = 1024**3

NON_TORCH_COMPONENTS = frozenset({"cuda_context", "nccl", "vllm.non_torch"})
"""Plan components that live outside PyTorch's caching allocator, so outside
torch.cuda.max_memory_reserved(): the CUDA context, NCCL communicators and vLLM's non-torch memory
(the planner's own names, src/oomless/planner/gpu_phases.py). Everything else, allocator slack
included, is memory the allocator reserved."""

COMPONENT_PREFIX = "vllm:"
"""`compare: vllm:KEY` figures are one term of the engine (the plan's `vllm` section), not a GPU
peak; they are summarised apart from the whole-GPU figures."""


@dataclass(frozen=True)
class Result:
    id: str
    informative: bool
    measured_gib: float
    compare: str | None
    quantity: str
    planned_bytes: int | None
    planned_gib: float | None
    error_pct: float | None
    command: str | None
    exit_code: int | None
    problem: str | None


def load_figures(path: Path = FIGURES) -> list[dict[str, Any]]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))["figures"]


def plan_args(plan: dict[str, Any]) -> list[str]:
    """The `oomless plan` arguments of one figure's `plan` block (paths relative to FIGURES_DIR)."""
    args = ["plan"]
    if plan["from"] != "spec":
        args += ["--from", plan["from"]]
    args.append(plan["file"])
    for key, flag in (("gpu", "--gpu"), ("gpus_per_node", "--gpus-per-node"), ("nodes", "--nodes")):
        if key in plan:
            args += [flag, str(plan[key])]
    return args + ["--json"]


def offline_env(empty_cache: str) -> dict[str, str]:
    """The environment the planner runs in: no Hub and an empty HF cache, so every model config
    comes from the catalog oomless ships and the numbers do not depend on the machine."""
    return {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": empty_cache}


def run_plan(plan: dict[str, Any]) -> tuple[int, dict[str, Any] | None, str]:
    """Exit code, the JSON plan (None when the planner refused or crashed), and stderr."""
    with tempfile.TemporaryDirectory(prefix="oomless-published-figures-") as empty_cache:
        proc = subprocess.run([sys.executable, "-m", "oomless", *plan_args(plan)], cwd=FIGURES_DIR,
                              env=offline_env(empty_cache), capture_output=True, text=True,
                              timeout=TIMEOUT_S)
    try:
        document = json.loads(proc.stdout) if proc.returncode in (0, 1) else None
    except json.JSONDecodeError:
        document = None
    return proc.returncode, document, proc.stderr


def _all_phases(document: dict[str, Any]) -> list[dict[str, Any]]:
    gpu = document["gpu"]
    return [p for device in gpu.get("devices", []) for p in device["phases"]] or gpu["phases"]


def _torch_reserved(phase: dict[str, Any]) -> int:
    outside = sum(v for k, v in phase["components"].items() if k in NON_TORCH_COMPONENTS)
    return phase["peak_bytes"] - outside


def planned_bytes(document: dict[str, Any], compare: str) -> int:
    """The plan number a figure's `compare` names (see figures.yaml's header)."""
    if compare == "gpu_peak":
        return int(document["gpu"]["peak_bytes"])
    if compare == "torch_reserved_peak":
        return max(_torch_reserved(p) for p in _all_phases(document))
    if compare.startswith("torch_reserved:"):
        name = compare.split(":", 1)[1]
        phases = [p for p in _all_phases(document) if p["name"] == name]
        if not phases:
            raise ValueError(f"compare {compare!r}: the plan has no phase {name!r}")
        return max(_torch_reserved(p) for p in phases)
    if compare.startswith(COMPONENT_PREFIX):
        engine = document.get("vllm")
        if engine is None:
            raise ValueError(f"compare {compare!r}: the plan has no vLLM engine")
        return int(engine[compare[len(COMPONENT_PREFIX):]])
    raise ValueError(f"compare {compare!r} is not one of gpu_peak, torch_reserved_peak, "
                     "torch_reserved:PHASE, vllm:KEY")


def command_text(plan: dict[str, Any]) -> str:
    return "cd tests/published_figures && ../../.venv/bin/oomless " + " ".join(plan_args(plan))


def evaluate(figure: dict[str, Any]) -> Result:
    plan = figure.get("plan")
    base = dict(id=figure["id"], informative=bool(figure["informative"]),
                measured_gib=float(figure["measured_gib"]), compare=figure.get("compare"),
                quantity=figure["quantity"])
    if plan is None:
        return Result(**base, planned_bytes=None, planned_gib=None, error_pct=None,
                      command=None, exit_code=None, problem=None)
    code, document, stderr = run_plan(plan)
    if document is None:
        last = stderr.strip().splitlines()[-1] if stderr.strip() else f"exit {code}"
        return Result(**base, planned_bytes=None, planned_gib=None, error_pct=None,
                      command=command_text(plan), exit_code=code, problem=last)
    planned = planned_bytes(document, figure["compare"])
    measured = base["measured_gib"] * GIB
    return Result(**base, planned_bytes=planned, planned_gib=round(planned / GIB, 3),
                  error_pct=round(100.0 * (planned - measured) / measured, 1),
                  command=command_text(plan), exit_code=code, problem=None)


def summary(results: list[Result]) -> dict[str, Any]:
    scored = [r for r in results if r.informative and r.error_pct is not None]
    peaks = [r for r in scored if not (r.compare or "").startswith(COMPONENT_PREFIX)]
    components = [r for r in scored if (r.compare or "").startswith(COMPONENT_PREFIX)]

    def median_abs(rs: list[Result]) -> float | None:
        return round(statistics.median(abs(r.error_pct) for r in rs), 1) if rs else None

    return {
        "informative": sum(r.informative for r in results),
        "scored": len(scored),
        "median_abs_error_pct": median_abs(scored),
        "whole_gpu": {"count": len(peaks), "median_abs_error_pct": median_abs(peaks),
                      "median_signed_error_pct": round(statistics.median(r.error_pct for r in peaks), 1) if peaks else None},
        "engine_terms": {"count": len(components), "median_abs_error_pct": median_abs(components)},
        "excluded": sum(not r.informative for r in results),
    }


def results_document(results: list[Result]) -> dict[str, Any]:
    return {"generated_by": COMMAND, "figures_file": "tests/published_figures/figures.yaml",
            "summary": summary(results), "results": [asdict(r) for r in results]}


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _source_link(source: dict[str, Any]) -> str:
    if "path" not in source:
        return f"[{_cell(source['title'])}]({source['url']})"
    label = f"{source['repo']} `{source['path']}`" + (f" L{source['line']}" if "line" in source else "")
    if "tag" in source:
        label += f" ({source['tag']})"
    return f"[{_cell(label)}]({source['url']})"


def _signed(error_pct: float | None) -> str:
    return "not planned" if error_pct is None else f"{error_pct:+.1f} %"


def _gib(value: float | None) -> str:
    return "—" if value is None else f"{value:,.2f}"


def render_doc(figures: list[dict[str, Any]], results: list[Result]) -> str:
    by_id = {r.id: r for r in results}
    s = summary(results)
    lines = [
        "# Published measured figures vs the plan",
        "",
        f"<!-- Generated by `{COMMAND}` from tests/published_figures/figures.yaml; do not edit. -->",
        "",
        "Every GPU-memory figure we found that a framework's docs, example files or notebooks publish as",
        "measured for an RL fine-tuning run, with enough of the run's config to plan it. Each row is",
        "planned unchanged (`oomless plan`, command in results.json); no constant is tuned to these",
        "figures. Error = (planned − measured) / measured. Sources, quotes and configs are in",
        "`tests/published_figures/figures.yaml`; the configs planned are in its `configs/` folder, each",
        "citing the file or notebook cell it restates.",
        "",
        f"**Median absolute error over the {s['scored']} informative figures: "
        f"{s['median_abs_error_pct']} %** "
        f"(whole-GPU figures: {s['whole_gpu']['median_abs_error_pct']} % over {s['whole_gpu']['count']}, "
        f"median signed {s['whole_gpu']['median_signed_error_pct']} %; "
        f"vLLM engine terms: {s['engine_terms']['median_abs_error_pct']} % over {s['engine_terms']['count']}). "
        "Issue 14 aims for ≤ 5 %; the target is not met.",
        "",
        "## Informative figures",
        "",
        "| figure | measured GiB | planned GiB | error | what the figure measures (plan number) | source |",
        "|---|---:|---:|---:|---|---|",
    ]
    for f in figures:
        r = by_id[f["id"]]
        if not f["informative"]:
            continue
        error = "—" if r.error_pct is None else _signed(r.error_pct)
        lines.append(f"| {_cell(f['id'])} | {_gib(r.measured_gib)} | {_gib(r.planned_gib)} | {error} | "
                     f"{_cell(f['quantity'])} (`{f['compare']}`) | {_source_link(f['source'])} |")
    noted = [f for f in figures if f["informative"] and f.get("notes")]
    if noted:
        lines += ["", "## What the misses point at", "",
                  "Read against the frameworks' sources; arithmetic uses the plan's own components. "
                  "Nothing below is applied to the planner.", ""]
        lines += [f"- **{_cell(f['id'])}** ({_signed(by_id[f['id']].error_pct)}): {_cell(f['notes'])}" for f in noted]
    problems = [r for r in results if r.informative and r.problem]
    if problems:
        lines += ["", "Refused by the planner: " + "; ".join(f"{r.id} ({_cell(r.problem)})" for r in problems)]
    lines += ["", "## Excluded figures (not in the statistic)", "",
              "| figure | stated | plan, for reference | why excluded | source |", "|---|---:|---:|---|---|"]
    for f in figures:
        if f["informative"]:
            continue
        r = by_id[f["id"]]
        lines.append(f"| {_cell(f['id'])} | {_cell(f['quote'])} | {_gib(r.planned_gib)} | "
                     f"{_cell(f['excluded'])} | {_source_link(f['source'])} |")
    lines += ["", "## Reading the rows", ""] + NOTES + [""]
    return "\n".join(lines)


NOTES = [
    "- What each `compare` means is defined once, in the header of figures.yaml: `gpu_peak` is the",
    "  busiest GPU's peak with the CUDA context and allocator slack (nvidia-smi style);",
    "  `torch_reserved_*` leaves out the memory outside PyTorch's allocator (CUDA context, NCCL,",
    "  vLLM non-torch), as `torch.cuda.max_memory_reserved()` does; `vllm:KEY` is one term vLLM logs.",
    "- ms-swift's comments (\"# 8 * 65 GiB\") are rounded per-GPU figures with no stated method; they",
    "  are read as nvidia-smi style whole-GPU use. The TRL notebook's \"~X GB VRAM\" comments state no",
    "  quantity either; read the same way (the Qwen2-7B comment, ~9.2, sits a CUDA context above the",
    "  same run's printed 8.832 GiB reserved).",
    "- Where a config leaves the prompt unbounded (TRL 0.26 does not truncate prompts), the config",
    "  file says which bound was planned and why; the plan is the config's worst case, the figure a",
    "  run on real data, so a positive error there is partly the gap between the two.",
    "- The planner is run unchanged; the mechanism errors above are reported, not corrected here.",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if results.json or the doc is out of date")
    args = parser.parse_args(argv)
    figures = load_figures()
    results = [evaluate(f) for f in figures]
    results_text = json.dumps(results_document(results), indent=1, ensure_ascii=False) + "\n"
    doc_text = render_doc(figures, results)
    if args.check:
        stale = [p for p, text in ((RESULTS, results_text), (DOC, doc_text))
                 if not p.exists() or p.read_text(encoding="utf-8") != text]
        for p in stale:
            print(f"out of date: {p.relative_to(ROOT)} (run {COMMAND})", file=sys.stderr)
        return 1 if stale else 0
    RESULTS.write_text(results_text, encoding="utf-8")
    DOC.write_text(doc_text, encoding="utf-8")
    s = summary(results)
    print(f"{s['scored']} informative figures planned; median |error| {s['median_abs_error_pct']} %; "
          f"{s['excluded']} excluded. Wrote {RESULTS.relative_to(ROOT)} and {DOC.relative_to(ROOT)}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
