"""VLM-R1's optimizer step: transformers 4.49's `optim` (adamw_torch, foreach) steps unless the
DeepSpeed JSON has an `optimizer` section (DeepSpeed's own); `--optim` is read and written."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomless.spec.run import OptimizerImplementation
from tests.adapters.native_helpers import NATIVE, imported, round_trip

HW = {"gpu": "H20"}


def _script(tmp_path: Path, deepspeed: str, *extra: str) -> Path:
    text = (NATIVE / "s3-after.sh").read_text().replace("--deepspeed local_scripts/zero3.json", f"--deepspeed {deepspeed}")
    if extra:
        text = text.replace("--num_generations 4 \\", "--num_generations 4 \\\n    " + " \\\n    ".join(extra) + " \\")
    path = tmp_path / "run.sh"
    path.write_text(text)
    return path


@pytest.mark.parametrize("deepspeed, expected", [
    ("local_scripts/zero3.json", "foreach"),          # VLM-R1's zero3.json: no optimizer section
    ("local_scripts/zero2.json", None),               # its zero2.json builds DeepSpeed's AdamW
    ("local_scripts/zero3_offload.json", None),
])
def test_vlmr1_own_configs(tmp_path: Path, deepspeed: str, expected: str | None) -> None:
    spec = imported("vlmr1", _script(tmp_path, deepspeed), **HW)
    assert getattr(spec.optimizer_implementation, "value", None) == expected


def test_optim_flag_and_a_config_with_its_own_optimizer(tmp_path: Path) -> None:
    fused = imported("vlmr1", _script(tmp_path, "local_scripts/zero3.json", "--optim adamw_torch_fused"), **HW)
    assert fused.optimizer_implementation is None  # fused under ZeRO plans as DeepSpeed's own: no temporaries
    (tmp_path / "ds.json").write_text('{"zero_optimization": {"stage": 3}, "optimizer": {"type": "AdamW"}}')
    own = imported("vlmr1", _script(tmp_path, "ds.json"), **HW)
    assert own.optimizer_implementation is None


@pytest.mark.parametrize("implementation", [None, "foreach", "fused"])
def test_written_and_read_back(tmp_path: Path, implementation: str | None) -> None:
    spec = imported("vlmr1", _script(tmp_path, "local_scripts/zero3.json"), **HW)
    spec = spec.model_copy(update={"optimizer_implementation": implementation and OptimizerImplementation(implementation)})
    expected = None if implementation in (None, "fused") else implementation  # planned alike under ZeRO
    for back in round_trip("vlmr1", spec, tmp_path / "out", **HW):
        assert getattr(back.optimizer_implementation, "value", None) == expected
