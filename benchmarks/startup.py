"""Start-up of `oomless plan` as a whole process, beside AgileRL's `arena memory estimate`.

Target (issue 17, item 0): the whole `oomless plan examples/quickstart.yaml` process (human
output, the command a user types) ≤ 0.15 s. The peer is AgileRL's `arena memory estimate` on
an equivalent run (GRPO, Qwen2.5-1.5B-Instruct, 4 × A100-80GB, 2,048-token sequences, micro
batch 4, vLLM at 0.4 utilization; its manifest is `benchmarks/peer/arena-quickstart.yaml`),
offline through `--config` with the model's config.json written from oomless's catalog copy.

Every command runs once per round, rounds interleaved, so a busy machine slows all of them
alike; each sample is the wall time around `subprocess.run` and the child's CPU time (user +
system, from `getrusage(RUSAGE_CHILDREN)`), which a shared machine inflates less. Both run with
`HF_HUB_OFFLINE=1` and an empty Hugging Face cache (the model comes from each tool's own copy),
stdout to /dev/null (not a terminal), and compiled bytecode (`compileall` first: an installed
package has it; a checkout run with PYTHONDONTWRITEBYTECODE=1 would compile every module on
every start).

The peer lives in its own virtual environment (it pins versions of pydantic/rich/click of its
own); install it with:
    python3 -m venv /tmp/arena && /tmp/arena/bin/pip install agilerl-arena

Usage (from the repository root, with the venv's interpreter):
    .venv/bin/python benchmarks/startup.py                         # 20 rounds
    .venv/bin/python benchmarks/startup.py --arena /tmp/arena/bin/arena --rounds 30
    .venv/bin/python benchmarks/startup.py --baseline-src /tmp/base/src   # an older checkout too
    # several older checkouts (the first is "before"), e.g. each step of a change:
    for c in 1fa0d4a 509b9dc; do mkdir -p /tmp/steps/$c && git archive $c src | tar -x -C /tmp/steps/$c; done
    .venv/bin/python benchmarks/startup.py --baseline-src /tmp/steps/1fa0d4a/src --baseline-src /tmp/steps/509b9dc/src

Beside them: bare Python, pydantic's import alone, and the libraries `oomless plan` cannot start
without (with the collector on, and paused as the CLI runs it): the floor no change to oomless
can go below. After the timed rounds, `-X importtime` runs of the plan give the import self time
by group (oomless, pydantic, typer, rich, PyYAML, standard library) for the floor analysis.

Writes benchmarks/results/startup.json and benchmarks/results/startup.md. A benchmark, not a
test: it records figures and never fails a build.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_plan import ROOT, RESULTS, environment, oomless_script, summary  # noqa: E402

TARGET_PROCESS_S = 0.15
SPEC = "examples/quickstart.yaml"
PEER_MANIFEST = ROOT / "benchmarks" / "peer" / "arena-quickstart.yaml"
PEER_MODEL = "Qwen/Qwen2.5-1.5B-Instruct"
PEER_GPU = "A100-80GB"
FLOOR_IMPORTS = "import typer._adapters, pydantic.main, rich.console, rich.table, yaml"
"""The libraries `oomless plan` cannot start without (CLI with typer's pydantic coercion, spec
validation, tables, YAML): what start-up would cost if oomless's own modules took no time.
(pydantic's plugin loader and importlib.metadata are not among them: the CLI skips them.)"""
FLOOR_GC_PAUSED = "import gc; gc.disable(); " + FLOOR_IMPORTS + "; gc.freeze()"
"""The same with the cyclic collector paused and what was built frozen at the end, as `oomless plan`
runs (`oomless.cli.main._pause_gc` and `main`)."""
PYDANTIC_FLOOR = "from pydantic import BaseModel"
"""pydantic alone: the import every validated spec needs."""
IMPORT_GROUPS = {"oomless": "oomless's own modules", "pydantic": "pydantic", "pydantic_core": "pydantic",
                 "annotated_types": "pydantic", "typing_inspection": "pydantic", "typing_extensions": "pydantic",
                 "typer": "typer", "rich": "rich", "yaml": "PyYAML", "_yaml": "PyYAML"}
"""Top-level package → group of the import-time breakdown; anything else is the standard library."""


def timed_run(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, int]:
    """Wall seconds, child CPU seconds (user + system) and exit code of one process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode not in (0, 1):
        sys.exit(f"error: {' '.join(argv)} exited {done.returncode}: {done.stderr.decode().strip()[-400:]}")
    return wall, cpu, done.returncode


def peer_inputs(workdir: Path) -> tuple[Path, Path]:
    """The peer's manifest and rubric (copied) and its model's config.json, written from
    oomless's catalog copy without oomless's own derived fields."""
    catalog = ROOT / "src" / "oomless" / "catalog" / "data" / "models" / (PEER_MODEL.replace("/", "--") + ".json")
    config = json.loads(catalog.read_text(encoding="utf-8"))
    config.pop("_derived", None)
    (workdir / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    (workdir / "rubric.py").write_text((PEER_MANIFEST.parent / "rubric.py").read_text(encoding="utf-8"), encoding="utf-8")
    manifest = workdir / PEER_MANIFEST.name
    manifest.write_text(PEER_MANIFEST.read_text(encoding="utf-8"), encoding="utf-8")
    return manifest, workdir / "config.json"


def peer_version(arena: Path) -> str | None:
    python = arena.with_name("python")
    done = subprocess.run([str(python), "-c", "from importlib.metadata import version as v; print(v('agilerl-arena'))"],
                          capture_output=True, text=True, check=False)
    return done.stdout.strip() or None


def commands(args: argparse.Namespace, workdir: Path) -> dict[str, tuple[list[str], dict[str, str], Path]]:
    """name -> (argv, environment, working directory) of every process timed."""
    cache = workdir / "hf-cache"
    cache.mkdir()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache), "HF_HOME": str(workdir / "hf-home")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    oomless = str(oomless_script())
    out = {
        "python -c pass": ([sys.executable, "-c", "pass"], env, ROOT),
        f"pydantic: python -c \"{PYDANTIC_FLOOR}\"": ([sys.executable, "-c", PYDANTIC_FLOOR], env, ROOT),
        f"floor: python -c \"{FLOOR_IMPORTS}\"": ([sys.executable, "-c", FLOOR_IMPORTS], env, ROOT),
        "floor, collector paused: python -c \"import gc; gc.disable(); ...; gc.freeze()\"": ([sys.executable, "-c", FLOOR_GC_PAUSED], env, ROOT),
        f"oomless plan {SPEC}": ([oomless, "plan", SPEC], env, ROOT),
        f"oomless plan {SPEC} --json": ([oomless, "plan", SPEC, "--json"], env, ROOT),
        "oomless --version": ([oomless, "--version"], env, ROOT),
    }
    for src in args.baseline_src:
        base_env = {**env, "PYTHONPATH": str(src)}
        out[f"baseline ({src}): oomless plan {SPEC}"] = (
            [sys.executable, "-m", "oomless", "plan", str(ROOT / SPEC)], base_env, src.parent)
    if args.arena is not None:
        manifest, config = peer_inputs(workdir)
        out[f"arena memory estimate {manifest.name} --gpu {PEER_GPU} --config config.json"] = (
            [str(args.arena), "memory", "estimate", str(manifest), "--gpu", PEER_GPU, "--config", str(config)], env, workdir)
    return out


def import_breakdown(env: dict[str, str], runs: int) -> dict[str, Any]:
    """`python -X importtime` of `oomless plan SPEC`, ``runs`` times: the median self time of
    each module, summed by group (`IMPORT_GROUPS`), and oomless's slowest modules. Import
    timing itself slows a process down; the shares, not the sums, compare with the table."""
    selfs: dict[str, list[int]] = {}
    for _ in range(runs):
        done = subprocess.run([sys.executable, "-X", "importtime", str(oomless_script()), "plan", SPEC], cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
        for line in done.stderr.splitlines():
            parts = line.removeprefix("import time:").split("|")
            if len(parts) == 3 and parts[0].strip().isdigit():
                selfs.setdefault(parts[2].strip(), []).append(int(parts[0]))
    median_ms = {name: statistics.median(us) / 1000 for name, us in selfs.items()}
    groups: dict[str, float] = {}
    for name, ms in median_ms.items():
        group = IMPORT_GROUPS.get(name.split(".")[0], "standard library")
        groups[group] = groups.get(group, 0.0) + ms
    own = sorted(((n, ms) for n, ms in median_ms.items() if n.startswith("oomless")), key=lambda x: -x[1])
    return {"runs": runs, "groups_ms": dict(sorted(groups.items(), key=lambda kv: -kv[1])),
            "total_ms": sum(groups.values()), "slowest_oomless_modules_ms": dict(own[:8]), "num_modules": len(median_ms)}


def analysis(doc: dict[str, Any]) -> str:
    """The floor analysis: what the libraries cost alone, what oomless adds, and the target."""
    proc = doc["processes"]
    med = {name: fig["cpu_s"]["median"] for name, fig in proc.items()}
    plan = med[f"oomless plan {SPEC}"]
    bare = med["python -c pass"]
    pyd = next(v for n, v in med.items() if n.startswith("pydantic:"))
    floor = next(v for n, v in med.items() if n.startswith("floor:"))
    floor_paused = next(v for n, v in med.items() if n.startswith("floor, collector paused"))
    base = next((v for n, v in med.items() if n.startswith("baseline")), None)
    brk = doc["import_breakdown"]
    shares = ", ".join(f"{group} {ms:.0f} ms ({100 * ms / brk['total_ms']:.0f} %)" for group, ms in brk["groups_ms"].items())
    own = ", ".join(f"`{n}` {ms:.0f}" for n, ms in brk["slowest_oomless_modules_ms"].items())
    before = f" (before this work: {base:.3f} s, so {base - plan:.3f} s less)" if base is not None else ""
    verdict = ("meets it" if plan <= TARGET_PROCESS_S else
               f"misses it by {plan - TARGET_PROCESS_S:.3f} s; the libraries alone take {floor_paused:.3f} s, "
               f"{floor_paused - TARGET_PROCESS_S:.3f} s over the target before oomless runs a line")
    wall = proc[f"oomless plan {SPEC}"]["wall_s"]["median"]
    return f"""## Floor analysis (median CPU seconds of the table above; CPU time is what a busy shared machine inflates least)

- `oomless plan` takes {plan:.3f} s of CPU ({wall:.3f} s wall){before}. The target is {TARGET_PROCESS_S} s: it {verdict}.
- The interpreter alone takes {bare:.3f} s; pydantic's import alone {pyd:.3f} s (every validated spec needs it,
  and typer 0.29 coerces option values through it too); the libraries the command cannot start without
  (typer, pydantic, rich tables, PyYAML) {floor:.3f} s, {floor_paused:.3f} s with the collector paused and
  frozen at exit as the CLI runs.
- oomless's own share is about {plan - floor_paused:.3f} s: its modules (the spec's 19 pydantic models are
  built when `oomless.spec.run` is imported; the planner's, memory model's and catalog's dataclasses
  are generated when theirs are), reading the spec and the catalog, the plan itself (a few ms) and
  rich drawing the tables.
- Import self time by group (`-X importtime`, median of {brk['runs']} runs, {brk['num_modules']} modules; timing
  imports slows them, so read the shares): {shares}.
- oomless's slowest modules to import (ms, self): {own}.
- Behind "before" → "after" (issue 17 item 0; with each step's commit as a baseline, the rows above
  show what each step cut): only the invoked command is imported and built (typer built all 16);
  pydantic's plugin loader, and with it importlib.metadata, is not imported when plugins are off;
  rich loads no emoji table and compiles no highlighter patterns for a pipe; the int64 bound is a
  validator on the integer fields only and the spec's annotations are not strings pydantic must
  evaluate; the collector is paused for start-up; `socket` is imported only when the Hub is asked;
  a one-shot run freezes what it built, so the interpreter's final collection skips it.
- What is left is mostly the libraries: 0.15 s is below what typer + pydantic + rich + PyYAML take to
  import on this machine, so it is not reachable without replacing pydantic (the spec layer, its JSON
  schema and its error messages) and typer, which this work does not do.
"""


def markdown(doc: dict[str, Any]) -> str:
    env = doc["environment"]
    versions = ", ".join(f"{k} {v}" for k, v in env["packages"].items())
    rows = []
    for name, fig in doc["processes"].items():
        wall, cpu = fig["wall_s"], fig["cpu_s"]
        rows.append(f"| `{name}` | {wall['min']:.3f} | {wall['median']:.3f} | {cpu['min']:.3f} | {cpu['median']:.3f} | {fig['exit_code']} |")
    peer = doc["peer"]
    peer_line = (f"Peer: agilerl-arena {peer['version']} at `{peer['arena']}` (its own venv)." if peer["arena"]
                 else f"Peer: not run ({peer['why_not']}).")
    ratio = doc.get("ratio_to_peer")
    ratio_line = (f"oomless plan / arena memory estimate, median wall: {ratio['wall_median']:.2f}; median CPU: {ratio['cpu_median']:.2f}."
                  if ratio else "")
    baseline_note = ("Baseline rows run `python -m oomless plan` from an older checkout's src/ (`git archive COMMIT src`, "
                     "the commit in its path); the first is the analysis's \"before\".\n\n"
                     if any(n.startswith("baseline") for n in doc["processes"]) else "")
    dirty = f" plus uncommitted changes: {', '.join(env['git_dirty_paths'])}" if env["git_dirty_paths"] else ""
    return f"""# Start-up: `oomless plan` beside `arena memory estimate`

Recorded {doc['recorded_at']} by `{doc['command']}`.

| process | wall min (s) | wall median (s) | CPU min (s) | CPU median (s) | exit |
|---|---|---|---|---|---|
{chr(10).join(rows)}

{baseline_note}Target: whole `oomless plan {SPEC}` ≤ {TARGET_PROCESS_S} s (median wall): {'meets' if doc['meets_target'] else 'MISSES'} on this machine.
{ratio_line}
Load average before / after: {doc['load_average']['before']} / {doc['load_average']['after']}.

{analysis(doc)}
{doc['config']['rounds']} rounds after {doc['config']['warmups']} warm-up round(s), commands interleaved within each round;
HF_HUB_OFFLINE=1, empty HF cache, stdout to /dev/null, bytecode compiled.
{peer_line}

Machine: {env['cpu_model']}, {env['num_cpu_cores']} cores, {env['ram_gib']} GiB RAM; {env['os']} (kernel {env['kernel']}).
Python {env['python']}; {versions}.
Commit {env['git_commit']}{dirty}.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20, help="Timed rounds (default 20).")
    parser.add_argument("--warmups", type=int, default=2, help="Untimed rounds first (default 2).")
    parser.add_argument("--arena", type=Path, default=Path("/tmp/arena/bin/arena"),
                        help="The peer's `arena` script (default /tmp/arena/bin/arena; skipped when absent).")
    parser.add_argument("--baseline-src", type=Path, action="append", default=[],
                        help="Also time another checkout's src/ (e.g. `git archive HEAD~5 src | tar -x -C /tmp/base`); "
                        "repeatable, the first is the \"before\" of the analysis.")
    parser.add_argument("--breakdown-runs", type=int, default=5, help="Runs of the -X importtime breakdown (default 5).")
    parser.add_argument("--out", type=Path, default=RESULTS, help="Directory for startup.json/.md.")
    args = parser.parse_args()

    why_not = None
    if not args.arena.exists():
        why_not, args.arena = f"{args.arena} not found: install agilerl-arena in its own venv", None
    compileall.compile_dir(ROOT / "src", quiet=1)
    for src in args.baseline_src:
        compileall.compile_dir(src, quiet=1)
    with tempfile.TemporaryDirectory(prefix="oomless-startup-") as tmp:
        timed = commands(args, Path(tmp))
        samples: dict[str, list[tuple[float, float, int]]] = {name: [] for name in timed}
        load_before = os.getloadavg()
        for round_index in range(args.warmups + args.rounds):
            for name, (argv, env, cwd) in timed.items():
                sample = timed_run(argv, env, cwd)
                if round_index >= args.warmups:
                    samples[name].append(sample)
        load_after = os.getloadavg()
        breakdown = import_breakdown(timed[f"oomless plan {SPEC}"][1], args.breakdown_runs)
    processes = {
        name: {"wall_s": summary([s[0] for s in got], 1.0), "cpu_s": summary([s[1] for s in got], 1.0),
               "exit_code": got[-1][2], "argv": [Path(timed[name][0][0]).name, *timed[name][0][1:]]}
        for name, got in samples.items()
    }
    ours = processes[f"oomless plan {SPEC}"]
    peer_name = next((n for n in processes if n.startswith("arena ")), None)
    doc: dict[str, Any] = {
        "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([os.path.relpath(sys.executable, Path.cwd()), *sys.argv]),
        "config": {"spec": SPEC, "rounds": args.rounds, "warmups": args.warmups, "peer_manifest": str(PEER_MANIFEST.relative_to(ROOT)),
                   "peer_gpu": PEER_GPU, "env": {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": "<empty temporary folder>"}},
        "processes": processes,
        "target_s": TARGET_PROCESS_S,
        "meets_target": ours["wall_s"]["median"] <= TARGET_PROCESS_S,
        "load_average": {"before": [round(x, 2) for x in load_before], "after": [round(x, 2) for x in load_after]},
        "peer": {"arena": str(args.arena) if args.arena else None, "version": peer_version(args.arena) if args.arena else None,
                 "why_not": why_not},
        "environment": environment(),
    }
    if peer_name is not None:
        peer = processes[peer_name]
        doc["ratio_to_peer"] = {"wall_median": ours["wall_s"]["median"] / peer["wall_s"]["median"],
                                "cpu_median": ours["cpu_s"]["median"] / peer["cpu_s"]["median"]}
    doc["import_breakdown"] = breakdown
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "startup.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    (args.out / "startup.md").write_text(markdown(doc), encoding="utf-8")
    print(markdown(doc))


if __name__ == "__main__":
    main()
