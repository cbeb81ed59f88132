"""Shared helpers for the verl, EasyR1, OpenRLHF, ORZ and VLM-R1 adapter tests."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from oomless.adapters import HardwareFlags, export_native, import_native
from oomless.planner.plan import make_plan
from oomless.spec.load import load_run, parse_spec, resolve
from oomless.spec.run import RunSpec
from tests.helpers import EXAMPLES

HERE = Path(__file__).resolve().parent
DATA, GOLDEN, NATIVE, SEEDS = HERE / "data", HERE / "golden", EXAMPLES / "seeds" / "native", EXAMPLES / "seeds"


def imported(framework: str, path: Path, **flags) -> RunSpec:
    return parse_spec(import_native(framework, path, HardwareFlags(**flags)).spec)


def round_trip(framework: str, spec: RunSpec, out_dir: Path, **flags) -> list[RunSpec]:
    """Export ``spec`` and import every written launch/config file back."""
    written = export_native(framework, spec, out_dir, force=False)
    readable = [p for p in written if p.suffix in (".yaml", ".sh", ".py") and not p.name.endswith("_launch.sh")]
    return [imported(framework, p, **flags) for p in readable]


def verdict(spec: RunSpec) -> tuple[bool, str, str]:
    run = resolve(spec)
    plan = make_plan(run.spec, run.arch, run.gpu, run.archs)
    return plan.fits, plan.binding.phase, plan.binding.device


def seed_spec(name: str) -> RunSpec:
    return load_run(SEEDS / name).spec


def check_golden(written: Path, golden_name: str) -> None:
    """Exported text equals the golden file (UPDATE_GOLDEN=1 rewrites it)."""
    golden = GOLDEN / golden_name
    text = written.read_text(encoding="utf-8")
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text, encoding="utf-8")
    assert text == golden.read_text(encoding="utf-8"), f"{written.name} differs from golden {golden_name}"


def fit_write(framework: str, source: str | Path, out_dir: Path, *flags: str) -> Any:
    """`oomless fit --from FRAMEWORK SOURCE FLAGS --write OUT_DIR --top 0 --json` through the CLI."""
    from typer.testing import CliRunner

    from oomless.cli.main import app

    return CliRunner().invoke(app, ["fit", "--from", framework, str(source), *flags, "--write", str(out_dir), "--top", "0", "--json"])
