"""Shared fixtures of the data tests: an offline, empty Hugging Face cache, and the tiny local
tokenizer (with a chat template) built by `oomless.train.tiny`."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def offline_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    return tmp_path / "hub"


@pytest.fixture(scope="session")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from oomless.train.tiny import build_tokenizer

    folder = tmp_path_factory.mktemp("tok")
    build_tokenizer().save_pretrained(folder)
    return folder
