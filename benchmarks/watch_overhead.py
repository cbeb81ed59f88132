"""CPU cost of `oomless watch` sampling a job (issue 18 target: < 1 % of one core at 1 Hz).

The watched job is a process tree like a training launch: one parent that starts
`--children` child processes (the ranks), holds a little memory, and prints `step N` once a
second. The watcher runs in this process (`oomless.watch.session.run_job`, the code
`oomless watch -- COMMAND` runs); its CPU time is `time.process_time()` over the watch (user +
system of every thread of this process: the sampling loop and the thread copying the job's
output; the job's own CPU is not included), divided by the wall time. Sampled with RSS (the
default) and with `--pss` (reads /proc/PID/smaps_rollup per process), at 1 Hz and, for
context, at 10 Hz. The one-time start-up of the command (`python -m oomless watch -- true`) is
timed apart. No GPU: NVML is absent here, so these figures are the host probe's; an NVML read
per GPU adds to them on a GPU machine (not measured here). A benchmark, not a test: it fails
nothing.

Usage (from the repository root):
    .venv/bin/python benchmarks/watch_overhead.py                 # 60 s per configuration
    .venv/bin/python benchmarks/watch_overhead.py --seconds 20 --children 4

Writes benchmarks/results/watch-overhead.json and benchmarks/results/watch-overhead.md.
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_plan import RESULTS, environment  # noqa: E402

from oomless.watch.session import WatchOptions, run_job  # noqa: E402

TARGET_CORE_FRACTION = 0.01
JOB = """
import subprocess, sys, time
children = [subprocess.Popen([sys.executable, "-c", "import time; x = bytearray(32 << 20); time.sleep({seconds} + 30)"])
            for _ in range({children})]
held = bytearray(64 << 20)
for step in range(1, {seconds} + 1):
    print(f"step {{step}}", flush=True)
    time.sleep(1)
for child in children:
    child.kill()
"""


def watch_cost(seconds: int, children: int, interval_s: float, pss: bool) -> dict[str, Any]:
    command = [sys.executable, "-c", JOB.format(seconds=seconds, children=children)]
    with tempfile.TemporaryDirectory() as out:
        options = WatchOptions(out_dir=Path(out), interval_s=interval_s, pss=pss)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        result = run_job(command, options, lambda line: None, sink=io.StringIO())
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    samples = round(wall / interval_s)
    return {"interval_s": interval_s, "pss": pss, "children": children, "wall_s": round(wall, 2),
            "cpu_s": round(cpu, 4), "core_fraction": cpu / wall, "approx_samples": samples,
            "cpu_ms_per_sample": 1000 * cpu / max(1, samples), "steps_seen": result.steps, "exit_code": result.exit_code}


def startup_cost(runs: int = 3) -> dict[str, float]:
    walls = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as out:
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "oomless", "watch", "--out", out, "--", "true"],
                           capture_output=True, check=True)
            walls.append(time.perf_counter() - t0)
    return {"min_s": round(min(walls), 3), "max_s": round(max(walls), 3), "runs": runs}


def markdown(doc: dict[str, Any]) -> str:
    env = doc["environment"]
    versions = ", ".join(f"{k} {v}" for k, v in env["packages"].items())
    rows = "\n".join(
        f"| {r['interval_s']:g} s | {'PSS' if r['pss'] else 'RSS'} | 1 + {r['children']} | {r['wall_s']} | {r['cpu_s']} | "
        f"{100 * r['core_fraction']:.3f} % | {r['cpu_ms_per_sample']:.2f} |"
        for r in doc["runs"]
    )
    one_hz = [r for r in doc["runs"] if r["interval_s"] == 1.0]
    verdict = "meets" if all(r["core_fraction"] < TARGET_CORE_FRACTION for r in one_hz) else "MISSES"
    return f"""# `oomless watch` overhead

Recorded {doc['recorded_at']} by `{doc['command']}`.
Target: sampling at 1 Hz costs < {100 * TARGET_CORE_FRACTION:g} % of one core — **{verdict}**.

| interval | tree memory | processes | wall (s) | watcher CPU (s) | of one core | CPU ms per sample |
|---|---|---|---|---|---|---|
{rows}

One-time start-up of `python -m oomless watch --out DIR -- true` (wall, {doc['startup']['runs']} runs):
{doc['startup']['min_s']}–{doc['startup']['max_s']} s.

Machine: {env['cpu_model']}, {env['num_cpu_cores']} cores, {env['ram_gib']} GiB RAM, {env['os']}, kernel {env['kernel']},
Python {env['python']}; {versions}; psutil {doc['psutil']}; NVML: {doc['nvml']}.
Commit {env['git_commit']}.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--children", type=int, default=8)
    args = parser.parse_args()
    import psutil

    from oomless.watch.sample import GpuProbe

    runs = [watch_cost(args.seconds, args.children, interval, pss)
            for interval, pss in ((1.0, False), (1.0, True), (0.1, False))]
    doc = {
        "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "config": vars(args), "runs": runs, "startup": startup_cost(),
        "psutil": psutil.__version__, "nvml": GpuProbe.open()[1], "environment": environment(),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "watch-overhead.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    (RESULTS / "watch-overhead.md").write_text(markdown(doc), encoding="utf-8")
    print(markdown(doc))


if __name__ == "__main__":
    main()
