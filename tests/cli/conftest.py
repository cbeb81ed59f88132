"""Fixtures for CLI tests: an in-process runner, the real `oomless` command, spec files."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from tests.helpers import EXAMPLES, ROOT, merged

QUICKSTART = EXAMPLES / "quickstart.yaml"
S1_BEFORE = EXAMPLES / "seeds" / "s1-before.yaml"
S1_AFTER = EXAMPLES / "seeds" / "s1-after.yaml"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def oomless_command() -> list[str]:
    """The installed console script next to this interpreter, else `python -m oomless`."""
    script = Path(sys.executable).with_name("oomless")
    return [str(script)] if script.exists() else [sys.executable, "-m", "oomless"]


def run_oomless(*args: str) -> subprocess.CompletedProcess[str]:
    """Run `oomless ARGS` in a real process (exit code, stdout, stderr as a user sees them)."""
    return subprocess.run(
        [*oomless_command(), *args], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )


@pytest.fixture
def write_spec(tmp_path: Path) -> Callable[..., Path]:
    """Write the quickstart spec with dotted-path overrides to a YAML file; return its path."""

    def write(name: str = "spec.yaml", **overrides: Any) -> Path:
        data = merged(yaml.safe_load(QUICKSTART.read_text(encoding="utf-8")), **overrides)
        path = tmp_path / name
        path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        return path

    return write
