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

Writes benchmarks/results/startup.json and benchmarks/results/startup.md. A benchmark, not a
test: it records figures and never fails a build.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
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
FLOOR_IMPORTS = "import typer._adapters, pydantic.main, importlib.metadata, rich.console, rich.table, yaml"
"""The libraries `oomless plan` cannot start without (CLI, spec validation with pydantic's plugin
loader, tables, YAML): what start-up would cost if oomless's own modules took no time."""


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
        f"floor: python -c \"{FLOOR_IMPORTS}\"": ([sys.executable, "-c", FLOOR_IMPORTS], env, ROOT),
        f"oomless plan {SPEC}": ([oomless, "plan", SPEC], env, ROOT),
        f"oomless plan {SPEC} --json": ([oomless, "plan", SPEC, "--json"], env, ROOT),
        "oomless --version": ([oomless, "--version"], env, ROOT),
    }
    if args.baseline_src is not None:
        base_env = {**env, "PYTHONPATH": str(args.baseline_src)}
        out[f"baseline ({args.baseline_src}): oomless plan {SPEC}"] = (
            [sys.executable, "-m", "oomless", "plan", str(ROOT / SPEC)], base_env, args.baseline_src.parent)
    if args.arena is not None:
        manifest, config = peer_inputs(workdir)
        out[f"arena memory estimate {manifest.name} --gpu {PEER_GPU} --config config.json"] = (
            [str(args.arena), "memory", "estimate", str(manifest), "--gpu", PEER_GPU, "--config", str(config)], env, workdir)
    return out


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
    dirty = f" plus uncommitted changes: {', '.join(env['git_dirty_paths'])}" if env["git_dirty_paths"] else ""
    return f"""# Start-up: `oomless plan` beside `arena memory estimate`

Recorded {doc['recorded_at']} by `{doc['command']}`.

| process | wall min (s) | wall median (s) | CPU min (s) | CPU median (s) | exit |
|---|---|---|---|---|---|
{chr(10).join(rows)}

Target: whole `oomless plan {SPEC}` ≤ {TARGET_PROCESS_S} s (median wall): {'meets' if doc['meets_target'] else 'MISSES'} on this machine.
{ratio_line}
Load average before / after: {doc['load_average']['before']} / {doc['load_average']['after']}.

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
    parser.add_argument("--baseline-src", type=Path, default=None,
                        help="Also time another checkout's src/ (e.g. `git archive HEAD~5 | tar -x -C /tmp/base`).")
    parser.add_argument("--out", type=Path, default=RESULTS, help="Directory for startup.json/.md.")
    args = parser.parse_args()

    why_not = None
    if not args.arena.exists():
        why_not, args.arena = f"{args.arena} not found: install agilerl-arena in its own venv", None
    compileall.compile_dir(ROOT / "src", quiet=1)
    if args.baseline_src is not None:
        compileall.compile_dir(args.baseline_src, quiet=1)
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
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "startup.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    (args.out / "startup.md").write_text(markdown(doc), encoding="utf-8")
    print(markdown(doc))


if __name__ == "__main__":
    main()
