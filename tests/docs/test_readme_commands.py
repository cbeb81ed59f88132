"""Every command in the README's ```bash blocks runs as written (issue 17): in a fresh folder
holding the repository's `examples/`, in README order (the watch writes what `chart` and
`doctor` then read), each ends with a verdict code (0 fits, 1 does not fit) and never with
2 (bad input: a file the README names that is not there) or 3 (a bug). A line's `exit N`
comment is checked. Optional parts written `[...]` are left out. The install lines are the
README's two commands (CI runs them) and the train extra's line, whose `oomless train` run
tests/train covers."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
BIN = Path(sys.executable).parent


def readme_commands() -> list[tuple[int, str]]:
    """(line number, command) of every non-empty line of every ```bash block."""
    out, inside = [], False
    for number, line in enumerate(README.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            inside = line.strip() == "```bash" and not inside
            continue
        if inside and line.strip():
            out.append((number, line.strip()))
    return out


def words(command: str) -> list[str]:
    """The command's words without its comment and without `[optional]` parts."""
    return [w for w in shlex.split(command, comments=True) if not re.fullmatch(r"\[.*\]", w)]


def expected_exit(command: str) -> int | None:
    match = re.search(r"#.*\bexit (\d)\b", command)
    return int(match.group(1)) if match else None


COMMANDS = readme_commands()
INSTALL = re.compile(r"^python3 -m venv \.venv && \.venv/bin/pip install -q -e ")


def test_the_readme_has_commands_and_each_is_one_we_know_how_to_run() -> None:
    assert len(COMMANDS) >= 20
    for number, command in COMMANDS:
        assert command.startswith("oomless ") or INSTALL.match(command), f"README.md:{number}: {command}"


def test_the_install_lines_end_in_commands_that_exist() -> None:
    install = [c for _, c in COMMANDS if INSTALL.match(c)]
    assert any(c.endswith(".venv/bin/pytest") for c in install)
    assert any(c.endswith("oomless plan examples/quickstart.yaml") for c in install)
    for command in install:  # the files they run are in the repository
        for word in words(command.split("&&")[-1]):
            if word.startswith("examples/"):
                assert (ROOT / word).exists(), word


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    here = tmp_path_factory.mktemp("readme")
    (here / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    (here / "docs" / "img").mkdir(parents=True)
    return here


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(HF_HUB_OFFLINE="1", COLUMNS="100", NO_COLOR="1")
    return env


@pytest.mark.parametrize(("number", "command"), [(n, c) for n, c in COMMANDS if c.startswith("oomless ")],
                         ids=[f"L{n}" for n, c in COMMANDS if c.startswith("oomless ")])
def test_readme_command_runs_as_written(folder: Path, number: int, command: str) -> None:
    args = words(command)
    done = subprocess.run([str(BIN / "oomless"), *args[1:]], cwd=folder, env=_env(), capture_output=True,
                          text=True, timeout=180, check=False)
    where = f"README.md:{number}: {command}\n{done.stderr[-2000:]}"
    assert done.returncode in (0, 1), where
    if expected_exit(command) is not None:
        assert done.returncode == expected_exit(command), where
    assert "Traceback" not in done.stderr, where
