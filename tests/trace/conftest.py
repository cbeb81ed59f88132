"""Traced tests need the optional extra `oomless[trace]` (torch, transformers)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
