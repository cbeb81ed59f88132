"""StepBook by hand: samples and log events in, per-step per-phase records and series out (the
GPU figures are plain numbers here: what NVML would report, not a fake of NVML)."""

from __future__ import annotations

from pathlib import Path

from oomless.watch.sample import Sample, cgroup_memory_limit
from oomless.watch.steps import StepBook

MiB = 1024**2


def sample(t: float, tree: int, gpu: tuple[int, ...] = (), mine: tuple[int | None, ...] = ()) -> Sample:
    return Sample(t, tree, 1000 * MiB, 7000 * MiB, 8000 * MiB, gpu, mine)


def test_phases_and_steps_become_records_with_the_plan() -> None:
    book = StepBook(node_series=False, planned={"rollout": 50 * MiB, "train": 60 * MiB})
    book.add(sample(0.0, 100 * MiB, (10 * MiB,), (None,)))
    assert book.enter(1, "rollout", 1.0)[0]["phase"] == "load"
    book.add(sample(1.5, 120 * MiB, (40 * MiB,), (30 * MiB,)))  # the tree's share where the driver says
    book.enter(None, "train", 2.0)
    book.add(sample(2.5, 130 * MiB, (70 * MiB,), (None,)))     # else the device's used
    records = book.enter(2, None, 3.0)
    by_phase = {r["phase"]: r for r in records}
    assert by_phase["rollout"]["peak_bytes"] == 30 * MiB and by_phase["rollout"]["planned_bytes"] == 50 * MiB
    assert by_phase["train"]["peak_bytes"] == 70 * MiB and by_phase["train"]["device"] == "cuda"
    assert book.host_peaks == [(1, 130 * MiB)] and book.gpu_peaks == [[(1, 70 * MiB)]]
    assert book.step_seconds == [2.0]


def test_a_job_without_phases_is_held_against_the_largest_planned_phase() -> None:
    book = StepBook(node_series=True, planned_host={"load": 9 * MiB, "rollout": 5 * MiB, "train": 7 * MiB})
    book.enter(1, None, 0.0)
    book.add(sample(0.5, 3 * MiB))
    (record,) = book.close(1.0)
    assert (record["phase"], record["device"], record["planned_bytes"]) == ("step", "host", 7 * MiB)
    assert book.host_peaks == [(1, 1000 * MiB)]  # the node's used memory


def test_cgroup_limits(tmp_path: Path) -> None:
    (tmp_path / "memory.max").write_text("max\n")
    assert cgroup_memory_limit(tmp_path) is None
    (tmp_path / "memory.max").write_text(f"{8 * 1024 * MiB}\n")
    assert cgroup_memory_limit(tmp_path) == 8 * 1024 * MiB
    assert cgroup_memory_limit(tmp_path / "absent") is None
