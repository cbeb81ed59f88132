"""Terminal conventions (issue 17.1): width from the terminal, no colour off a TTY or with
NO_COLOR, quiet on a closed pipe with the exit code kept, -h/--version everywhere, `env`,
`--json` on the listing commands."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
from importlib import metadata

import pytest
import typer.main
from typer.testing import CliRunner

from oomless.cli.env_cmd import FRAMEWORKS
from oomless.cli.main import app
from tests.cli.conftest import QUICKSTART, S1_BEFORE, oomless_command, run_oomless
from tests.helpers import EXAMPLES, ROOT

S3_BEFORE = EXAMPLES / "seeds" / "s3-before.yaml"
ANSI_ESCAPE = "\x1b["
COLOUR_SGR = re.compile(r"\x1b\[(?:[0-9]+;)*(?:3[0-8]|9[0-7])[;m]")
"""An SGR sequence that sets a foreground colour (bold or italic alone are not colour: NO_COLOR
asks for no colour, https://no-color.org)."""


def _run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*oomless_command(), *args], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=False, env={**os.environ, **env})


def _run_on_a_tty(*args: str, **env: str) -> tuple[int, str]:
    """Run with stdout on a pseudo-terminal; its output and exit code."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([*oomless_command(), *args], cwd=ROOT, stdout=slave, stderr=subprocess.DEVNULL,
                            env={**os.environ, "COLUMNS": "120", **env})
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            break
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(timeout=60), b"".join(chunks).decode("utf-8", "replace")


def test_version_on_the_root_and_after_a_command() -> None:
    expected = f"oomless {metadata.version('oomless')}"
    for args in (("--version",), ("plan", "--version"), ("env", "--version")):
        done = run_oomless(*args)
        assert (done.returncode, done.stdout.strip(), done.stderr) == (0, expected, ""), args


def test_dash_h_on_the_root_and_every_command(runner: CliRunner) -> None:
    commands = sorted(typer.main.get_command(app).commands)
    assert {"plan", "env", "models", "gpus"} <= set(commands)
    for args in ([], *([name] for name in commands)):
        result = runner.invoke(app, [*args, "-h"])
        assert result.exit_code == 0, (args, result.output)
        assert result.output.startswith("Usage: "), args


@pytest.mark.parametrize("spec", [QUICKSTART, S1_BEFORE, S3_BEFORE], ids=lambda p: p.stem)
@pytest.mark.parametrize("width", [80, 100, 200])
def test_plan_fits_the_terminal_width(spec, width: int) -> None:
    done = _run("plan", str(spec), COLUMNS=str(width))
    assert done.returncode in (0, 1), done.stderr
    widths = [len(line) for line in done.stdout.splitlines()]
    assert max(widths) <= width
    if width == 200:  # the width is used, not a fixed one: the tables' rows stay on one line
        assert max(widths) > 100


def test_no_colour_when_piped() -> None:
    done = _run("plan", str(S1_BEFORE))
    assert done.returncode == 1
    assert ANSI_ESCAPE not in done.stdout


def test_colour_on_a_terminal_unless_no_color() -> None:
    code, coloured = _run_on_a_tty("plan", str(S1_BEFORE), TERM="xterm-256color")
    assert code == 1
    assert COLOUR_SGR.search(coloured)
    code, plain = _run_on_a_tty("plan", str(S1_BEFORE), TERM="xterm-256color", NO_COLOR="1")
    assert code == 1
    assert not COLOUR_SGR.search(plain)
    assert "DOES NOT FIT" in plain


@pytest.mark.parametrize(("args", "expected"), [
    (("plan", str(QUICKSTART)), 0), (("plan", str(S1_BEFORE)), 1), (("plan", str(S1_BEFORE), "--json"), 1),
    (("models",), 0),
], ids=["fits", "does-not-fit", "json", "models"])
def test_closed_pipe_keeps_the_exit_code_quietly(args: tuple[str, ...], expected: int) -> None:
    """`oomless plan x.yaml | head -1` with the reader gone before anything is written: every
    write meets EPIPE; the command's exit code stays and nothing is printed on stderr."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([*oomless_command(), *args], cwd=ROOT, stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (expected, "")


ENV_SNIPPET = """
import contextlib, io, json, sys
from oomless.cli.main import main
out = io.StringIO()
try:
    with contextlib.redirect_stdout(out):
        main(["env", "--json"])
except SystemExit as end:
    code = end.code
heavy = sorted(m for m in ("torch", "transformers", "trl", "vllm", "ray", "deepspeed") if m in sys.modules)
print(json.dumps({"code": code, "doc": json.loads(out.getvalue()), "imported": heavy}))
"""


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def test_env_reports_versions_without_importing_the_frameworks() -> None:
    done = subprocess.run([sys.executable, "-c", ENV_SNIPPET], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["code"] == 0
    assert got["imported"] == []
    doc = got["doc"]
    assert doc["oomless"] == metadata.version("oomless")
    assert doc["python"] == ".".join(map(str, sys.version_info[:3]))
    assert doc["frameworks"] == {name: _installed(name) for name in FRAMEWORKS}


def test_env_text_names_every_framework(runner: CliRunner) -> None:
    result = runner.invoke(app, ["env"])
    assert result.exit_code == 0, result.output
    for name in FRAMEWORKS:
        assert any(line.split()[0] == name for line in result.output.splitlines()), name


def test_gpus_json_is_the_catalog(runner: CliRunner) -> None:
    from oomless.catalog.gpus import gpu_ids, load_gpu

    result = runner.invoke(app, ["gpus", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [g["id"] for g in doc["gpus"]] == list(gpu_ids())
    for g in doc["gpus"]:
        assert g["capacity_bytes"] == load_gpu(g["id"]).capacity_bytes
    assert doc["derived_capacity_rule"]


def test_models_json_lists_the_catalog(runner: CliRunner) -> None:
    from oomless.catalog.resolve import catalog_ids

    result = runner.invoke(app, ["models", "--json"])
    assert result.exit_code == 0, result.output
    assert [m["id"] for m in json.loads(result.stdout)] == list(catalog_ids())


def test_listings_fit_80_columns() -> None:
    for args in (("models",), ("gpus",), ("env",)):
        done = _run(*args, COLUMNS="80")
        assert done.returncode == 0, done.stderr
        long = [line for line in done.stdout.splitlines() if len(line) > 80 and not line.startswith("python ")]
        assert long == [], args
