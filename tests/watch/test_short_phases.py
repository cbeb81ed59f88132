"""A phase shorter than the sampling interval still gets a sample of its own: the watch samples
as each step or phase mark is read, not only on its clock (a TRL train phase on a tiny model
can last less than one interval and would otherwise vanish from the telemetry)."""

from __future__ import annotations

import signal
from itertools import count
from pathlib import Path

from oomless.watch.sample import Sample
from oomless.watch.session import WatchOptions, _Watch


class FakeSampler:
    """Host memory that rises by one MiB per sample; no GPU."""

    def __init__(self) -> None:
        self.n = count(1)
        self.gpu = None

    def sample(self) -> Sample:
        i = next(self.n)
        return Sample(time=float(i), tree_bytes=i << 20, host_used_bytes=i << 20,
                      host_available_bytes=1 << 34, host_total_bytes=1 << 35)


def test_marks_read_within_one_interval_each_get_their_phase_record(tmp_path: Path) -> None:
    watch = _Watch(WatchOptions(out_dir=tmp_path, interval_s=10.0), FakeSampler(), lambda _: None,
                   lambda _sig: None)
    for line in ("[oomless] step 1 phase rollout", "[oomless] step 1 phase train",
                 "[oomless] step 1 phase optimizer", "[oomless] step 2 phase rollout"):
        watch.lines.put((0.0, line))
    watch.tick()  # one clock tick: all four marks arrive before it
    records = watch.book.close(1.0)
    watch.write(records)
    from oomless.telemetry import read_records

    written = read_records(tmp_path / "telemetry.jsonl")
    step1 = {r["phase"]: r["rss_bytes"] for r in written if r["step"] == 1}
    assert set(step1) == {"rollout", "train", "optimizer"}, step1
    assert step1["rollout"] < step1["train"] < step1["optimizer"]


def test_without_marks_a_tick_waits_for_lines_up_to_its_interval(tmp_path: Path) -> None:
    import threading
    import time

    watch = _Watch(WatchOptions(out_dir=tmp_path, interval_s=5.0), FakeSampler(), lambda _: None,
                   lambda _sig: signal.SIGTERM)
    threading.Timer(0.05, lambda: watch.lines.put((time.monotonic(), "[oomless] step 1 phase train"))).start()
    started = time.monotonic()
    watch.tick(wait_s=0.5)
    waited = time.monotonic() - started
    assert watch.book.phase == "train" and watch.book.step == 1
    assert 0.04 < waited < 1.5
