"""The GPU harness's report (benchmarks/gpu/phase_report.py): steady-state peaks per phase, the
run-level comparison, the replan of the committed H200 runs with the current planner, the table
and the docs section rendered from it. No GPU: the measurements are the committed ones."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
from pathlib import Path
from types import ModuleType

import pytest

from oomless.planner.plan import make_plan
from oomless.spec.load import load_run
from oomless.train.telemetry import planned_phases

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "gpu"
GIB = 1 << 30


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


R = _load("phase_report", ROOT / "benchmarks" / "gpu" / "phase_report.py")
DOC = _load("make_validation_doc", ROOT / "scripts" / "make_validation_doc.py")


def _record(step: int, phase: str, allocated: int, reserved: int, nvml: int, planned: int) -> dict:
    return {"step": step, "phase": phase, "peak_allocated_bytes": allocated, "peak_bytes": reserved,
            "gpu_used_bytes": nvml, "planned_bytes": planned, "planned_total_bytes": planned + 100}


SYNTHETIC = [
    _record(0, "load", 10, 12, 20, 11),
    _record(1, "rollout", 30, 32, 40, 50),       # no optimizer states yet: not steady
    _record(1, "optimizer", 90, 95, 105, 80),    # the run's high-water mark
    _record(2, "rollout", 55, 95, 105, 50),
    _record(2, "optimizer", 88, 95, 105, 80),
    _record(3, "rollout", 60, 95, 105, 50),
    _record(3, "optimizer", 86, 96, 106, 80),
]


def test_steady_peaks_take_steps_from_two_on_and_a_single_step_phase_as_it_is() -> None:
    rows = {r["phase"]: r for r in R.steady_phase_peaks(SYNTHETIC)}
    assert list(rows) == ["load", "rollout", "optimizer"]
    assert rows["load"]["steps"] == [0] and not rows["load"]["steady"]
    assert rows["load"]["allocated_peak_bytes"] == 10
    rollout = rows["rollout"]
    assert rollout["steps"] == [2, 3] and rollout["steady"]
    assert rollout["allocated_peak_bytes"] == 60 and rollout["first_step_allocated_bytes"] == 30
    assert rollout["error_at_run_pct"] == pytest.approx(100 * (50 - 60) / 60, abs=0.01)
    # step 1's larger optimizer peak is left out of the steady figure
    assert rows["optimizer"]["allocated_peak_bytes"] == 88
    assert rows["optimizer"]["reserved_peak_bytes"] == 96 and rows["optimizer"]["nvml_used_bytes"] == 106


def test_a_one_step_run_uses_step_one() -> None:
    rows = R.steady_phase_peaks([r for r in SYNTHETIC if r["step"] <= 1])
    rollout = next(r for r in rows if r["phase"] == "rollout")
    assert rollout["steps"] == [1] and not rollout["steady"] and rollout["allocated_peak_bytes"] == 30


def test_run_peaks_cover_every_step() -> None:
    run = R.run_peaks(SYNTHETIC)
    assert (run["max_allocated_bytes"], run["max_reserved_bytes"], run["max_nvml_used_bytes"]) == (90, 96, 106)
    assert (run["plan_at_run_peak_bytes"], run["plan_at_run_peak_total_bytes"]) == (80, 180)


def test_error_pct_needs_both_sides() -> None:
    assert R.error_pct(110, 100) == 10.0
    assert R.error_pct(None, 100) is None and R.error_pct(100, 0) is None


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name not in ("gpu-replan.json", "gpu-phases.md")}


@pytest.fixture(scope="module")
def replanned(tmp_path_factory: pytest.TempPathFactory) -> dict:
    before = _digest(RESULTS)
    rep = R.report(RESULTS, replan=True)
    assert _digest(RESULTS) == before, "the replan must leave the measurements as committed"
    return rep


def _plan_of(model_id: str, folder: Path):
    R.write_model_config(model_id, folder)
    shutil.copyfile(RESULTS / model_id.split("/")[-1] / "spec.yaml", folder / "spec.yaml")
    run = load_run(folder / "spec.yaml")
    return make_plan(run.spec, run.arch, run.gpu, run.archs)


def test_the_replan_of_the_committed_runs_is_what_make_plan_gives(replanned: dict, tmp_path: Path) -> None:
    committed = json.loads((RESULTS / "gpu-phases.json").read_text())
    assert [m["model"] for m in replanned["models"]] == list(dict.fromkeys(r["model"] for r in committed["rows"]))
    assert replanned["environment"] == committed["environment"]
    for i, m in enumerate(replanned["models"]):
        plan = _plan_of(m["model"], tmp_path / str(i))
        group = next(g for g in plan.devices if g.role == "train")
        totals = {p.name: p.peak_bytes for p in group.phases}
        visible = planned_phases(plan, "cuda")
        assert {r["phase"] for r in m["phases"]} >= {"load", "rollout", "train", "optimizer"}
        for row in m["phases"]:
            now, total = row["plan_now_bytes"], row["plan_now_total_bytes"]
            assert isinstance(now, int) and now > 0 and isinstance(total, int)
            assert total == totals[row["phase"]] and now == visible[row["phase"]].planned_bytes
            assert now <= total
            assert row["error_now_pct"] == R.error_pct(now, row["allocated_peak_bytes"])
        assert m["run"]["plan_now_peak_total_bytes"] == max(totals[r["phase"]] for r in m["phases"])


def test_the_replan_reads_the_measurements_from_the_telemetry(replanned: dict) -> None:
    for m in replanned["models"]:
        records = R.read_telemetry(R.run_folder(RESULTS, m["model"]))
        assert len({r["step"] for r in records}) >= 3  # load + two optimizer steps
        for row in m["phases"]:
            same = [r for r in records if r["phase"] == row["phase"] and r["step"] in row["steps"]]
            assert row["allocated_peak_bytes"] == max(r["peak_allocated_bytes"] for r in same)
            assert row["steady"] == (row["phase"] != "load")
        assert m["run"]["max_nvml_used_bytes"] == max(r["gpu_used_bytes"] for r in records)
        assert m["run"]["max_reserved_bytes"] >= max(r["allocated_peak_bytes"] for r in m["phases"])


def test_the_table_has_a_row_per_model_and_phase_and_explains_reserved(replanned: dict) -> None:
    table = R.markdown(replanned)
    num_rows = sum(len(m["phases"]) for m in replanned["models"])
    phase_rows = [line for line in table.splitlines() if line.startswith("| Qwen/") and " | hf | " in line]
    assert len(phase_rows) == num_rows
    assert "| plan now | error now |" in table and "high-water mark" in table
    assert all(f"| {m['model']} | " in table.split("Run level", 1)[1] for m in replanned["models"])
    load_row = next(line for line in phase_rows if " | load | " in line)
    assert "(only)" in load_row
    assert R.markdown({k: v for k, v in replanned.items() if k != "planner"}).count("plan now") == 0


def test_the_validation_doc_section_renders_the_replan(replanned: dict) -> None:
    text = "\n".join(DOC.render_gpu(replanned))
    assert text.startswith("## 3. GPU: TRL GRPO steps on an H200")
    for m in replanned["models"]:
        for row in m["phases"]:
            assert f"| {m['model']} | {row['phase']} |" in text
    assert "--replan benchmarks/results/gpu" in text and "device_run.sh" in text
    assert replanned["environment"]["torch"] in text


def test_nvml_before_cuda_is_read_from_the_device_script() -> None:
    H = _load("grpo_phases", ROOT / "benchmarks" / "gpu" / "grpo_phases.py")
    assert H.nvml_used_before_cuda_bytes({"NVML_USED_BEFORE_CUDA_MIB": "4\n7"}) == 4 * (1 << 20)
    assert H.nvml_used_before_cuda_bytes({"NVML_USED_BEFORE_CUDA_MIB": ""}) is None
    assert H.nvml_used_before_cuda_bytes({}) is None
    script = (ROOT / "benchmarks" / "gpu" / "device_run.sh").read_text().splitlines()
    commands = [line for line in script if line.strip() and not line.startswith("#")]
    first_nvml = next(i for i, line in enumerate(commands) if "memory.used" in line)
    first_python = next(i for i, line in enumerate(commands) if "python3" in line)
    assert first_nvml < first_python, "NVML must be read before anything initialises CUDA"
