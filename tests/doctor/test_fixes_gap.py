"""The gap doctor hands to fit as a margin: what the run wanted beyond the plan's peak, only when
the plan predicted a fit on the same hardware."""

from __future__ import annotations

from oomless.doctor.reconcile import CAPACITY_TOLERANCE, Reconciliation

GIB = 2**30


def _rec(fits: bool, predicted: int, capacity: int, logged_capacity: int, demand: int | None, device: str = "gpu") -> Reconciliation:
    return Reconciliation(device, "train", "train", predicted, capacity, fits, logged_capacity, None, demand, (), "")


def test_gap_is_demand_beyond_the_planned_peak() -> None:
    assert _rec(True, 50 * GIB, 80 * GIB, 80 * GIB, 83 * GIB).gap_bytes == 33 * GIB


def test_no_gap_when_the_plan_already_predicted_the_failure_or_has_no_numbers() -> None:
    assert _rec(False, 90 * GIB, 80 * GIB, 80 * GIB, 95 * GIB).gap_bytes == 0
    assert _rec(True, 50 * GIB, 80 * GIB, 80 * GIB, None).gap_bytes == 0
    assert _rec(True, 50 * GIB, 80 * GIB, 80 * GIB, 40 * GIB).gap_bytes == 0  # wanted less than planned: no gap


def test_no_gap_across_different_hardware() -> None:
    other = int(80 * GIB * (1 + 2 * CAPACITY_TOLERANCE))
    assert _rec(True, 50 * GIB, 80 * GIB, other, 90 * GIB).gap_bytes == 0
    assert _rec(True, 50 * GIB, 80 * GIB, int(80 * GIB * (1 + CAPACITY_TOLERANCE / 2)), 90 * GIB).gap_bytes == 40 * GIB


def test_host_gap_uses_ram_in_use() -> None:
    assert _rec(True, 100 * GIB, 200 * GIB, 256 * GIB, 230 * GIB, device="host").gap_bytes == 130 * GIB
