"""`oomless export`: writes a framework's files, never overwrites without --force, never the spec."""

from __future__ import annotations

import shutil
from pathlib import Path

from typer.testing import CliRunner

from oomless.cli.main import app
from tests.helpers import EXAMPLES

RUNNER = CliRunner()


def test_export_writes_then_refuses_to_overwrite(tmp_path: Path) -> None:
    spec = EXAMPLES / "seeds" / "s1-after.yaml"
    first = RUNNER.invoke(app, ["export", str(spec), "--to", "swift", "--out-dir", str(tmp_path)])
    assert first.exit_code == 0, first.output
    written = [Path(line) for line in first.stdout.split()]
    assert written and all(p.exists() for p in written)
    again = RUNNER.invoke(app, ["export", str(spec), "--to", "swift", "--out-dir", str(tmp_path)])
    assert again.exit_code == 2
    assert "--force" in again.output
    forced = RUNNER.invoke(app, ["export", str(spec), "--to", "swift", "--out-dir", str(tmp_path), "--force"])
    assert forced.exit_code == 0


def test_export_never_replaces_the_input_spec(tmp_path: Path) -> None:
    spec = tmp_path / "easyr1_config.yaml"  # the name the EasyR1 exporter writes
    shutil.copy(EXAMPLES / "seeds" / "s2-before.yaml", spec)
    before = spec.read_bytes()
    done = RUNNER.invoke(app, ["export", str(spec), "--to", "easyr1", "--out-dir", str(tmp_path), "--force"])
    assert done.exit_code == 2
    assert spec.read_bytes() == before


def test_unknown_framework_is_bad_input(tmp_path: Path) -> None:
    done = RUNNER.invoke(app, ["export", str(EXAMPLES / "quickstart.yaml"), "--to", "nemo", "--out-dir", str(tmp_path)])
    assert done.exit_code == 2
    assert "unknown framework 'nemo'" in done.output


def test_export_names_every_field_it_cannot_express_in_one_message(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("model: Qwen/Qwen2.5-7B-Instruct\nhardware: {gpu: H100, gpus_per_node: 8}\noptimizer: adafactor\n"
                    "attention: eager\nrollout: {engine: vllm_colocate, gpu_memory_utilization: 0.4, sleep_level: 0}\n")
    done = RUNNER.invoke(app, ["export", str(spec), "--to", "easyr1", "--out-dir", str(tmp_path / "out")])
    assert done.exit_code == 2
    line = done.output.strip()
    assert "\n" not in line and "cannot express" in line
    for field in ("rollout.sleep_level", "attention", "optimizer"):
        assert field in line
    assert not (tmp_path / "out" / "easyr1_config.yaml").exists()
