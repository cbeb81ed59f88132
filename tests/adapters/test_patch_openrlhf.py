"""`fit --from openrlhf --write` on OpenRLHF scripts whose copy read back as another run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oomless.adapters import HardwareFlags
from oomless.adapters import common as C
from oomless.adapters.openrlhf import writer as OW
from oomless.cli.import_cmd import load_native
from tests.adapters.native_helpers import fit_write

CORPUS = Path(__file__).resolve().parents[1] / "real_configs"
DYNAMIC = ("openrlhf/HEAD", "examples/scripts/train_ppo_ray_hybrid_engine.sh")
"""Dynamic batch (--train.dynamic_batch_enable, 16384 tokens per GPU, 2048-token sequences)."""


def test_token_budget_without_its_micro_batch_cannot_be_patched() -> None:
    """The reader takes a dynamic batch's micro-batch as the full-length sequences its budget
    holds; a patch that cuts the budget but keeps the micro-batch read back as micro-batch 2,
    not 8 (fit then predicted 70.65 GiB for a run the file plans at 54.94)."""
    run, _ = load_native(CORPUS / DYNAMIC[0] / DYNAMIC[1], "openrlhf", HardwareFlags(gpu="A100-80GB"))
    batch = run.spec.batch
    assert batch.max_tokens_per_gpu == 16384 and batch.micro_batch_size == 8
    cut = run.spec.model_copy(update={"batch": batch.model_copy(update={"max_tokens_per_gpu": 4096})})
    with C.collect_unexpressed(run.spec) as found:
        OW.native_settings(cut)
    assert {field for field, _ in found} == {"batch.micro_batch_size", "batch.max_tokens_per_gpu"}
    both = cut.model_copy(update={"batch": cut.batch.model_copy(update={"micro_batch_size": 2})})
    with C.collect_unexpressed(run.spec) as found:
        OW.native_settings(both)
    assert not found
    with C.collect_unexpressed() as found:  # an export states both; only a patch is held to the file
        OW.native_settings(cut)
    assert not found


@pytest.mark.parametrize("root", ["openrlhf/HEAD", "openrlhf/v0.9.5"])
def test_dynamic_batch_copy_reads_back_as_the_answer(tmp_path: Path, monkeypatch, root: str) -> None:
    monkeypatch.chdir(CORPUS / root)
    source = DYNAMIC[1]
    result = fit_write("openrlhf", source, tmp_path, "--gpu", "A100-80GB")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    native = document["native"]
    assert native["changes"] and native["cannot_express"] is None, native["cannot_express"]
    assert "reads it back: fits" in native["read_back"]
    back, _ = load_native(tmp_path / Path(source).name, "openrlhf", HardwareFlags(gpu="A100-80GB"))
    best = document["best"]["spec"]["batch"]
    assert back.spec.batch.micro_batch_size == best["micro_batch_size"]
    assert back.spec.batch.max_tokens_per_gpu == best["max_tokens_per_gpu"]
