"""`fit --from vlmr1 --write`: an offload fit adds is written as a DeepSpeed JSON of its own,
named by what it offloads, beside the copy; before, old and new settings both named
`zero3.json`, so `--deepspeed` was left as it was and the offload went unsaid."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from oomless.adapters import HardwareFlags
from oomless.cli.import_cmd import load_native
from oomless.cli.main import app

CORPUS = Path(__file__).resolve().parents[1] / "real_configs"
GUI = "src/open-r1-multimodal/run_scripts/run_grpo_gui.sh"


def test_added_optimizer_offload_is_written_and_read_back(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(CORPUS / "vlmr1" / "HEAD")
    flags = HardwareFlags(gpu="A100-80GB")
    before, _ = load_native(Path(GUI), "vlmr1", flags)
    assert not before.spec.distribution.offload_optimizer
    result = CliRunner().invoke(app, ["fit", "--from", "vlmr1", GUI, "--gpu", "A100-80GB", "--write", str(tmp_path),
                                      "--top", "0", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    native = document["native"]
    assert native["cannot_express"] is None, native["cannot_express"]
    wanted = document["best"]["spec"]["distribution"]
    assert wanted.get("offload_optimizer") is True, "the case must add an optimizer offload"
    back, _ = load_native(tmp_path / Path(GUI).name, "vlmr1", flags)
    assert back.spec.distribution.offload_optimizer and back.spec.distribution.strategy.value == wanted["strategy"]
    config = json.loads((tmp_path / "zero3_offload_optimizer.json").read_text())
    assert config["zero_optimization"]["offload_optimizer"]["device"] == "cpu"
