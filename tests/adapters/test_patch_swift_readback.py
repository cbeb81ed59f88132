"""`fit --from swift FILE --write DIR` on ms-swift scripts whose patched copies read back as
another run before: the patched script says every value of fit's answer (no "cannot express"
line), and `plan --from swift` reads it back to the same vLLM engine fit planned.

The three ways a patch went wrong:
- a key the script leaves unset whose default ms-swift derives from keys fit changed (a
  colocated engine's max_num_seqs is per-device batch × vLLM TP × steps_per_generation in
  ms-swift 4.x where `--vllm_max_num_seqs` is unset): the patch now writes it out;
- the script patched in another release's flags than the reader reads it as (ms-swift 3.x's
  `zero3` preset overlaps communication, 4.x's does not, so a ZeRO-3 optimizer offload was
  not written);
- ms-swift 3.4's single engine on one trainer GPU (its own process) moved onto every GPU
  without saying that ms-swift then runs an engine inside each training process;
- an engine size ms-swift 3.5-3.10 cannot take (it sizes a colocated engine batch × TP ×
  steps whatever the flag says: S0 names ms-swift 3.5), and an unset one (vLLM's default in the
  plan) that 4.x would size by batch × TP × steps (HF generate moved to vLLM): now written out.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from oomless.adapters import HardwareFlags
from oomless.adapters import common as C
from oomless.adapters.patch import planned_max_num_seqs
from oomless.adapters.swift import writer as SW
from oomless.cli.import_cmd import load_native
from oomless.cli.main import app
from tests.adapters.native_helpers import fit_write
from oomless.planner.plan import make_plan
from oomless.spec.load import parse_spec
from oomless.spec.run import RolloutEngine

ROOT = Path(__file__).resolve().parents[2]
CASES = [
    ("tests/real_configs/swift/HEAD/examples/train/grpo/internal/chord.sh", "A100-40GB", 8),
    ("tests/real_configs/swift/v4.0.0/examples/train/grpo/internal/gspo.sh", "RTX-4090", 8),
    ("tests/real_configs/swift/v3.8.0/examples/train/grpo/internal/gspo.sh", "RTX-4090", 8),
    ("examples/seeds/native/s1-before.sh", "RTX-4090", None),
    ("examples/seeds/native/s0-before.sh", "RTX-4090", None),
    ("tests/real_configs/swift/v3.4.0/examples/train/grpo/internal/grpo.sh", "A100-40GB", None),
]


@pytest.mark.parametrize(("rel", "gpu", "gpus"), CASES, ids=[c[0].split("/")[-1] + "-" + c[1] for c in CASES])
def test_patched_script_says_the_whole_answer(tmp_path: Path, rel: str, gpu: str, gpus: int | None) -> None:
    source = ROOT / rel
    hardware = ["--gpu", gpu] + (["--gpus-per-node", str(gpus)] if gpus else [])
    result = CliRunner().invoke(app, ["fit", "--from", "swift", str(source), *hardware, "--write", str(tmp_path),
                                      "--top", "0", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    native = document["native"]
    assert native["changes"], "the case must need a change"
    assert native["cannot_express"] is None, native["cannot_express"]
    assert "reads it back: fits" in native["read_back"]
    best = parse_spec(document["best"]["spec"])
    wanted = best.rollout
    back, _ = load_native(tmp_path / source.name, "swift", HardwareFlags(gpu=gpu, gpus_per_node=gpus))
    got = back.spec.rollout
    assert (got.engine, got.tensor_parallel_size, got.engine_in_trainer_process) == (
        wanted.engine, wanted.tensor_parallel_size, wanted.engine_in_trainer_process)
    if got.engine.value != "hf":
        assert got.max_num_seqs == planned_max_num_seqs(best)
    assert back.spec.distribution == parse_spec(document["best"]["spec"]).distribution


def test_the_script_is_patched_in_the_release_its_reader_assumes() -> None:
    """No `# oomless: ms-swift==` line and no removed flag: read as the newest release, and
    patched in its flags (3.8's `--train_type` is still accepted there)."""
    text = (ROOT / CASES[2][0]).read_text()
    assert SW.file_dialect(text, CASES[2][0]) == SW.SF.LATEST
    assert SW.file_dialect("# oomless: ms-swift==3.4\n" + text, CASES[2][0]) == (3, 4)


def test_every_rank_engine_outside_the_trainer_cannot_be_said() -> None:
    run, _ = load_native(ROOT / CASES[3][0], "swift", HardwareFlags(gpu="RTX-4090"))
    assert run.spec.placement.groups is not None and not run.spec.rollout.engine_in_trainer_process
    everywhere = run.spec.model_copy(update={"placement": run.spec.placement.model_copy(update={"groups": None})})
    with C.collect_unexpressed() as found:
        SW.native_settings(everywhere, (3, 4))
    assert [field for field, _ in found] == ["rollout.engine_in_trainer_process"]
    inside = everywhere.model_copy(update={"rollout": everywhere.rollout.model_copy(update={"engine_in_trainer_process": True})})
    with C.collect_unexpressed() as found:
        settings = SW.native_settings(inside, (3, 4))
    assert not found and settings["num_infer_workers"] == str(run.spec.hardware.gpus_per_node)


WITHOUT_EFFECT = [
    ("examples/seeds/native/s1-after.sh", "RTX-4090"),
    ("tests/real_configs/swift/v4.0.0/examples/train/grpo/multi_node/colocate_multi_node1.sh", "RTX-4090"),
]
"""Answers whose read-back differs only in fields the answer makes irrelevant: ZeRO-3 bucket
sizes once it is ZeRO-1 (S1 after), a vLLM weight-sync batch count once generation moved
into the trainer (HF generate). Those were named as fields ms-swift cannot express."""


@pytest.mark.parametrize(("rel", "gpu"), WITHOUT_EFFECT, ids=[c[0].split("/")[-1] for c in WITHOUT_EFFECT])
def test_fields_without_effect_are_no_difference(tmp_path: Path, rel: str, gpu: str) -> None:
    source = ROOT / rel
    result = CliRunner().invoke(app, ["fit", "--from", "swift", str(source), "--gpu", gpu, "--write", str(tmp_path),
                                      "--top", "0", "--json"])
    assert result.exit_code == 0, result.output
    native = json.loads(result.stdout)["native"]
    assert native["changes"] and native["cannot_express"] is None, native["cannot_express"]
    assert "reads it back: fits" in native["read_back"]


AGENT = "tests/real_configs/swift/HEAD/examples/train/grpo/external/agent.sh"
"""`--vllm_mode server` with no `swift rollout` line: the server is started elsewhere."""


def test_a_server_engine_stays_as_the_script_runs_it() -> None:
    """The patch edits `swift rlhf`; a server's engine fields are its own command's flags, so a
    change to them (fit cut the server's max_model_len 131072 → 3072 on RTX-4090) is unsayable,
    and so is a move onto a server the script does not start."""
    run, _ = load_native(ROOT / AGENT, "swift", HardwareFlags(gpu="RTX-4090"))
    assert run.spec.rollout.engine.value == "vllm_separate"
    cut = run.spec.model_copy(update={"rollout": run.spec.rollout.model_copy(update={"max_model_len": 3072})})
    with C.collect_unexpressed(run.spec) as found:
        SW.native_settings(cut)
    assert [field for field, _ in found] == ["rollout.max_model_len"]
    colocated, _ = load_native(ROOT / CASES[0][0], "swift", HardwareFlags(gpu="A100-40GB", gpus_per_node=8))
    server = colocated.spec.model_copy(update={"rollout": run.spec.rollout})
    with C.collect_unexpressed(colocated.spec) as found:
        SW.native_settings(server)
    assert "rollout.engine" in [field for field, _ in found]


def test_server_script_patch_reads_back_or_nothing_is_written(tmp_path: Path) -> None:
    result = fit_write("swift", str(ROOT / AGENT), tmp_path, "--gpu", "RTX-4090")
    assert result.exit_code in (0, 1), result.output
    document = json.loads(result.stdout)
    if result.exit_code == 1:
        assert not list(tmp_path.iterdir())
        return
    assert document["native"]["cannot_express"] is None and "reads it back: fits" in document["native"]["read_back"]


LMDEPLOY = "tests/real_configs/swift/v3.4.0/examples/train/grpo/internal/full_lmdeploy.sh"
"""ms-swift 3.4, HF-planned (LMDeploy is not modelled), full fine-tuning under ZeRO-3."""


@pytest.mark.parametrize("gpu", ["A800-80GB", "RTX-4090"])
def test_hf_to_vllm_plans_the_releases_engine(tmp_path: Path, gpu: str) -> None:
    """fit moving a 3.4 script from HF generate to vLLM plans ms-swift 3.4's engine (vLLM 0.8.5:
    CUDA graphs on top of the budget; the whole model gathered per sync; 256 sequences), which
    the copy reads back to, with the same peaks. Before, it planned the spec's defaults: on
    RTX-4090 a weight sync of 10.45 GiB that the copy plans at 20.78 GiB."""
    result = CliRunner().invoke(app, ["fit", "--from", "swift", str(ROOT / LMDEPLOY), "--gpu", gpu, "--write", str(tmp_path),
                                      "--top", "0", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["native"]["cannot_express"] is None, document["native"]["cannot_express"]
    best = parse_spec(document["best"]["spec"])
    assert best.rollout.engine.value != "hf", "the case must move generation to vLLM"
    back, _ = load_native(tmp_path / Path(LMDEPLOY).name, "swift", HardwareFlags(gpu=gpu))
    for name in ("cuda_graphs_in_budget", "weight_sync_batches", "max_num_seqs"):
        assert getattr(back.spec.rollout, name) == getattr(best.rollout, name), name
    planned = make_plan(back.spec, back.arch, back.gpu, back.archs)
    got = {(d.role, p.name): p.peak_bytes for d in planned.devices for p in d.phases}
    for peak in document["best"]["phase_peaks"]:
        if peak["device"] != "host":
            assert abs(got[(peak["device"], peak["phase"])] - peak["peak_bytes"]) <= 0.01 * peak["peak_bytes"], peak


def test_the_idle_engine_adds_no_warning() -> None:
    """The release's engine rides along an HF run without effect: no "is ignored" line."""
    run, raw = load_native(ROOT / LMDEPLOY, "swift", HardwareFlags(gpu="A800-80GB"))
    assert raw["rollout"]["engine"] == "hf" and raw["rollout"]["weight_sync_batches"] == 1
    assert not [w for w in run.warnings if " is ignored" in w]


def test_a_patch_does_not_drop_the_scripts_server() -> None:
    """tree_rollout.sh starts `swift rollout` on GPU 0 and trains on GPU 1; an engine colocated on
    both would share GPU 0 with the server the copy still starts: unsayable, so fit does not
    offer it (it had been the fastest answer, NPROC_PER_NODE 1 → 2)."""
    tree = ROOT / "tests/real_configs/swift/HEAD/examples/train/grpo/plugin/treepo/tree_rollout.sh"
    run, _ = load_native(tree, "swift", HardwareFlags(gpu="A100-80GB"))
    assert run.spec.rollout.engine.value == "vllm_separate"
    colocated = run.spec.model_copy(update={
        "rollout": run.spec.rollout.model_copy(update={"engine": RolloutEngine.vllm_colocate, "num_gpus": 1}),
        "placement": run.spec.placement.model_copy(update={"groups": None})})
    with C.collect_unexpressed(run.spec) as found:
        SW.native_settings(colocated)
    assert "rollout.engine" in [field for field, _ in found]
