"""How fast `oomless plan` answers: the whole process, and the planning call alone.

Targets (the speed issue): the whole `oomless plan SPEC --json` process ≤ 0.5 s, one
`make_plan` call ≤ 5 ms. This is a benchmark, not a test: it records figures with the machine,
versions and command, and never fails a build.

Usage (from the repository root, with the venv's interpreter):
    .venv/bin/python benchmarks/bench_plan.py
    .venv/bin/python benchmarks/bench_plan.py --spec examples/seeds/s1-after.yaml --runs 50

Writes benchmarks/results/plan-speed.json and benchmarks/results/plan-speed.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
TARGET_PROCESS_S = 0.5
TARGET_PLAN_CALL_MS = 5.0
PACKAGES = ("oomless", "pydantic", "pydantic_core", "typer", "rich", "PyYAML")


def summary(seconds: list[float], unit: float) -> dict[str, float]:
    """min/median/p90/max of the samples, in seconds × ``unit`` (1 for s, 1e3 for ms)."""
    ordered = sorted(seconds)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return {
        "min": ordered[0] * unit, "median": statistics.median(ordered) * unit,
        "p90": p90 * unit, "max": ordered[-1] * unit, "samples": len(ordered),
    }


def oomless_script() -> Path:
    script = Path(sys.executable).with_name("oomless")
    if not script.exists():
        sys.exit(f"error: no `oomless` console script next to {sys.executable}; run with the venv's python")
    return script


def time_process(argv: list[str], runs: int, warmups: int) -> list[float]:
    """Wall time of the whole process (interpreter start, imports, plan, JSON out)."""
    samples = []
    for i in range(warmups + runs):
        start = time.perf_counter()
        done = subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
        elapsed = time.perf_counter() - start
        if done.returncode not in (0, 1):
            sys.exit(f"error: {' '.join(argv)} exited {done.returncode}: {done.stderr.decode().strip()}")
        if i >= warmups:
            samples.append(elapsed)
    return samples


def time_calls(fn: Callable[[], Any], calls: int, warmups: int) -> list[float]:
    """Wall time of each of ``calls`` calls to ``fn`` in this process, after ``warmups`` calls."""
    for _ in range(warmups):
        fn()
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def in_process_timings(spec: Path, calls: int) -> dict[str, dict[str, float]]:
    from oomless.planner.plan import make_plan
    from oomless.planner.report import plan_to_dict
    from oomless.spec.load import load_run

    run = load_run(spec)
    plan_only = time_calls(lambda: make_plan(run.spec, run.arch, run.gpu, run.archs), calls, warmups=20)

    def whole_pipeline() -> dict[str, Any]:
        r = load_run(spec)
        return plan_to_dict(make_plan(r.spec, r.arch, r.gpu), r.warnings)

    pipeline = time_calls(whole_pipeline, calls, warmups=20)
    return {"make_plan_ms": summary(plan_only, 1e3), "load_resolve_plan_report_ms": summary(pipeline, 1e3)}


def _first(path: str, key: str) -> str | None:
    try:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            if line.startswith(key):
                return line.split(":" if ":" in line else "=", 1)[1].strip().strip('"')
    except OSError:
        return None
    return None


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    return done.stdout.strip()


def environment() -> dict[str, Any]:
    mem_kib = _first("/proc/meminfo", "MemTotal")
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "cpu_model": _first("/proc/cpuinfo", "model name") or platform.processor(),
        "num_cpu_cores": os.cpu_count(),
        "ram_gib": round(int(mem_kib.split()[0]) / 2**20, 1) if mem_kib else None,
        "os": _first("/etc/os-release", "PRETTY_NAME") or platform.system(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "packages": versions,
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty_paths": _git("status", "--porcelain").splitlines(),
    }


def markdown(doc: dict[str, Any]) -> str:
    env, proc = doc["environment"], doc["whole_process_s"]
    plan, pipe = doc["in_process"]["make_plan_ms"], doc["in_process"]["load_resolve_plan_report_ms"]
    versions = ", ".join(f"{k} {v}" for k, v in env["packages"].items())
    base, imports = doc["context_s"]["python_startup"], doc["context_s"]["import_cli"]
    dirty = f" plus uncommitted changes: {', '.join(env['git_dirty_paths'])}" if env["git_dirty_paths"] else ""
    verdict = lambda ok: "meets" if ok else "MISSES"  # noqa: E731
    return f"""# `oomless plan` speed

Recorded {doc['recorded_at']} by `{doc['command']}`.

| | min | median | p90 | max | samples | target |
|---|---|---|---|---|---|---|
| whole process `{' '.join(doc['process_argv'])}` (s) | {proc['min']:.3f} | {proc['median']:.3f} | {proc['p90']:.3f} | {proc['max']:.3f} | {proc['samples']} | ≤ {TARGET_PROCESS_S} s: {verdict(doc['meets_targets']['whole_process'])} |
| `make_plan(spec, arch, gpu)`, resolved run (ms) | {plan['min']:.3f} | {plan['median']:.3f} | {plan['p90']:.3f} | {plan['max']:.3f} | {plan['samples']} | ≤ {TARGET_PLAN_CALL_MS} ms: {verdict(doc['meets_targets']['make_plan'])} |
| `load_run` + `make_plan` + `plan_to_dict` (ms) | {pipe['min']:.3f} | {pipe['median']:.3f} | {pipe['p90']:.3f} | {pipe['max']:.3f} | {pipe['samples']} | — |
| context: `python -c pass` (s) | {base['min']:.3f} | {base['median']:.3f} | {base['p90']:.3f} | {base['max']:.3f} | {base['samples']} | — |
| context: `python -c "import oomless.cli.main"` (s) | {imports['min']:.3f} | {imports['median']:.3f} | {imports['p90']:.3f} | {imports['max']:.3f} | {imports['samples']} | — |

Whole process: {doc['config']['warmups']} warm-up runs, then {doc['config']['runs']} timed runs of the installed
console script (wall time from `subprocess.run`, stdout discarded). In-process: each call timed
with `time.perf_counter`, after 20 warm-up calls. Spec: `{doc['config']['spec']}`.

Machine: {env['cpu_model']}, {env['num_cpu_cores']} cores, {env['ram_gib']} GiB RAM; {env['os']} (kernel {env['kernel']}).
Python {env['python']}; {versions}.
Commit {env['git_commit']}{dirty}.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", default="examples/quickstart.yaml", help="Run spec to plan (default: the quickstart).")
    parser.add_argument("--runs", type=int, default=20, help="Timed whole-process runs (default 20).")
    parser.add_argument("--warmups", type=int, default=2, help="Untimed whole-process runs first (default 2).")
    parser.add_argument("--calls", type=int, default=2000, help="Timed in-process calls (default 2000).")
    parser.add_argument("--out", type=Path, default=RESULTS, help="Directory for plan-speed.json/.md.")
    args = parser.parse_args()

    spec = (ROOT / args.spec).resolve()
    argv = [str(oomless_script()), "plan", str(spec.relative_to(ROOT)), "--json"]
    process = summary(time_process(argv, args.runs, args.warmups), 1.0)
    context = {
        "python_startup": summary(time_process([sys.executable, "-c", "pass"], args.runs, args.warmups), 1.0),
        "import_cli": summary(time_process([sys.executable, "-c", "import oomless.cli.main"], args.runs, args.warmups), 1.0),
    }
    in_process = in_process_timings(spec, args.calls)
    doc = {
        "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([os.path.relpath(sys.executable, Path.cwd()), *sys.argv]),
        "process_argv": ["oomless", *argv[1:]],
        "config": {"spec": str(spec.relative_to(ROOT)), "runs": args.runs, "warmups": args.warmups, "calls": args.calls},
        "whole_process_s": process,
        "in_process": in_process,
        "context_s": context,
        "targets": {"whole_process_s": TARGET_PROCESS_S, "make_plan_ms": TARGET_PLAN_CALL_MS},
        "meets_targets": {
            "whole_process": process["median"] <= TARGET_PROCESS_S,
            "make_plan": in_process["make_plan_ms"]["median"] <= TARGET_PLAN_CALL_MS,
        },
        "environment": environment(),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "plan-speed.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    (args.out / "plan-speed.md").write_text(markdown(doc), encoding="utf-8")
    print(markdown(doc))


if __name__ == "__main__":
    main()
