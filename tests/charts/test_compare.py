"""The comparison document, by hand and on the seed cases."""

from __future__ import annotations

from typing import Any

from oomless.charts.compare import (
    compare_documents, component_changes, flatten, phase_peak_changes, show_value, signed_bytes, spec_differences,
)
from oomless.units import GiB, MiB


def test_flatten_and_spec_differences_by_hand() -> None:
    before = {"batch": {"micro_batch_size": 8, "num_generations": 8}, "rollout": {"sleep_level": 0}, "model": "m"}
    after = {"batch": {"micro_batch_size": 2, "num_generations": 8}, "rollout": {"sleep_level": 1, "offload": True}, "model": "m"}
    assert flatten(before) == {"batch.micro_batch_size": 8, "batch.num_generations": 8, "rollout.sleep_level": 0, "model": "m"}
    assert spec_differences(before, after) == [
        {"field": "batch.micro_batch_size", "before": 8, "after": 2},
        {"field": "rollout.sleep_level", "before": 0, "after": 1},
        {"field": "rollout.offload", "before": None, "after": True},
    ]


def _doc(devices: dict[str, dict[str, dict[str, int]]], host: dict[str, dict[str, int]]) -> dict[str, Any]:
    def phases(by_phase: dict[str, dict[str, int]]) -> list[dict[str, Any]]:
        return [{"name": n, "peak_bytes": sum(c.values()), "components": c} for n, c in by_phase.items()]

    return {"gpu": {"devices": [{"role": r, "phases": phases(p)} for r, p in devices.items()]},
            "host": {"phases": phases(host)}}


def test_phase_peaks_pair_roles_and_leave_missing_sides_empty() -> None:
    before = _doc({"train": {"load": {"w": 4 * GiB}, "train": {"w": 4 * GiB, "act": 2 * GiB}},
                   "actor+vllm": {"load": {"vllm.kv_cache": 9 * GiB}}}, {"load": {"model_loading.actor": GiB}})
    after = _doc({"train": {"load": {"w": 2 * GiB}, "train": {"w": 2 * GiB, "act": 2 * GiB}},
                  "rollout": {"load": {"vllm.kv_cache": 12 * GiB}}}, {"load": {"model_loading.actor": GiB}})
    rows = [(r["device"], r["device_role"], r["phase"], r["before_bytes"], r["after_bytes"], r["delta_bytes"])
            for r in phase_peak_changes(before, after)]
    assert rows == [
        ("gpu", "train", "load", 4 * GiB, 2 * GiB, -2 * GiB),
        ("gpu", "train", "train", 6 * GiB, 4 * GiB, -2 * GiB),
        ("gpu", "actor+vllm", "load", 9 * GiB, None, None),
        ("gpu", "rollout", "load", None, 12 * GiB, None),
        ("host", None, "load", GiB, GiB, 0),
    ]
    changes = component_changes(before, after)
    assert [(c["name"], c["delta_bytes"]) for c in changes] == [("vllm.kv_cache", 3 * GiB), ("w", -2 * GiB)]


def test_s0_seed_comparison(documents: dict[str, Any]) -> None:
    before, after = documents["s0-before"], documents["s0-after"]
    c = compare_documents(before, after, {"batch": {"micro_batch_size": 8}}, {"batch": {"micro_batch_size": 2}}, "a", "b")
    d = c["differences"]
    assert d["verdict"] == {"before": False, "after": True}
    assert (d["binding"]["before"]["phase"], d["binding"]["before"]["device_role"]) == ("load", "train")
    assert d["gpu_peak"]["delta_bytes"] == after["gpu"]["peak_bytes"] - before["gpu"]["peak_bytes"] < 0
    assert d["components"][0]["name"] == "vllm.kv_cache"  # 0.9 → 0.5 of the card: the largest change
    deltas = [abs(r["delta_bytes"]) for r in d["components"]]
    assert deltas == sorted(deltas, reverse=True)
    for row in d["phase_peaks"]:
        if row["delta_bytes"] is not None:
            assert row["delta_bytes"] == row["after_bytes"] - row["before_bytes"]
    assert c["before"]["plan"] is before and c["after"]["spec"] == "b"


def test_display_helpers() -> None:
    assert signed_bytes(-3 * MiB) == "−3.0 MiB"
    assert signed_bytes(GiB) == "+1.00 GiB"
    assert signed_bytes(0) == "0" and signed_bytes(None) == "—"
    assert [show_value(v) for v in (None, "zero3", True, 0.9, [1, 2])] == ["—", "zero3", "true", "0.9", "[1, 2]"]
