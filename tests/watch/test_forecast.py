"""The growth forecast (Theil–Sen over a sliding window) and the log patterns, by hand."""

from __future__ import annotations

import pytest

from oomless.watch.forecast import DEFAULT_HORIZON_STEPS, describe, fit, forecast
from oomless.watch.logs import read_line

MiB = 1024**2


def test_an_exact_line_is_recovered() -> None:
    trend = fit([(s, 100 * MiB + 64 * MiB * s) for s in range(1, 11)])
    assert trend is not None and trend.slope_bytes_per_step == 64 * MiB and trend.intercept_bytes == 100 * MiB


def test_a_spike_does_not_move_the_fit() -> None:
    points = [(s, 1000 * MiB + 10 * MiB * s) for s in range(1, 21)]
    points[7] = (8, 9000 * MiB)  # a checkpoint save
    assert fit(points).slope_bytes_per_step == pytest.approx(10 * MiB)


def test_crossing_step_by_hand() -> None:
    # 100 MiB + 64 MiB/step reaches 2 GiB (2048 MiB) at step (2048 - 100) / 64 = 30.4 → 31.
    peaks = [(s, 100 * MiB + 64 * MiB * s) for s in range(1, 9)]
    crossing = forecast("host", peaks, 2048 * MiB, last_step=100, seconds_per_step=6.0)
    assert crossing is not None and crossing.step == 31 and crossing.current_step == 8
    assert crossing.seconds_left == pytest.approx((31 - 8) * 6.0)
    assert describe(crossing) == "host: +64.0 MiB/step, crosses the limit of 2.00 GiB at step ~31 (in ~2 min)"


def test_no_warning_past_the_end_of_the_run() -> None:
    peaks = [(s, 100 * MiB + 64 * MiB * s) for s in range(1, 9)]
    assert forecast("host", peaks, 2048 * MiB, last_step=30, seconds_per_step=None) is None
    assert forecast("host", peaks, 2048 * MiB, last_step=None, seconds_per_step=None).step == 31


def test_the_default_horizon_bounds_an_unknown_length() -> None:
    peaks = [(s, 2 * MiB * s) for s in range(1, 9)]
    far = (8 + DEFAULT_HORIZON_STEPS + 10) * 2 * MiB
    assert forecast("host", peaks, far, last_step=None, seconds_per_step=None) is None


@pytest.mark.parametrize("peaks", [
    [(s, 500 * MiB) for s in range(1, 21)],                                # flat
    [(s, 500 * MiB + (MiB // 4) * s) for s in range(1, 21)],               # below 1 MiB/step
    [(s, 500 * MiB + (40 * MiB if s % 2 else 0)) for s in range(1, 21)],   # noise, no trend
    [(s, 500 * MiB + 64 * MiB * s) for s in range(1, 4)],                  # too few steps
])
def test_no_trend_no_warning(peaks: list[tuple[int, int]]) -> None:
    assert forecast("host", peaks, 600 * MiB, last_step=None, seconds_per_step=None) is None


@pytest.mark.parametrize("line, step, total, phase", [
    ("[oomless] step 12", 12, None, None),
    ("[oomless] step 3 phase rollout", 3, None, "rollout"),
    (" 12%|██        | 12/100 [00:30<03:40,  2.50s/it]", 13, 100, None),
    ("Train:  50%|█████     | 50/100 [01:00<01:00,  1.2s/it]", 51, 100, None),
    ("step:7 - actor/pg_loss:0.1 - critic/score/mean:0.5", 8, None, None),  # printed after step 7
    ("{'loss': 0.1, 'global_step': 40}", 41, None, None),
    ("(WorkerDict pid=9) Before update_policy, memory allocated (GB): 12.5", None, None, "train"),
    ("Before generate_sequences, memory allocated (GB): 3.1", None, None, "rollout"),
    ("Step: 9/300 loss=0.2", 9, 300, None),
    ("step 4", 4, None, None),
    ("Processed prompts: 100%|██████████| 64/64 [00:03<00:00]", None, None, "rollout"),
    ("Saving model checkpoint to out/checkpoint-100", None, None, "save"),
    ("(WorkerDict pid=1) compute_log_prob done", None, None, "logprob"),
])
def test_log_lines(line: str, step: int | None, total: int | None, phase: str | None) -> None:
    event = read_line(line)
    assert event is not None and (event.step, event.total_steps, event.phase) == (step, total, phase)


@pytest.mark.parametrize("line", ["Loading checkpoint shards:  50%|█████     | 2/4 [00:01<00:01]", "stepping stone", "x" * 100_000])
def test_lines_that_are_not_steps(line: str) -> None:
    event = read_line(line)
    assert event is None or event.step is None
