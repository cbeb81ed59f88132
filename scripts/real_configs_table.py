"""Plan every file of the real-config corpus and write docs/real-configs.md and results.json.

Usage:
    .venv/bin/python scripts/real_configs_table.py            # both files, from tests/real_configs/manifest.yaml
    .venv/bin/python scripts/real_configs_table.py --check    # exit 1 if either file is out of date

Each manifest entry is planned the way a user would plan it from the repository root of that
version: `oomless plan --from FW FILE --json` with `--gpu`/`--gpus-per-node`/`--nodes` from the
entry's published hardware, or `--gpu A100-80GB` alone when the file and its README name none
(the GPU count then comes from the file or the framework's default), in a subprocess with a
timeout. An entry whose hardware names a `launch` (the README command that runs a recipe) is
planned through that command instead of the bare file. Outcomes: `fits` (exit 0), `does-not-fit` (exit 1), `refused` (exit 2, the first
stderr line is the reason), `crash` (exit 3, any other code, or a traceback), `timeout`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "real_configs"
MANIFEST = CORPUS / "manifest.yaml"
RESULTS = CORPUS / "results.json"
DOC = ROOT / "docs" / "real-configs.md"
COMMAND = ".venv/bin/python scripts/real_configs_table.py"

DEFAULT_GPU = "A100-80GB"
"""GPU assumed when neither the file nor its README names one (the GPU count is left to the file)."""
TIMEOUT_S = 60
PLANNED = ("fits", "does-not-fit")
OUTCOMES = ("fits", "does-not-fit", "refused", "crash", "timeout")


@dataclass
class Outcome:
    """What planning one corpus file gave."""

    id: str
    framework: str
    version: str
    outcome: str
    exit_code: int | None
    args: list[str]
    hardware_source: str
    reason: str = ""
    binding: str = ""
    peak_gib: float | None = None
    """The plan's highest GPU peak (any phase, any GPU group), for files that state a measured one."""
    num_warnings: int = 0
    num_notes: int = 0
    stderr_lines: list[str] = field(default_factory=list)


def load_manifest(path: Path = MANIFEST) -> list[dict[str, Any]]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))["entries"]


def plan_args(entry: dict[str, Any]) -> tuple[list[str], str]:
    """The `oomless` arguments for an entry (run from its version folder), and where its hardware comes from."""
    hardware = entry.get("hardware")
    file = str(Path(entry["file"]).relative_to(entry["root"]))
    if hardware and hardware.get("launch"):
        file = hardware["launch"]  # the command its README runs it with (a corpus file of the same version)
    args = ["plan", "--from", entry["framework"], file, "--json"]
    if not hardware:
        return [*args, "--gpu", DEFAULT_GPU], f"default --gpu {DEFAULT_GPU}"
    args += ["--gpu", hardware["gpu"]]
    if hardware.get("gpus_per_node"):
        args += ["--gpus-per-node", str(hardware["gpus_per_node"])]
    if hardware.get("nodes"):
        args += ["--nodes", str(hardware["nodes"])]
    return args, "published"


def classify(entry: dict[str, Any], args: list[str], hardware_source: str,
             code: int | None, stdout: str, stderr: str) -> Outcome:
    """Sort one run into an outcome: a traceback anywhere is a crash whatever the exit code."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    out = Outcome(entry["id"], entry["framework"], entry["version"], "", code, args, hardware_source,
                  num_warnings=sum(line.startswith("warning:") for line in lines),
                  num_notes=sum(line.startswith("note:") for line in lines), stderr_lines=lines)
    errors = [line for line in lines if not line.startswith(("warning:", "note:"))]
    if code is None:
        out.outcome, out.reason = "timeout", f"no answer in {TIMEOUT_S} s"
    elif "Traceback (most recent call last)" in stderr + stdout or code not in (0, 1, 2):
        out.outcome, out.reason = "crash", (errors[0] if errors else f"exit {code}")[:300]
    elif code == 2:
        out.outcome, out.reason = "refused", errors[0] if errors else "(no message)"
    else:
        out.outcome = PLANNED[code]
        out.binding = _binding(stdout)
        out.peak_gib = _peak_gib(stdout)
    return out


def _peak_gib(stdout: str) -> float | None:
    try:
        return round(json.loads(stdout)["gpu"]["peak_bytes"] / 2**30, 2)
    except (ValueError, KeyError, TypeError):
        return None


def _binding(stdout: str) -> str:
    try:
        binding = json.loads(stdout)["binding"]
    except (ValueError, KeyError, TypeError):
        return ""
    return f"{binding.get('phase')} ({binding.get('device_role') or binding.get('device')}, {binding.get('component')})"


def run_subprocess(entry: dict[str, Any]) -> Outcome:
    args, source = plan_args(entry)
    oomless = Path(sys.executable).with_name("oomless")
    command = [str(oomless)] if oomless.exists() else [sys.executable, "-m", "oomless"]
    run_args, stated = list(args), _with_stated_vllm(entry, args[3])
    if stated is not None:
        run_args[3] = str(Path(args[3]).with_name(stated.name))
    try:
        done = subprocess.run([*command, *run_args], cwd=CORPUS / entry["root"], capture_output=True, text=True,
                              timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return classify(entry, args, source, None, "", "")
    finally:
        if stated is not None:
            stated.unlink(missing_ok=True)
    stdout, stderr = done.stdout, done.stderr
    if stated is not None:  # messages name the user's file, not the copy
        stdout, stderr = (text.replace(stated.name, Path(args[3]).name) for text in (stdout, stderr))
    return classify(entry, args, source, done.returncode, stdout, stderr)


def _with_stated_vllm(entry: dict[str, Any], file: str) -> Path | None:
    """Where the source states the vLLM release (hardware.yaml `vllm`, e.g. verl's device_tuning.rst
    "vllm0.8.3"), the file is planned as a user who names it would: a copy beside it (its relative
    paths unchanged) headed by `# oomless: vllm==X`, removed after."""
    stated = (entry.get("hardware") or {}).get("vllm")
    if stated is None:
        return None
    original = CORPUS / entry["root"] / file
    handle, name = tempfile.mkstemp(dir=original.parent, prefix=".stated-vllm-", suffix=f"-{original.name}")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(f"# oomless: vllm=={stated}\n" + original.read_text(encoding="utf-8"))
    return Path(name)


def planned_share(outcomes: list[Outcome]) -> float:
    return sum(o.outcome in PLANNED for o in outcomes) / len(outcomes) if outcomes else 0.0


def results_document(outcomes: list[Outcome]) -> dict[str, Any]:
    return {
        "generated_by": COMMAND,
        "default_gpu": DEFAULT_GPU,
        "counts": dict(Counter(o.outcome for o in outcomes)),
        "planned_share": round(planned_share(outcomes), 4),
        "entries": [{k: v for k, v in asdict(o).items() if k != "stderr_lines"} for o in outcomes],
    }


def cause(reason: str) -> str:
    """A refusal reason with its particulars (quoted values, numbers, file names) blanked, so
    refusals of one cause count together; unknown models are one cause per field."""
    unknown = re.match(r"error: ([\w.-]+): unknown '", reason)
    if unknown:
        return f"model not in the catalog ({unknown.group(1)})"
    text = re.sub(r"'[^']*'", "'…'", reason)
    text = re.sub(r"[\w./${}-]+\.(?:sh|py|ya?ml|json)\b", "FILE", text)
    return re.sub(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])", "N", text)


def _groups(outcomes: list[Outcome]) -> dict[tuple[str, str], list[Outcome]]:
    groups: dict[tuple[str, str], list[Outcome]] = {}
    for o in outcomes:
        groups.setdefault((o.id.split("/")[0], o.version), []).append(o)  # open-r1 apart from trl
    return groups


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_doc(outcomes: list[Outcome], manifest: list[dict[str, Any]]) -> str:
    by_id = {e["id"]: e for e in manifest}
    share = planned_share(outcomes)
    counts = Counter(o.outcome for o in outcomes)
    out = [
        "# Real configs: every example of every framework, planned",
        "",
        f"Generated by `{COMMAND}` from `tests/real_configs/manifest.yaml`; do not edit by hand.",
        "The corpus (`tests/real_configs/`) holds the RL example scripts and recipes of each framework at",
        "its HEAD and at least two earlier releases, copied verbatim with their repository, path and commit;",
        "`python tests/real_configs/collect.py --mirrors DIR` rebuilds it from bare git mirrors, `sources.yaml`",
        "(what is copied) and `hardware.yaml` (the GPUs a file or its README names, with the quote that says so).",
        "Files keep their repository paths under `<framework>/<version>/`, so the companions a script names",
        "(EasyR1 `config=examples/config.yaml`, accelerate and DeepSpeed files) resolve as in the repository.",
        "",
        "Each file is planned as a user would plan it from the repository root of its version:",
        "`oomless plan --from FW FILE --json`, with `--gpu`/`--gpus-per-node`/`--nodes` from the published",
        f"hardware where there is one, else `--gpu {DEFAULT_GPU}` and the GPU count the file sets (or the",
        "framework's default). Outcomes: **fits** (exit 0), **does not fit** (exit 1), **refused** (exit 2,",
        "the one-line reason), **crash** (exit 3 or a traceback), **timeout**.",
        "",
        f"**{len(outcomes)} files: {counts['fits']} fit, {counts['does-not-fit']} do not fit, {counts['refused']} refused, "
        f"{counts['crash']} crashed, {counts['timeout']} timed out; planned share {share:.1%}.**",
        "`tests/real_configs/test_real_configs.py` plans every file in-process, asserts no crash and a",
        "one-line refusal, and holds the planned share at or above `PLANNED_SHARE_FLOOR` (today's",
        "measured share, raised as fixes land; the goal is 90 %).",
        "",
        "## Per framework and version",
        "",
        "| corpus (--from) | version | files | fits | does not fit | refused | crash/timeout | warnings |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for (framework, version), group in _groups(outcomes).items():
        c = Counter(o.outcome for o in group)
        out.append(f"| {framework} | {version} | {len(group)} | {c['fits']} | {c['does-not-fit']} | {c['refused']} | "
                   f"{c['crash'] + c['timeout']} | {sum(o.num_warnings for o in group)} |")
    failed = [o for o in outcomes if o.outcome in ("refused", "crash", "timeout")]
    causes = Counter(cause(o.reason) for o in failed)
    out += ["", "## Refusals and crashes by cause", "", "Particulars blanked (`'…'` a value, `N` a number, `FILE` a file).",
            "", "| count | cause | frameworks |", "|---:|---|---|"]
    for text, n in causes.most_common():
        frameworks = sorted({o.framework for o in failed if cause(o.reason) == text})
        out.append(f"| {n} | {_cell(text)} | {', '.join(frameworks)} |")
    models = Counter(re.search(r"unknown '([^']*)'", o.reason).group(1) for o in failed if "unknown '" in o.reason)
    if models:
        out += ["", "Models not in the catalog: " + ", ".join(f"`{m}` ({n})" for m, n in models.most_common()) + "."]
    stated = [o for o in outcomes if o.hardware_source == "published"]
    fit = sum(o.outcome == "fits" for o in stated)
    out += ["", "## Published hardware", "",
            f"**{fit} of {len(stated)} files that name their hardware are predicted to fit on it "
            f"({fit / len(stated) if stated else 0:.1%})**; the others are listed below and, with why, in "
            "docs/published-hardware.md.", "",
            "Files that also state the GPU memory they use, beside the plan's highest GPU peak:", "",
            "| file | stated | planned peak | planned / stated |", "|---|---:|---:|---:|"]
    for o in stated:
        reported = by_id[o.id]["hardware"].get("reported_gpu_memory_gib")
        if reported and o.peak_gib is not None:
            out.append(f"| `{o.id}` | {reported} GiB | {o.peak_gib:.1f} GiB | {o.peak_gib / reported:.2f} |")
    published = [o for o in stated if o.outcome == "does-not-fit"]
    out += ["", "## Published hardware, predicted not to fit", "",
            "Files whose text or README names the GPUs they run on, yet the plan says they do not fit there:",
            "each is either a modelling error of oomless or an example that cannot run as written.", "",
            "| file | hardware (quote) | binding phase (device, component) |", "|---|---|---|"]
    for o in published:
        hw = by_id[o.id]["hardware"]
        out.append(f"| `{o.id}` | {_cell(hw['quote'])} ({_cell(hw['where'])}) | {_cell(o.binding)} |")
    out += ["", "## Every file", "",
            "| file | hardware | outcome | binding phase / reason | warnings |", "|---|---|---|---|---:|"]
    for o in outcomes:
        entry = by_id[o.id]
        hw = entry.get("hardware")
        hardware = f"{hw.get('nodes', 1)}×{hw.get('gpus_per_node', '?')} {hw['gpu']}" if hw else f"({DEFAULT_GPU})"
        if hw and hw.get("launch"):
            hardware += f", via `{hw['launch']}`"
        detail = o.binding if o.outcome in PLANNED else o.reason
        out.append(f"| `{o.id}` | {hardware} | {o.outcome} | {_cell(detail)} | {o.num_warnings} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the doc or results.json is out of date")
    parser.add_argument("--jobs", type=int, default=2)
    options = parser.parse_args(argv)
    manifest = load_manifest()
    with ThreadPoolExecutor(options.jobs) as pool:
        outcomes = list(pool.map(run_subprocess, manifest))
    files = {DOC: render_doc(outcomes, manifest),
             RESULTS: json.dumps(results_document(outcomes), indent=1) + "\n"}
    if options.check:
        stale = [str(p.relative_to(ROOT)) for p, text in files.items() if not p.exists() or p.read_text(encoding="utf-8") != text]
        print("out of date: " + ", ".join(stale) if stale else "up to date")
        return 1 if stale else 0
    for path, text in files.items():
        path.write_text(text, encoding="utf-8")
    counts = Counter(o.outcome for o in outcomes)
    print(f"{len(outcomes)} files: " + ", ".join(f"{counts[k]} {k}" for k in OUTCOMES)
          + f"; planned share {planned_share(outcomes):.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
