"""The corpus of real crash logs in tests/data/logs: each ``NN-name.log`` copied from a public
issue thread, with a sidecar ``NN-name.json`` giving its source and the expected diagnosis."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.helpers import ROOT

LOGS = ROOT / "tests" / "data" / "logs"
SIDECARS = sorted(LOGS.glob("*.json"))


def sidecar(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def log_of(path: Path) -> Path:
    return path.with_suffix(".log")
