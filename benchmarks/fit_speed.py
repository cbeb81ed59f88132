"""How fast `oomless fit` evaluates candidate configurations, and how long a whole fit takes.

Targets: ≥ 10,000 candidate configurations evaluated in ≤ 1 s (issue 7); `fit` on the largest
seed answers in ≤ 1 s (issue 16: the seed whose search spans the most configurations, fitted in
a fresh process so that no cache of an earlier fit helps). Evaluating a
configuration means what `fit` ranks by: predicting its slack on every memory constraint (each
GPU phase of each device group, vLLM's start-up checks, each host phase), deciding whether it
fits with the margin, and predicting its step time. This is a benchmark, not a test: it records
figures with the machine, versions and command, and never fails a build.

It measures, per spec:
- region build: the `make_plan` probes of one region (the fast path's one-time cost);
- evaluator: N random configurations of that region evaluated through the additive fast path
  (`fit.probe.Region`), and the same N through `make_plan` for comparison (a sample, scaled);
- whole fit: `fit_file` end to end (all layouts, re-checks), with the number of configurations
  its regions span and how many it evaluated explicitly; wall and CPU (process) seconds, the
  first run of the process apart from the later ones;
- fresh process: `fit_file` timed inside new interpreters (imports excluded), the minimum and
  median over runs: what one `oomless fit` costs once Python is up;
- source trees compared (`--commits`, the working tree by default): per spec, in-process CPU
  and wall of `fit_file` in fresh interpreters, the first fit of each (cold: the caches of
  memoised terms empty) and a second one (warm), best of 5; and the whole `oomless fit SPEC`
  process (`python -m oomless`, start-up included), wall and CPU, best of 5.

On a shared machine wall time includes waiting for a core; CPU seconds do not (they still grow
somewhat under contention), and the load average at start and end is recorded.

Usage (from the repository root, with the venv's interpreter):
    .venv/bin/python benchmarks/fit_speed.py
    .venv/bin/python benchmarks/fit_speed.py --configs 20000 --specs examples/seeds/s1-before.yaml
    .venv/bin/python benchmarks/fit_speed.py --commits 1fa0d4a HEAD   # before / after, each from `git archive`

Writes benchmarks/results/fit-speed.json and benchmarks/results/fit-speed.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import resource
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_plan import RESULTS, ROOT, environment  # noqa: E402

TARGET_CONFIGS = 10_000
TARGET_SECONDS = 1.0
DEFAULT_SPECS = ("examples/seeds/s2-before.yaml", "examples/seeds/s1-before.yaml", "examples/seeds/s0-before.yaml",
                 "examples/seeds/s4-before.yaml", "examples/seeds/s3-before.yaml", "examples/quickstart.yaml")
FRESH_RUNS = 5
FRESH_SCRIPT = """
import json, sys, time
from oomless.fit.search import FitOptions, fit_file
from oomless.fit.probe import Margin
out = []
for _ in range(int(sys.argv[2])):
    wall, cpu = time.perf_counter(), time.process_time()
    fit_file(sys.argv[1], FitOptions(margin=Margin(fraction=0.05)))
    out.append({"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu})
print(json.dumps(out))
"""
COMPARED_SPECS = tuple(f"examples/seeds/s{i}-{w}.yaml" for i in range(5) for w in ("before", "after")) + (
    "examples/seeds/s1-before-separate.yaml", "examples/seeds/s1-after-shared.yaml", "examples/quickstart.yaml")
MAKE_PLAN_SAMPLE = 300
"""Configurations planned with make_plan to time the slow path (scaled to N)."""


def _region(spec_path: Path) -> tuple[Any, Any, float]:
    from oomless.fit.probe import Margin
    from oomless.fit.search import FitOptions, _Search
    from oomless.fit.space import math_levels
    from oomless.spec.load import load_run, read_yaml

    run = load_run(spec_path)
    search = _Search(run, read_yaml(spec_path), spec_path.parent, FitOptions(margin=Margin(fraction=0.05)))
    start = time.perf_counter()
    regions = search.regions(math_levels(run.spec, run.arch, frozenset())[0][0])
    build = time.perf_counter() - start
    region = max(regions, key=lambda r: _space(r[1]))[1]  # the largest region
    return search, region, build / len(regions)


def _space(region: Any) -> int:
    n = 1
    for f in region.factors:
        n *= len(f.options)
    return n


def evaluate(region: Any, choice: tuple[int, ...]) -> tuple[bool, float]:
    """One configuration: every constraint's predicted slack, the verdict, the step time."""
    slack = region.slack(choice)
    seconds = region.train_seconds(*choice[:2]) + region.engine_seconds(choice[2:])
    return min(slack) >= 0, seconds


def time_evaluator(region: Any, configs: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    sizes = [len(f.options) for f in region.factors]
    choices = [tuple(rng.randrange(n) for n in sizes) for _ in range(configs)]
    start = time.perf_counter()
    fits = sum(evaluate(region, c)[0] for c in choices)
    cold = time.perf_counter() - start
    start = time.perf_counter()
    for c in choices:
        evaluate(region, c)
    warm = time.perf_counter() - start
    return {"configs": configs, "seconds_first_pass": cold, "seconds_second_pass": warm, "fitting": fits,
            "configs_per_second_first_pass": configs / cold}


def time_make_plan(search: Any, region: Any, sample: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    sizes = [len(f.options) for f in region.factors]
    specs = [region.spec(tuple(rng.randrange(n) for n in sizes)) for _ in range(sample)]
    start = time.perf_counter()
    for spec in specs:
        search.ctx.plan(spec)
    elapsed = time.perf_counter() - start
    return {"sample": sample, "seconds": elapsed, "ms_per_plan": 1e3 * elapsed / sample}


def time_fit(spec_path: Path, runs: int) -> dict[str, Any]:
    from oomless.fit.probe import Margin
    from oomless.fit.search import FitOptions, fit_file

    samples, cpu, result = [], [], None
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = fit_file(spec_path, FitOptions(margin=Margin(fraction=0.05)))
        samples.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    assert result is not None
    s = result.stats
    return {"seconds_median": statistics.median(samples), "seconds_min": min(samples), "runs": runs,
            "seconds_first_run": samples[0], "cpu_seconds_first_run": cpu[0], "cpu_seconds_median": statistics.median(cpu),
            "found": result.best is not None, "regions": s.regions, "configurations": s.counts.space,
            "evaluated": s.counts.evaluated, "make_plan_calls": s.plans, "rechecked": s.rechecked,
            "predicted_step_seconds_input": result.input_estimate.total_s,
            "predicted_step_seconds_best": result.best.estimate.total_s if result.best else None,
            "num_changes_best": len(result.best.changes) if result.best else None}


def _fits_in_fresh_process(spec_path: Path, fits: int, src: Path) -> list[dict[str, float]]:
    done = subprocess.run([sys.executable, "-c", FRESH_SCRIPT, str(spec_path), str(fits)], cwd=ROOT, capture_output=True,
                          text=True, check=True, env={**os.environ, "PYTHONPATH": str(src)})
    return json.loads(done.stdout.strip().splitlines()[-1])


def time_fresh(spec_path: Path, runs: int, src: Path = ROOT / "src") -> dict[str, Any]:
    """`fit_file` in new interpreters: nothing cached from an earlier fit (imports not timed);
    then a second fit in the same interpreter (warm)."""
    cold, warm = [], []
    for _ in range(runs):
        first, second = _fits_in_fresh_process(spec_path, 2, src)
        cold.append(first)
        warm.append(second)
    out: dict[str, Any] = {"runs": runs}
    for name, figures in (("", cold), ("warm_", warm)):
        for key in ("wall", "cpu"):
            values = [f[key] for f in figures]
            out[f"{name}{key}_min"], out[f"{name}{key}_median"] = min(values), statistics.median(values)
    return out


def compile_bytecode(src: Path) -> None:
    """Write the tree's bytecode, as an installed package has it. Without it every run compiles
    each changed or extracted module from source (~50 ms of `oomless fit` here, more for a
    `git archive` tree), and with PYTHONDONTWRITEBYTECODE set, as in this environment, it
    does so on every run."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(src / "oomless")], check=True,
                   stdout=subprocess.DEVNULL)


def time_cli(spec_path: Path, runs: int, src: Path, compiled: bool = False) -> dict[str, Any]:
    """The whole `oomless fit SPEC` process (interpreter start-up, imports, fit, printing), its
    bytecode written first (unless ``compiled``); the 1-minute load average before each run
    is kept with it."""
    if not compiled:
        compile_bytecode(src)
    wall, cpu, load = [], [], []
    for _ in range(runs):
        load.append(round(os.getloadavg()[0], 2))
        before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "oomless", "fit", str(spec_path)], cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, check=False, env={**os.environ, "PYTHONPATH": str(src)})
        wall.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        assert done.returncode in (0, 1), done.stderr
    return {"runs": runs, "wall_min": min(wall), "wall_median": statistics.median(wall), "cpu_min": min(cpu),
            "cpu_median": statistics.median(cpu), "wall": [round(w, 3) for w in wall], "load_1min": load}


def source_tree(commit: str, into: Path) -> tuple[str, Path]:
    """(short hash, ``src``) of a commit, extracted with `git archive` (the working tree is
    shared and moving, and so is HEAD: the hash is taken once, here)."""
    sha = subprocess.run(["git", "rev-parse", "--short", commit], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    target = into / sha
    target.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", sha, "src"], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return sha, target / "src"


def compare_trees(trees: dict[str, Path], specs: list[str], runs: int) -> list[dict[str, Any]]:
    """Per spec and tree: `fit_file` cold and warm in fresh interpreters, and `oomless fit`."""
    out = []
    for spec in specs:
        path = (ROOT / spec).resolve()
        for label, src in trees.items():
            out.append({"spec": spec, "tree": label, "in_process": time_fresh(path, runs, src), "cli": time_cli(path, runs, src)})
    return out


def compare_cli(trees: dict[str, Path], specs: list[str], runs: int) -> list[dict[str, Any]]:
    """`--cli-only`: the whole `oomless fit SPEC` process alone, one run per tree in turn, so a
    change of the machine's load meets every tree alike; median and minimum per tree."""
    out = []
    for spec in specs:
        path = (ROOT / spec).resolve()
        rows: dict[str, list[dict[str, Any]]] = {label: [] for label in trees}
        for src in trees.values():
            compile_bytecode(src)
        for _ in range(runs):
            for label, src in trees.items():
                rows[label].append(time_cli(path, 1, src, compiled=True))
        for label, one in rows.items():
            wall, cpu = [r["wall_min"] for r in one], [r["cpu_min"] for r in one]
            load = [r["load_1min"][0] for r in one]
            out.append({"spec": spec, "tree": label, "cli": {
                "runs": runs, "wall_median": statistics.median(wall), "wall_min": min(wall), "cpu_median": statistics.median(cpu),
                "cpu_min": min(cpu), "wall": [round(w, 3) for w in wall], "load_1min": load}})
    return out


def cli_table(rows: list[dict[str, Any]]) -> str:
    lines = ["| spec | tree | wall median / min | CPU median / min | 1-min load before the runs |", "|---|---|---|---|---|"]
    for r in rows:
        c = r["cli"]
        lines.append(f"| {Path(r['spec']).name} | {r['tree']} | {c['wall_median']:.3f} / {c['wall_min']:.3f} s "
                     f"| {c['cpu_median']:.3f} / {c['cpu_min']:.3f} s | {min(c['load_1min']):.2f}-{max(c['load_1min']):.2f} |")
    return "\n".join(lines) + "\n"


def run_spec(spec: str, configs: int, runs: int, seed: int) -> dict[str, Any]:
    path = (ROOT / spec).resolve()
    search, region, build = _region(path)
    evaluator = time_evaluator(region, configs, seed)
    slow = time_make_plan(search, region, min(MAKE_PLAN_SAMPLE, configs), seed)
    total = build + evaluator["seconds_first_pass"]
    return {
        "spec": spec, "region_configurations": _space(region), "region_make_plan_probes": len(region._plans),
        "region_build_seconds": build, "evaluator": evaluator,
        "make_plan_for_same_configs_seconds": slow["ms_per_plan"] * configs / 1e3, "make_plan_ms": slow["ms_per_plan"],
        "build_plus_evaluate_seconds": total, "meets_target": configs >= TARGET_CONFIGS and total <= TARGET_SECONDS,
        "whole_fit": time_fit(path, runs),
        "fresh_process": time_fresh(path, FRESH_RUNS),
    }


def markdown(doc: dict[str, Any]) -> str:
    env = doc["environment"]
    versions = ", ".join(f"{k} {v}" for k, v in env["packages"].items())
    rows = []
    for r in doc["results"]:
        e, f = r["evaluator"], r["whole_fit"]
        rows.append(
            f"| `{r['spec']}` | {r['region_configurations']:,} | {r['region_make_plan_probes']} / {r['region_build_seconds']:.3f} s "
            f"| {e['configs']:,} in {e['seconds_first_pass']:.3f} s ({e['configs_per_second_first_pass']:,.0f}/s) "
            f"| {r['build_plus_evaluate_seconds']:.3f} s: {'meets' if r['meets_target'] else 'MISSES'} "
            f"| {r['make_plan_for_same_configs_seconds']:.1f} s ({r['make_plan_ms']:.2f} ms each) "
            f"| {f['seconds_median']:.2f} s: {f['configurations']:,} configs, {f['evaluated']:,} evaluated, {f['make_plan_calls']} plans "
            f"| {r['fresh_process']['wall_min']:.2f} / {r['fresh_process']['cpu_min']:.2f} s |")
    seeds = [r for r in doc["results"] if "/seeds/" in r["spec"]] or doc["results"]
    largest = max(seeds, key=lambda r: r["whole_fit"]["configurations"])
    fresh = largest["fresh_process"]
    answer = fresh["wall_min"]
    slowest = max(seeds, key=lambda r: r["fresh_process"]["wall_min"])
    slow = slowest["fresh_process"]
    dirty = f" plus uncommitted changes ({len(env['git_dirty_paths'])} paths)" if env["git_dirty_paths"] else ""
    return f"""# `oomless fit` speed

Recorded {doc['recorded_at']} by `{doc['command']}`.

Target: ≥ {TARGET_CONFIGS:,} candidate configurations evaluated in ≤ {TARGET_SECONDS} s. Evaluating one = predicting
its slack on every memory constraint, the fits-with-margin verdict, and its step time.

Largest seed (most configurations searched): `{largest['spec']}`, {largest['whole_fit']['configurations']:,}
configurations. `fit_file` answers in {answer:.2f} s wall ({fresh['cpu_min']:.2f} s CPU) in a fresh interpreter (imports
not timed), the fastest of {fresh['runs']} (median {fresh['wall_median']:.2f} s wall, {fresh['cpu_median']:.2f} s CPU): {'meets' if answer <= TARGET_SECONDS else 'MISSES'} ≤ {TARGET_SECONDS} s.
{whole_process_line(doc, largest['spec'])}
Slowest seed: `{slowest['spec']}`, {slow['wall_min']:.2f} s wall ({slow['cpu_min']:.2f} s CPU), best of {slow['runs']}.
Load average {doc['load_average']['start']} at start, {doc['load_average']['end']} at the end.

| spec | configurations in its largest region | region build (make_plan probes / time) | fast-path evaluation | build + {doc['config']['configs']:,} evaluations | the same with make_plan (scaled from {MAKE_PLAN_SAMPLE}) | whole `fit` (median of {doc['config']['runs']}) | fresh process, best of {FRESH_RUNS} (wall / CPU) |
|---|---|---|---|---|---|---|---|
{chr(10).join(rows)}

{comparison_table(doc)}
Fast path: `fit.probe.Region` — slack and step time added from per-factor `make_plan` probes
(exact against `make_plan`, tests/fit/test_probe.py); first pass over random configurations,
so memoised step-time entries are computed inside the timing. Whole `fit`: every layout and
sleep state, best-first search, and `make_plan` re-checks of the returned configurations.

Machine: {env['cpu_model']}, {env['num_cpu_cores']} cores, {env['ram_gib']} GiB RAM; {env['os']} (kernel {env['kernel']}).
Python {env['python']}; {versions}.
Commit {env['git_commit']}{dirty}.
"""


def whole_process_line(doc: dict[str, Any], spec: str) -> str:
    """The whole `oomless fit SPEC` process (start-up included) per compared tree."""
    rows = [r for r in doc.get("comparison") or [] if r["spec"] == spec]
    if not rows:
        return ""
    parts = [f"`{r['tree']}` {r['cli']['wall_min']:.2f} s wall ({r['cli']['cpu_min']:.2f} s CPU)" for r in rows]
    return "The whole `oomless fit` process on it, start-up included, best of 5: " + ", ".join(parts) + "."


def comparison_table(doc: dict[str, Any]) -> str:
    rows = doc.get("comparison") or []
    if not rows:
        return ""
    trees = ", ".join(f"`{label}` = {src}" for label, src in doc["config"]["trees"].items())
    lines = [f"Source trees: {trees}. Best of {rows[0]['in_process']['runs']} fresh interpreters each; CPU = process time.", "",
             "| spec | tree | `fit_file` cold: CPU / wall | warm: CPU / wall | `oomless fit` process: wall / CPU |",
             "|---|---|---|---|---|"]
    for r in rows:
        i, c = r["in_process"], r["cli"]
        lines.append(f"| `{r['spec']}` | `{r['tree']}` | {i['cpu_min']:.3f} / {i['wall_min']:.3f} s "
                     f"| {i['warm_cpu_min']:.3f} / {i['warm_wall_min']:.3f} s | {c['wall_min']:.2f} / {c['cpu_min']:.2f} s |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--specs", nargs="+", default=list(DEFAULT_SPECS), help="Run specs to fit.")
    parser.add_argument("--configs", type=int, default=TARGET_CONFIGS, help="Random configurations evaluated per spec.")
    parser.add_argument("--runs", type=int, default=3, help="Whole-fit runs per spec (median reported).")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS, help="Directory for fit-speed.json/.md.")
    parser.add_argument("--commits", nargs="*", default=[], help="Commits whose src to compare (git archive); "
                        "none: the working tree only.")
    parser.add_argument("--src-dirs", nargs="*", default=[], metavar="LABEL=DIR",
                        help="Further source trees to compare (a src folder, e.g. a commit with one change applied).")
    parser.add_argument("--compare-specs", nargs="*", default=list(COMPARED_SPECS), help="Specs of the comparison.")
    parser.add_argument("--cli-only", type=int, default=0, metavar="RUNS",
                        help="Only the whole `oomless fit` process of --compare-specs, RUNS runs per tree taken in "
                        "turn (results in fit-speed-cli.json/.md).")
    args = parser.parse_args()
    load_start = [round(x, 2) for x in os.getloadavg()]
    commits: set[str] = set()
    results = [] if args.cli_only else [run_spec(s, args.configs, args.runs, args.seed) for s in args.specs]
    with tempfile.TemporaryDirectory() as tmp:
        trees = dict(source_tree(c, Path(tmp)) for c in args.commits)
        commits.update(trees)
        trees.update((label, Path(folder)) for label, _, folder in (d.partition("=") for d in args.src_dirs))
        trees = trees or {"working tree": ROOT / "src"}
        if args.cli_only:
            comparison = compare_cli(trees, args.compare_specs, args.cli_only)
        else:
            comparison = compare_trees(trees, args.compare_specs, FRESH_RUNS)
    doc = {
        "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([os.path.relpath(sys.executable, Path.cwd()), *sys.argv]),
        "config": {"specs": args.specs, "configs": args.configs, "runs": args.runs, "seed": args.seed,
                   "margin": "5 % of capacity", "make_plan_sample": MAKE_PLAN_SAMPLE,
                   "trees": {label: f"commit {label}" if label in commits else str(src) for label, src in trees.items()}},
        "targets": {"configs": TARGET_CONFIGS, "seconds": TARGET_SECONDS},
        "results": results,
        "comparison": comparison,
        "load_average": {"start": load_start, "end": [round(x, 2) for x in os.getloadavg()]},
        "environment": environment(),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    if args.cli_only:
        (args.out / "fit-speed-cli.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        text = f"# `oomless fit` process\n\n`{doc['command']}`, {doc['recorded_at']}\n\n{cli_table(comparison)}"
        (args.out / "fit-speed-cli.md").write_text(text, encoding="utf-8")
        print(text)
        return
    (args.out / "fit-speed.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    (args.out / "fit-speed.md").write_text(markdown(doc), encoding="utf-8")
    print(markdown(doc))


if __name__ == "__main__":
    main()
