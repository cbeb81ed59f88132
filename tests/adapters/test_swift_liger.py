"""ms-swift's `--use_liger_kernel` per release (`adapters/swift/liger.py`): Liger's model kernels
in every release, its fused GRPO loss from 3.5 (none in 3.2–3.4's grpo_trainer.py, none in PPO);
the writer's flag for each pair reads back as that pair, or the pair is refused naming the field."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from oomless.adapters import HardwareFlags, import_native
from oomless.adapters.swift import writer as SW
from oomless.adapters.swift.liger import liger_fields, liger_flags, unsayable
from oomless.errors import InputError
from oomless.spec.load import parse_spec
from tests.helpers import EXAMPLES

SEED = EXAMPLES / "seeds" / "native" / "s0-before.sh"
DIRECTIVE = "# oomless: ms-swift==3.5 vllm==0.8.5"
LIGER = "    --use_vllm true \\\n    --use_liger_kernel true \\\n"


def _read(tmp_path: Path, release: str, liger: bool):
    text = SEED.read_text()
    assert DIRECTIVE in text
    text = text.replace(DIRECTIVE, f"# oomless: ms-swift=={release} vllm==0.8.5")
    if liger:
        text = text.replace("    --use_vllm true \\\n", LIGER)
    path = tmp_path / "run.sh"
    path.write_text(text)
    return parse_spec(import_native("swift", path, HardwareFlags(gpu="H20")).spec)


@pytest.mark.parametrize(("release", "fused"), [("3.4", False), ("3.5", True), ("3.12", True), ("4.0", True)])
def test_use_liger_kernel_is_the_fused_loss_only_from_3_5(tmp_path: Path, release: str, fused: bool) -> None:
    spec = _read(tmp_path, release, True)
    plain = _read(tmp_path, release, False)
    assert spec.liger_kernels and not plain.liger_kernels
    assert spec.logits.value == ("fused" if fused else plain.logits.value)


def test_ppo_never_has_the_fused_loss() -> None:
    assert liger_fields(True, (4, 0), ppo=True) == {"liger_kernels": True}
    assert liger_fields(True, (4, 0), ppo=False) == {"liger_kernels": True, "logits": "fused"}
    assert liger_fields(False, (4, 0), ppo=False) == {}


@pytest.mark.parametrize("version", SW.CANDIDATES, ids=[".".join(map(str, v)) for v in SW.CANDIDATES])
def test_each_pair_is_written_as_it_reads_back_or_refused(tmp_path: Path, version: tuple[int, ...]) -> None:
    base = _read(tmp_path, "3.5", False)
    said = 0
    for fused, kernels in itertools.product((False, True), repeat=2):
        spec = base.model_copy(update={"logits": base.logits.__class__("fused" if fused else "full_bf16"),
                                       "liger_kernels": kernels})
        problem = unsayable(spec, version)
        if problem is not None:
            assert problem[0] in ("logits", "liger_kernels")
            continue
        flag = dict(liger_flags(spec)).get("use_liger_kernel") == "true"
        got = liger_fields(flag, version, ppo=False)
        assert (got.get("logits") == "fused", got.get("liger_kernels", False)) == (fused, kernels)
        said += 1
    assert said == 2  # no Liger, and the one pair the release's flag switches


def test_the_writer_refuses_the_fused_loss_alone_naming_liger_kernels(tmp_path: Path) -> None:
    spec = _read(tmp_path, "3.5", True).model_copy(update={"liger_kernels": False})
    with pytest.raises(InputError) as err:
        SW.native_settings(spec)
    assert err.value.field == "liger_kernels"
