"""The doctor's reading of telemetry: where growth began, how fast, and the phase that peaked."""

from __future__ import annotations

import pytest

from oomless.doctor.growth import find_growth, telemetry_findings

MiB = 1024**2


def records(onset: int, steps: int, slope: int, spike_at: int | None = None) -> list[dict]:
    out = [{"step": 0, "phase": "load", "peak_bytes": 300 * MiB, "device": "host", "rss_bytes": 300 * MiB}]
    for s in range(1, steps + 1):
        base = 500 * MiB + max(0, s - onset) * slope + (s % 3) * MiB // 2
        for phase, extra in (("rollout", 40 * MiB), ("train", 0)):
            peak = base + extra + (4000 * MiB if (s, phase) == (spike_at, "train") else 0)
            out.append({"step": s, "phase": phase, "peak_bytes": peak, "device": "host", "rss_bytes": peak})
    return out


@pytest.mark.parametrize("onset", [1, 10, 25])
def test_growth_onset_by_hand(onset: int) -> None:
    found = telemetry_findings(records(onset, 40, 64 * MiB, spike_at=30))
    assert found is not None and len(found.growth) == 1
    growth = found.growth[0]
    assert abs(growth.start_step - onset) <= 1, growth
    assert growth.bytes_per_step == pytest.approx(64 * MiB, rel=0.05)


def test_the_peak_phase_and_step() -> None:
    found = telemetry_findings(records(10, 20, 64 * MiB, spike_at=12))
    assert (found.peak.phase, found.peak.step) == ("train", 12)


def test_flat_runs_have_no_growth() -> None:
    assert telemetry_findings(records(10**6, 40, 64 * MiB)).growth == ()
    assert find_growth("host", [(s, 500 * MiB) for s in range(1, 4)]) is None
