"""A patch of a VLM-R1 launch that adds an offload writes a DeepSpeed JSON of its own, named by
what it offloads, beside the copy; before, old and new settings both named `zero3.json`, so
`--deepspeed` was left as it was and the offload went unsaid (run_grpo_gui.sh, fit's answer on
A100-80GB then)."""

from __future__ import annotations

import json
from pathlib import Path

from oomless.adapters import HardwareFlags
from oomless.adapters.common import read_text
from oomless.adapters.patch import settled_patch
from oomless.cli.import_cmd import load_native

CORPUS = Path(__file__).resolve().parents[1] / "real_configs"
GUI = "src/open-r1-multimodal/run_scripts/run_grpo_gui.sh"


def test_added_optimizer_offload_is_written_and_read_back(monkeypatch) -> None:
    monkeypatch.chdir(CORPUS / "vlmr1" / "HEAD")
    flags = HardwareFlags(gpu="A100-80GB")
    run, _ = load_native(Path(GUI), "vlmr1", flags)
    assert run.spec.distribution.strategy.value == "zero3" and not run.spec.distribution.offload_optimizer
    wanted = run.spec.model_copy(update={"distribution": run.spec.distribution.model_copy(update={"offload_optimizer": True})})
    patch, problems, back = settled_patch("vlmr1", Path(GUI), read_text(Path(GUI)), run.spec, wanted, flags, run.arch)
    assert not problems, problems
    assert "--deepspeed local_scripts/zero3.json → zero3_offload_optimizer.json" in [c.shown for c in patch.changes]
    config = json.loads(dict(patch.companions)["zero3_offload_optimizer.json"])
    assert config["zero_optimization"]["offload_optimizer"]["device"] == "cpu"
    assert back.spec.distribution.offload_optimizer
