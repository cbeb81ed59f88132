"""PNG charts: produced, of the size the layout says, and not blank."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from oomless.charts import groups as G
from oomless.charts import write_charts, write_compare_charts
from oomless.cli.compare_cmd import build_comparison
from oomless.errors import InputError
from tests.charts.conftest import SEEDS, assert_not_blank, hex_rgb, png_pixels
from tests.cli.conftest import run_oomless


def test_plan_png_one_device_group(tmp_path: Path, documents: dict[str, Any]) -> None:
    out = tmp_path / "s0.png"
    write_charts(documents["s0-before"], html=None, png=out)
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    size, pixels = png_pixels(data)
    assert size == (1300, 950)  # 100 px title + 450 px per device group + 400 px host and legend
    assert_not_blank(data)
    assert hex_rgb(G.OPTIMIZER.colour) in set(pixels)  # policy.optimizer_states, drawn in its group's hue


def test_plan_png_two_device_groups_from_the_cli(tmp_path: Path) -> None:
    out = tmp_path / "s1.png"
    done = run_oomless("plan", str(SEEDS / "s1-after.yaml"), "--png", str(out))
    assert done.returncode == 0, done.stderr
    size, _ = png_pixels(out.read_bytes())
    assert size == (1300, 1400)  # train and rollout GPUs: two rows of 450 px
    assert_not_blank(out.read_bytes())


def test_compare_png(tmp_path: Path) -> None:
    out = tmp_path / "c.png"
    write_compare_charts(build_comparison(SEEDS / "s0-before.yaml", SEEDS / "s0-after.yaml"), html=None, png=out)
    size, _ = png_pixels(out.read_bytes())
    assert size == (1800, 1350)  # 150 header + 450 train GPUs + 350 host + 400 legend and differences
    assert_not_blank(out.read_bytes())


def test_compare_png_with_different_device_roles(tmp_path: Path) -> None:
    out = tmp_path / "c.png"
    write_compare_charts(build_comparison(SEEDS / "s1-before.yaml", SEEDS / "s1-after.yaml"), html=None, png=out)
    size, _ = png_pixels(out.read_bytes())
    assert size == (1800, 150 + 3 * 450 + 350 + 400)  # train, actor+vllm, rollout rows


def test_png_without_matplotlib_is_one_clear_error(tmp_path: Path, documents: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.backends.backend_agg", None)
    with pytest.raises(InputError, match=r"--png: PNG charts need matplotlib: pip install 'oomless\[charts\]'"):
        write_charts(documents["s0-before"], html=None, png=tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()
    with pytest.raises(InputError, match=r"--html: HTML charts need matplotlib: pip install 'oomless\[charts\]'"):
        write_charts(documents["s0-before"], html=tmp_path / "x.html", png=None)
    assert not (tmp_path / "x.html").exists()


def test_planning_does_not_import_matplotlib() -> None:
    import subprocess

    code = ("import sys; from oomless.cli.main import app; import oomless.charts, oomless.charts.model;"
            "print('matplotlib' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "False"
