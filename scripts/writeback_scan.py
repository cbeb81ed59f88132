"""Does `fit --from FW FILE --write OUT` write a file that `plan --from` reads back as the answer?

Usage:
    .venv/bin/python scripts/writeback_scan.py                 # tests/real_configs/writeback.json, docs/writeback.md
    .venv/bin/python scripts/writeback_scan.py --only swift/   # ids starting with swift/ (nothing written)

Every file of the real-config corpus (tests/real_configs/manifest.yaml, with the hardware flags
`scripts/real_configs_table.py` passes: the published ones, else `--gpu A100-80GB`, a README
`launch` in its recipe's place) and every native seed (examples/seeds/native/, with the flags of
its header's `oomless plan --from` line) goes through the CLI's own commands, in this process
(typer's CliRunner, from the file's repository root as a user would run them), one at a time:

1. `oomless fit --from FW FILE FLAGS --write OUT --top 5 --json`: fit's answer (found, nothing
   fits, refused) and the configuration it patched (`native.patched_choice`, with its predicted
   peak of every phase on every device group and the host);
2. `oomless plan --from FW OUT/FILE FLAGS --json` on the written copy (on FILE itself when the
   answer changes nothing): whether it reads back, whether it fits, and whether each phase's
   peak equals fit's prediction for the chosen configuration within `TOLERANCE`;
3. where the framework's own argument parser is installed (TRL's TrlParser over GRPOConfig or
   RLOOConfig with ModelConfig and ScriptArguments), whether it accepts the written file as it
   accepts the original (`writeback_parsers.py`).

A file that takes longer than `TIMEOUT_S` is recorded as a timeout; nothing stops the scan.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import real_configs_table as table  # noqa: E402  (scripts/ is not a package)
import writeback_parsers as parsers  # noqa: E402

SEEDS = ROOT / "examples" / "seeds" / "native"
RESULTS = table.CORPUS / "writeback.json"
DOC = ROOT / "docs" / "writeback.md"
COMMAND = ".venv/bin/python scripts/writeback_scan.py"
TIMEOUT_S = 90
TOLERANCE = 0.01
"""A read-back phase peak equals fit's prediction when they differ by at most 1 % of the larger."""
WRITE_ERROR = "error: --write"
"""A refusal of fit's own writing; any other refusal is the reader's (`plan --from` refuses the file
too): the file cannot be planned, so there is nothing to write back and the row is not a mismatch."""
SEED_LINE = re.compile(r"oomless plan --from (\w+) (examples/seeds/native/\S+)((?: --[\w-]+ \S+)*)")


class Timeout(BaseException):
    """Raised by the alarm (a BaseException, so the CLI's guard does not turn it into exit 3)."""


@dataclass
class Case:
    id: str
    framework: str
    cwd: Path
    file: str
    """The file as given on the command line, relative to ``cwd``."""
    hardware: list[str]


@dataclass
class Row:
    id: str
    framework: str
    hardware: list[str]
    fit: str = ""
    """found | nothing-fits | refused | crash | timeout"""
    fit_reason: str = ""
    num_changes: int = 0
    """Changes of the patched configuration against the file (0: it fits as it is)."""
    patched_choice: int | None = None
    native_changes: list[str] = field(default_factory=list)
    written: bool = False
    cannot_express: str | None = None
    fit_read_back: str | None = None
    """fit's own line on the written copy (planned with fit's margin)."""
    plan: str = ""
    """of the written copy (the file itself when nothing changed): fits | does-not-fit | unreadable | crash | timeout | -"""
    plan_reason: str = ""
    peaks_equal: bool | None = None
    peak_differences: list[str] = field(default_factory=list)
    parser: str = ""
    """the framework's own parser on the written copy: accepted | rejected | not installed | -"""
    parser_detail: str = ""
    ok: bool = False
    mismatch: str = ""
    seconds: float = 0.0


def corpus_cases() -> list[Case]:
    cases = []
    for entry in table.load_manifest():
        args, _ = table.plan_args(entry)
        cases.append(Case(entry["id"], entry["framework"], table.CORPUS / entry["root"], args[3], args[5:]))
    return cases


def seed_cases() -> list[Case]:
    cases = []
    for path in sorted(SEEDS.iterdir()):
        found = SEED_LINE.search(path.read_text(encoding="utf-8")[:2000])
        if found is None:
            continue
        cases.append(Case(f"seeds/{path.name}", found.group(1), ROOT, found.group(2), found.group(3).split()))
    return cases


def _invoke(args: list[str], cwd: Path) -> tuple[int | None, str, str]:
    """Run `oomless ARGS` through the typer app from ``cwd``: (exit code or None on timeout, stdout, stderr)."""
    from typer.testing import CliRunner

    from oomless.cli.main import app

    here = os.getcwd()
    os.chdir(cwd)
    signal.alarm(TIMEOUT_S)
    try:
        result = CliRunner().invoke(app, args, catch_exceptions=True)
    except Timeout:
        return None, "", ""
    finally:
        signal.alarm(0)
        os.chdir(here)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += f"\nTraceback (most recent call last): {result.exception!r}"
    return result.exit_code, result.stdout, stderr


def _first_error(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip() and not line.startswith(("warning:", "note:"))]
    return (lines[0] if lines else "(no message)")[:300]


def _outcome(code: int | None, stderr: str, names: tuple[str, str]) -> str:
    if code is None:
        return "timeout"
    if "Traceback (most recent call last)" in stderr or code not in (0, 1, 2):
        return "crash"
    return {0: names[0], 1: names[1], 2: "refused"}[code]


def predicted_peaks(choice: dict[str, Any]) -> dict[tuple[str, str], int]:
    return {(p["device"], p["phase"]): p["peak_bytes"] for p in choice["phase_peaks"]}


def planned_peaks(plan: dict[str, Any]) -> dict[tuple[str, str], int]:
    out = {(d["role"], p["name"]): p["peak_bytes"] for d in plan["gpu"]["devices"] for p in d["phases"]}
    out.update({("host", p["name"]): p["peak_bytes"] for p in plan["host"]["phases"]})
    return out


def peak_differences(want: dict[tuple[str, str], int], got: dict[tuple[str, str], int]) -> list[str]:
    """Every (device, phase) whose read-back peak is not fit's within `TOLERANCE`, in GiB."""
    out = []
    for key in sorted(set(want) | set(got)):
        a, b = want.get(key), got.get(key)
        if a is None or b is None:
            out.append(f"{key[0]}/{key[1]}: {'only in the read-back' if a is None else 'missing in the read-back'}")
        elif abs(a - b) > TOLERANCE * max(a, b, 1):
            out.append(f"{key[0]}/{key[1]}: fit {a / 2**30:.2f} GiB, read back {b / 2**30:.2f} GiB")
    return out


def scan_one(case: Case, out_dir: Path) -> Row:
    start = time.perf_counter()
    row = Row(case.id, case.framework, case.hardware)
    out = out_dir / re.sub(r"[^\w.-]", "_", case.id)
    code, stdout, stderr = _invoke(["fit", "--from", case.framework, case.file, *case.hardware, "--write", str(out),
                                    "--top", "5", "--json"], case.cwd)
    row.fit = _outcome(code, stderr, ("found", "nothing-fits"))
    if row.fit != "found":
        row.fit_reason = _first_error(stderr) if row.fit in ("refused", "crash") else ""
        row.plan = "-"
        row.ok = row.fit == "nothing-fits" or (row.fit == "refused" and not row.fit_reason.startswith(WRITE_ERROR))
        row.mismatch = "" if row.ok else f"fit {row.fit}: {row.fit_reason}"
        row.seconds = round(time.perf_counter() - start, 2)
        return row
    document = json.loads(stdout)
    native = document.get("native") or {}
    row.patched_choice = rank = native.get("patched_choice", 0)
    choices = [document["best"], *document["alternatives"]]
    choice = choices[rank] if rank < len(choices) else document["best"]
    row.num_changes = choice["num_changes"]
    row.native_changes = native.get("changes", [])
    row.cannot_express = native.get("cannot_express")
    row.fit_read_back = native.get("read_back")
    written = [Path(p) for p in native.get("written", [])]
    row.written = bool(written)
    target = (out / Path(case.file).name) if written else case.cwd / case.file
    if choice["num_changes"] and not written:
        row.plan = "-"
        row.mismatch = "answer changes the file, nothing written: " + (row.cannot_express or "no native change")
        row.seconds = round(time.perf_counter() - start, 2)
        return row
    code, stdout, stderr = _invoke(["plan", "--from", case.framework, str(target), *case.hardware, "--json"], case.cwd)
    row.plan = {"refused": "unreadable"}.get(p := _outcome(code, stderr, ("fits", "does-not-fit")), p)
    if row.plan in ("fits", "does-not-fit"):
        row.peak_differences = peak_differences(predicted_peaks(choice), planned_peaks(json.loads(stdout)))
        row.peaks_equal = not row.peak_differences
    else:
        row.plan_reason = _first_error(stderr)
    if written:
        row.parser, row.parser_detail = parsers.check(case.framework, case.cwd / case.file, target, case.cwd, case.hardware)
    else:
        row.parser = "-"
    reasons = []
    if row.plan != "fits":
        reasons.append(f"read-back {row.plan}" + (f": {row.plan_reason}" if row.plan_reason else ""))
    if row.peak_differences:
        reasons.append("peaks differ: " + "; ".join(row.peak_differences[:4])
                       + (f" (+{len(row.peak_differences) - 4} more)" if len(row.peak_differences) > 4 else ""))
    if row.cannot_express:
        reasons.append(row.cannot_express)
    if row.parser == "rejected":
        reasons.append(f"the framework's parser rejects it: {row.parser_detail}")
    row.ok, row.mismatch = not reasons, " | ".join(reasons)
    row.seconds = round(time.perf_counter() - start, 2)
    return row


def _on_alarm(signum: int, frame: Any) -> None:
    raise Timeout()


def render(rows: list[Row], seconds: float) -> str:
    from writeback_render import render_doc

    return render_doc(rows, seconds, COMMAND, TOLERANCE)


def summary(rows: list[Row]) -> dict[str, Any]:
    found = [r for r in rows if r.fit == "found"]
    changed = [r for r in found if r.written]
    return {
        "files": len(rows),
        "fit": dict(Counter(r.fit for r in rows)),
        "found_unchanged": sum(r.num_changes == 0 for r in found),
        "written": len(changed),
        "written_reads_back": sum(r.plan in ("fits", "does-not-fit") for r in changed),
        "written_fits": sum(r.plan == "fits" for r in changed),
        "written_peaks_equal": sum(bool(r.peaks_equal) for r in changed),
        "written_parser_checked": sum(r.parser in ("accepted", "rejected") for r in changed),
        "written_parser_accepted": sum(r.parser == "accepted" for r in changed),
        "ok": sum(r.ok for r in rows),
        "mismatches": sum(not r.ok for r in rows),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="scan only ids starting with this (results are then not written)")
    parser.add_argument("--gpu", default=None, help="plan every file on this GPU instead (results are then not written)")
    options = parser.parse_args(argv)
    signal.signal(signal.SIGALRM, _on_alarm)
    cases = [c for c in corpus_cases() + seed_cases() if c.id.startswith(options.only)]
    if options.gpu:
        for c in cases:
            c.hardware[c.hardware.index("--gpu") + 1] = options.gpu
    start = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory(prefix="oomless-writeback-") as tmp:
        for case in cases:
            row = scan_one(case, Path(tmp))
            rows.append(row)
            mark = "ok" if row.ok else "MISMATCH"
            print(f"{row.seconds:6.1f}s {mark:8} {row.fit:12} {row.plan:12} {row.id}", flush=True)
            if not row.ok:
                print(f"        {row.mismatch[:400]}", flush=True)
    seconds = time.perf_counter() - start
    counts = summary(rows)
    print(json.dumps(counts))
    print(f"{seconds:.0f} s")
    if options.only or options.gpu:
        return 0
    RESULTS.write_text(json.dumps({"generated_by": COMMAND, "tolerance": TOLERANCE, "timeout_s": TIMEOUT_S,
                                   "seconds": round(seconds), "summary": counts,
                                   "rows": [asdict(r) for r in rows]}, indent=1) + "\n", encoding="utf-8")
    DOC.write_text(render(rows, seconds), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
