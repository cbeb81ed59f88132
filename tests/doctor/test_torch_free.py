"""The doctor is pure Python: diagnosing a log and reconciling it with a plan leave torch and
transformers unloaded (stand-in packages make an import visible even where they are missing)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.doctor.corpus import LOGS
from tests.helpers import EXAMPLES, ROOT

DIAGNOSE_AND_RECONCILE = """
import sys
from oomless.doctor import diagnose, read_log
from oomless.doctor.reconcile import reconcile
from oomless.planner.plan import make_plan
from oomless.spec.load import load_run
d = diagnose(read_log(sys.argv[1]))
run = load_run(sys.argv[2])
assert reconcile(d, make_plan(run.spec, run.arch, run.gpu, run.archs)) is not None
print(",".join(sorted(m for m in ("torch", "transformers") if m in sys.modules)))
"""


def test_doctor_leaves_torch_unloaded(tmp_path: Path) -> None:
    for name in ("torch", "transformers"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("", encoding="utf-8")
    log = next(LOGS.glob("02-*.log"))
    done = subprocess.run(
        [sys.executable, "-c", DIAGNOSE_AND_RECONCILE, str(log), str(EXAMPLES / "quickstart.yaml")],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""
