"""Truncated, mixed or garbage input never crashes the doctor (hypothesis).

Properties: any bytes are read and diagnosed without an exception; every truncation of a corpus
log is diagnosed, and keeps the full diagnosis while the primary message's line is whole;
interleaving two logs line by line finds only kinds the two logs hold; concatenating two logs
finds both; garbage lines around a log do not hide it.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oomless.doctor import clean, diagnose, find_all, read_log
from tests.doctor.corpus import SIDECARS, log_of

LOG_TEXTS = {p.stem: read_log(log_of(p)) for p in SIDECARS}
NAMES = sorted(LOG_TEXTS)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.binary(max_size=4096))
def test_random_bytes_never_crash(data: bytes) -> None:
    d = diagnose(clean(data.decode("utf-8", errors="replace")))
    assert d.recognised == (d.primary is not None)


@FUZZ
@given(st.binary(max_size=2048))
def test_random_bytes_through_a_file(tmp_path_factory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "log"
    path.write_bytes(data)
    diagnose(read_log(path))


@FUZZ
@given(st.sampled_from(NAMES), st.data())
def test_truncations_of_corpus_logs(name: str, data: st.DataObject) -> None:
    text = LOG_TEXTS[name]
    whole = diagnose(text)
    assert whole.primary is not None
    cut = data.draw(st.integers(0, len(text)))
    d = diagnose(text[:cut])
    end_of_primary = text.find("\n", whole.primary.offset)
    if end_of_primary >= 0 and cut > end_of_primary:
        assert d.primary is not None and d.primary.kind == whole.primary.kind


def test_every_line_truncation_of_every_corpus_log() -> None:
    for name, text in LOG_TEXTS.items():
        whole = diagnose(text)
        assert whole.primary is not None
        for cut in (i for i, c in enumerate(text) if c == "\n"):
            d = diagnose(text[:cut + 1])
            if cut >= text.find("\n", whole.primary.offset):
                assert d.primary is not None and d.primary.kind == whole.primary.kind, (name, cut)


@FUZZ
@given(st.sampled_from(NAMES), st.sampled_from(NAMES), st.randoms(use_true_random=False))
def test_interleaved_logs_find_only_their_kinds(a: str, b: str, rng) -> None:
    lines_a, lines_b = LOG_TEXTS[a].split("\n"), LOG_TEXTS[b].split("\n")
    mixed = []
    while lines_a or lines_b:
        source = lines_a if lines_b == [] or (lines_a and rng.random() < 0.5) else lines_b
        mixed.append(source.pop(0))
    kinds = {f.kind for f in find_all(LOG_TEXTS[a])} | {f.kind for f in find_all(LOG_TEXTS[b])}
    assert {f.kind for f in find_all("\n".join(mixed))} <= kinds


@FUZZ
@given(st.sampled_from(NAMES), st.sampled_from(NAMES))
def test_concatenated_logs_find_both(a: str, b: str) -> None:
    found = {f.kind for f in find_all(LOG_TEXTS[a] + "\n" + LOG_TEXTS[b])}
    assert diagnose(LOG_TEXTS[a]).primary.kind in found
    assert diagnose(LOG_TEXTS[b]).primary.kind in found


@FUZZ
@given(st.sampled_from(NAMES), st.lists(st.text(max_size=200), max_size=20), st.lists(st.text(max_size=200), max_size=20))
def test_garbage_around_a_log_does_not_hide_it(name: str, before: list[str], after: list[str]) -> None:
    text = "\n".join(before) + "\n" + LOG_TEXTS[name] + "\n" + "\n".join(after)
    d = diagnose(clean(text))
    assert d.primary is not None


def test_a_long_log_of_repeated_frames(tmp_path: Path) -> None:
    """Linear-time scanning: 200k traceback lines and an error at the end."""
    frames = '  File "/x/trl/trainer/grpo_trainer.py", line 1, in compute_loss\n    loss = f()\n' * 100_000
    d = diagnose(frames + "RuntimeError: CUDA error: out of memory\n")
    assert d.primary is not None and d.phase.phase == "train"
