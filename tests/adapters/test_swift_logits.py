"""ms-swift's writer says only the `logits` modes a script reads back as (`adapters/swift/liger.py`):
full_bf16 (TRL's selective_log_softmax over the whole logits, every release) and, for GRPO from
3.5, Liger's fused loss; chunked, chunked_head and full_fp32 have no ms-swift option and are
refused naming `logits` and what is allowed, where before they were written as nothing."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from oomless.adapters import HardwareFlags, export_native, import_native
from oomless.adapters import common as C
from oomless.adapters.swift import writer as SW
from oomless.adapters.swift.liger import liger_fields, liger_flags, sayable_logits, unsayable
from oomless.errors import InputError
from oomless.spec.enums import LogitsMode
from oomless.spec.load import parse_spec
from tests.helpers import EXAMPLES

SEED = EXAMPLES / "seeds" / "native" / "s0-before.sh"
IDS = [".".join(map(str, v)) for v in SW.CANDIDATES]


def _seed(tmp_path: Path):
    path = tmp_path / "run.sh"
    path.write_text(SEED.read_text())
    return parse_spec(import_native("swift", path, HardwareFlags(gpu="H20")).spec)


def _read_back_logits(spec, version: tuple[int, ...]) -> tuple[str, bool]:
    """(logits, liger_kernels) the reader gives the writer's Liger flag (full_bf16 when it says none)."""
    flag = dict(liger_flags(spec)).get("use_liger_kernel") == "true"
    got = liger_fields(flag, version, ppo=spec.algorithm.value == "ppo")
    return got.get("logits", LogitsMode.full_bf16.value), got.get("liger_kernels", False)


@pytest.mark.parametrize("version", SW.CANDIDATES, ids=IDS)
@pytest.mark.parametrize("algorithm", ["grpo", "ppo"])
def test_every_mode_is_written_as_it_reads_back_or_refused(tmp_path: Path, version: tuple[int, ...], algorithm: str) -> None:
    base = _seed(tmp_path)
    base = base.model_copy(update={"algorithm": base.algorithm.__class__(algorithm)})
    written = set()
    for mode, kernels in itertools.product(LogitsMode, (False, True)):
        spec = base.model_copy(update={"logits": mode, "liger_kernels": kernels})
        problem = unsayable(spec, version)
        if problem is None:
            assert _read_back_logits(spec, version) == (mode.value, kernels)
            written.add(mode.value)
            continue
        if mode.value not in ("full_bf16", "fused"):
            assert problem[0] == "logits" and problem[1].endswith("allowed: " + ", ".join(sayable_logits(version, algorithm == "ppo")))
    assert written == set(sayable_logits(version, algorithm == "ppo"))


@pytest.mark.parametrize("mode", [LogitsMode.chunked, LogitsMode.chunked_head, LogitsMode.full_fp32])
def test_native_settings_record_the_mode_naming_logits(tmp_path: Path, mode: LogitsMode) -> None:
    spec = _seed(tmp_path).model_copy(update={"logits": mode})
    for version in SW.CANDIDATES:
        with C.collect_unexpressed() as found:  # what fit's writer check and --write see
            settings = SW.native_settings(spec, version)
        assert [field for field, _ in found] == ["logits"]
        assert "use_liger_kernel" not in settings
    with pytest.raises(InputError) as err:
        SW.native_settings(spec)
    assert err.value.field == "logits" and "allowed: full_bf16" in err.value.message


def test_export_refuses_chunked_naming_logits(tmp_path: Path) -> None:
    spec = _seed(tmp_path).model_copy(update={"logits": LogitsMode.chunked})
    with pytest.raises(InputError) as err:
        export_native("swift", spec, tmp_path / "out", force=False)
    assert err.value.field == "logits" and "no chunked option" in err.value.message
