"""Every real log of the corpus gets the diagnosis its sidecar expects: kind, message format,
phase, and every number and label the message shows."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from oomless.doctor import Kind, diagnose, read_log
from tests.doctor.corpus import LOGS, SIDECARS, log_of, sidecar

MIN_CORPUS = 30


@pytest.mark.parametrize("path", SIDECARS, ids=[p.stem for p in SIDECARS])
def test_corpus_log_is_diagnosed_as_expected(path: Path) -> None:
    expected = sidecar(path)["expected"]
    d = diagnose(read_log(log_of(path)))
    assert d.primary is not None, "nothing recognised"
    got = {
        "kind": d.primary.kind.value, "variant": d.primary.variant, "phase": d.phase.phase,
        "phase_detail": d.phase.detail, "numbers": d.primary.numbers, "labels": d.primary.labels,
    }
    assert got == expected
    assert d.cause and d.fixes


@pytest.mark.parametrize("path", SIDECARS, ids=[p.stem for p in SIDECARS])
def test_sidecar_names_its_public_source(path: Path) -> None:
    data = sidecar(path)
    assert re.fullmatch(r"NN-[a-z0-9-]+".replace("NN", r"\d\d"), path.stem)
    assert log_of(path).is_file()
    assert data["source_url"].startswith(f"https://github.com/{data['repository']}/")
    assert all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in data["expected"]["numbers"].values())
    assert all(isinstance(v, int) for k, v in data["expected"]["numbers"].items() if k.endswith("_bytes"))


def test_corpus_is_large_and_covers_every_kind() -> None:
    assert len(SIDECARS) >= MIN_CORPUS
    assert sorted(LOGS.glob("*.log")) == sorted(log_of(p) for p in SIDECARS)
    kinds = Counter(sidecar(p)["expected"]["kind"] for p in SIDECARS)
    # Kinds added for what users paste (issue 16: vLLM's sampler warm-up, a shell's or launcher's
    # SIGKILL report) are covered by the message corpus (test_messages.py) from their sources.
    assert set(kinds) | {Kind.vllm_warmup_oom.value, Kind.process_killed.value} == {k.value for k in Kind}
    formats = {sidecar(p)["expected"]["variant"] for p in SIDECARS if sidecar(p)["expected"]["kind"] == "torch_gpu_oom"}
    assert {"current", "capacty", "parenthesised", "legacy_cached"} <= formats
    apis = {sidecar(p)["expected"]["labels"].get("device_api") for p in SIDECARS}
    assert "hip" in apis
    phases = {sidecar(p)["expected"]["phase"] for p in SIDECARS}
    assert {"load", "rollout", "logprob", "train", "optimizer"} <= phases
