"""Time `make_plan` as the fit search calls it: every call of one `fit_file`, cold and warm.

The fit search plans hundreds of variants of one run (region probes, verification samples,
re-checks of its answers). This runs `fit_file` twice in one interpreter and sums the process
(CPU) time spent inside those `make_plan` calls: the first fit (cold: per-architecture and
planner memos empty; its very first call also fills the per-architecture caches, shown apart)
and a second fit of the same spec (warm). Which source tree is timed is the one on
PYTHONPATH, so two trees compare as:

    PYTHONPATH=/tmp/before/src .venv/bin/python benchmarks/make_plan_probes.py examples/seeds/s0-before.yaml
    PYTHONPATH=src .venv/bin/python benchmarks/make_plan_probes.py examples/seeds/s0-before.yaml

Prints one line; a benchmark, not a test.
"""

from __future__ import annotations

import sys
import time

from oomless.fit import probe
from oomless.fit.search import FitOptions, fit_file
from oomless.planner import plan as planner


def main(spec_path: str) -> str:
    spent = {"seconds": 0.0, "calls": 0}
    firsts: list[float] = []
    make_plan = planner.make_plan

    def timed(spec, arch, gpu, archs=None, explain=False):  # type: ignore[no-untyped-def]
        start = time.process_time()
        plan = make_plan(spec, arch, gpu, archs, explain)
        took = time.process_time() - start
        spent["seconds"] += took
        spent["calls"] += 1
        if not firsts:
            firsts.append(took)
        return plan

    probe.make_plan = timed  # the fit search calls make_plan through fit.probe
    parts = []
    for label in ("cold", "warm"):
        spent.update(seconds=0.0, calls=0)
        start = time.process_time()
        fit_file(spec_path, FitOptions())
        whole = time.process_time() - start
        s, n = spent["seconds"], spent["calls"]
        parts.append(f"{label}: fit_file {whole:.3f} s CPU, make_plan {s:.3f} s in {n} calls = {1000 * s / n:.3f} ms each")
    return " | ".join(parts) + f" | first call of the process {1000 * firsts[0]:.1f} ms"


if __name__ == "__main__":
    print(main(sys.argv[1] if len(sys.argv) > 1 else "examples/seeds/s0-before.yaml"))
