"""The fuzz suite's long run (issue 15): every property of tests/fuzz with many examples and
random seeds, then the examples hypothesis actually ran, per kind of input.

    .venv/bin/python scripts/fuzz_long_run.py            # 1,250 per property (the issue's floor)
    .venv/bin/python scripts/fuzz_long_run.py --examples 300 -k logs

It runs `OOMLESS_FUZZ_EXAMPLES=N pytest tests/fuzz -p no:cacheprovider
--hypothesis-show-statistics`, keeps pytest's output in --out, and prints the passing,
failing and invalid examples of each property (hypothesis can stop a property before N when
it runs out of new inputs, so the counts are read, not assumed) and the wall time.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KINDS = {
    "test_specs.py": "specs", "test_cli.py": "spec files (CLI)", "test_logs.py": "logs",
    "test_scripts.py": "framework configs", "test_issue15_reproducers.py": "reproducers",
}
"""Which kind of input each file of tests/fuzz generates."""
_TEST = re.compile(r"^(tests/fuzz/(\S+?\.py))::(\S+):$")
_COUNTS = re.compile(r"(\d+) passing, (\d+) failing, and (\d+) invalid")


def examples(output: str) -> dict[str, list[int]]:
    """Property → [passing, failing, invalid] summed over hypothesis's phases."""
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    current = None
    for line in output.splitlines():
        test = _TEST.match(line.strip())
        if test:
            current = test.group(1) + "::" + test.group(3)
            continue
        counts = _COUNTS.search(line)
        if counts and current:
            for i, n in enumerate(counts.groups()):
                out[current][i] += int(n)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=1250, help="Examples per property (default 1250).")
    parser.add_argument("-k", default=None, help="pytest -k expression (default: every property).")
    parser.add_argument("--out", type=Path, default=Path("fuzz-long-run.txt"), help="Where pytest's output goes.")
    args = parser.parse_args(argv)
    command = [sys.executable, "-m", "pytest", "tests/fuzz", "-p", "no:cacheprovider", "--hypothesis-show-statistics"]
    if args.k:
        command += ["-k", args.k]
    env = {**os.environ, "OOMLESS_FUZZ_EXAMPLES": str(args.examples)}
    start = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - start
    args.out.write_text(done.stdout + done.stderr, encoding="utf-8")
    per_test = examples(done.stdout)
    per_kind: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for test, counts in sorted(per_test.items()):
        print(f"{test}: {counts[0]} passing, {counts[1]} failing, {counts[2]} invalid")
        kind = KINDS.get(test.split("::")[0].rsplit("/", 1)[-1], "other")
        per_kind[kind] = [a + b for a, b in zip(per_kind[kind], counts)]
    for kind, counts in per_kind.items():
        print(f"{kind}: {counts[0]} passing, {counts[1]} failing, {counts[2]} invalid")
    summary = next((line for line in reversed(done.stdout.splitlines()) if " in " in line and ("passed" in line or "failed" in line)), "")
    print(f"pytest exit {done.returncode}: {summary.strip()}; wall {wall:.0f} s; output in {args.out}")
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
