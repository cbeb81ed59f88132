"""Engine sizes a framework sets itself, with no key a file could hold: TRL sizes a colocated
vLLM engine `max_num_seqs` = per-device batch × TP × steps_per_generation and
`max_num_batched_tokens` 4096. An HF run carries both (at TP 1) as its idle engine, so fit moving
it onto vLLM plans TRL's sizes, and a patch to others is unsayable. Before, fit planned vLLM's
defaults, both were named as unsayable, and the plan was low (0.77 GiB on grpo_vlm.py's example,
0.71 GiB on grpo_trainer.md's on A100-40GB)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from oomless.adapters import HardwareFlags
from oomless.cli.import_cmd import load_native
from oomless.cli.main import app
from tests.adapters.native_helpers import fit_write
from oomless.planner.plan import make_plan

CORPUS = Path(__file__).resolve().parents[1] / "real_configs"


def test_hf_to_colocated_trl_engine_reads_back_with_trls_sizes(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(CORPUS / "trl" / "v1.5.0")
    source = "docs/source/grpo_trainer.md.L767-770.sh"
    before, _ = load_native(Path(source), "trl", HardwareFlags(gpu="A100-80GB"))
    assert before.spec.rollout.engine.value == "hf", "the case must start on HF generate"
    result = CliRunner().invoke(app, ["fit", "--from", "trl", source, "--gpu", "A100-80GB", "--write", str(tmp_path),
                                      "--top", "0", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    native = document["native"]
    assert native["cannot_express"] is None, native["cannot_express"]
    assert "reads it back: fits" in native["read_back"]
    back, _ = load_native(tmp_path / Path(source).name, "trl", HardwareFlags(gpu="A100-80GB"))
    ro, batch = back.spec.rollout, back.spec.batch
    assert ro.engine.value == "vllm_colocate"
    steps = batch.steps_per_generation or batch.gradient_accumulation_steps
    assert ro.max_num_seqs == batch.micro_batch_size * ro.tensor_parallel_size * steps
    assert document["best"]["spec"]["rollout"]["max_num_seqs"] == ro.max_num_seqs  # planned as TRL sizes it


LAUNCHES = [
    # 7 processes beside a `trl vllm-serve` GPU (answer had moved vLLM); on 80 GB fit now keeps it as
    # written (no answer is faster by fit's threshold), so 40 GB cards make fit change it
    ("open-r1/HEAD", "README.md.L313-315.sh", "A100-40GB"),
    ("open-r1/571661a", "README.md.L119-119.sh", "H100-80GB"),  # ZeRO-3 from the accelerate config (answer had ZeRO-1)
]


@pytest.mark.parametrize(("root", "source", "gpu"), LAUNCHES, ids=[s for _, s, _ in LAUNCHES])
def test_trl_patch_keeps_the_launchers_processes_and_zero_setup(tmp_path: Path, monkeypatch, root: str, source: str,
                                                                 gpu: str) -> None:
    """TRL's training processes, vLLM server GPUs and ZeRO/FSDP setup are the launcher's, not
    GRPOConfig keys: fit --from trl offers only answers that keep them, so the copy reads back as
    the answer (before: a different process count or ZeRO stage was wanted and named unsayable,
    and the copy ran another global batch)."""
    monkeypatch.chdir(CORPUS / root)
    flags = HardwareFlags(gpu=gpu, gpus_per_node=8)
    before, _ = load_native(Path(source), "trl", flags)
    result = fit_write("trl", source, tmp_path, "--gpu", gpu, "--gpus-per-node", "8")
    assert result.exit_code == 0, result.output
    native = json.loads(result.stdout)["native"]
    assert native["changes"] and native["cannot_express"] is None, native["cannot_express"]
    back, _ = load_native(tmp_path / source, "trl", flags)
    assert back.spec.distribution == before.spec.distribution
    assert back.spec.rollout.num_gpus == before.spec.rollout.num_gpus
    b0, b1 = before.spec.batch, back.spec.batch
    assert b0.micro_batch_size * b0.gradient_accumulation_steps == b1.micro_batch_size * b1.gradient_accumulation_steps


def test_vision_engine_length_holds_the_image_tokens(tmp_path: Path, monkeypatch) -> None:
    """TRL's reader bounds prompts by vllm_max_model_length less the completion and the images;
    a length written without the image tokens read back a shorter prompt bound, so the fastest
    answer (HF → vLLM on grpo_vlm.py's example) was passed over for alternative #2."""
    monkeypatch.chdir(CORPUS / "trl" / "HEAD")
    source = "examples/scripts/grpo_vlm.py.L48-61.sh"
    flags = HardwareFlags(gpu="A100-80GB")
    before, _ = load_native(Path(source), "trl", flags)
    result = CliRunner().invoke(app, ["fit", "--from", "trl", source, "--gpu", "A100-80GB", "--write", str(tmp_path),
                                      "--top", "0", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["native"]["patched_choice"] == 0 and document["native"]["cannot_express"] is None
    assert document["best"]["spec"]["rollout"]["engine"] != "hf", "the case must move generation to vLLM"
    back, _ = load_native(tmp_path / Path(source).name, "trl", flags)
    assert back.spec.lengths.max_prompt_tokens == before.spec.lengths.max_prompt_tokens


def test_a_colocated_trl_engine_cannot_be_eager(monkeypatch) -> None:
    """GRPOConfig has no enforce_eager key for the colocated engine (TRL 1.16 builds it with CUDA
    graphs): fit's eager answers for TRL read back graph-capturing (RTX-4090, ppo_trainer.md's
    example). Now unsayable, so fit does not offer them."""
    from oomless.adapters import common as C
    from oomless.adapters.trl import writer as TW
    from oomless.spec.run import RolloutEngine

    monkeypatch.chdir(CORPUS / "trl" / "v1.5.0")
    run, _ = load_native(Path("docs/source/grpo_trainer.md.L767-770.sh"), "trl", HardwareFlags(gpu="A100-80GB"))
    colocated = run.spec.model_copy(update={"rollout": run.spec.rollout.model_copy(
        update={"engine": RolloutEngine.vllm_colocate, "enforce_eager": True})})
    with C.collect_unexpressed() as found:
        TW.native_settings(colocated)
    assert [field for field, _ in found] == ["rollout.enforce_eager"]


def test_hf_to_colocated_trl_plans_trls_token_budget(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(CORPUS / "trl" / "HEAD")
    source = "examples/scripts/grpo_vlm.py.L48-61.sh"
    result = CliRunner().invoke(app, ["fit", "--from", "trl", source, "--gpu", "A100-80GB", "--write", str(tmp_path),
                                      "--top", "0", "--json"])
    assert result.exit_code == 0, result.output
    best = json.loads(result.stdout)["best"]
    assert best["spec"]["rollout"]["engine"] == "vllm_colocate", "the case must move generation onto vLLM"
    assert best["spec"]["rollout"]["max_num_batched_tokens"] == 4096
    back, _ = load_native(tmp_path / Path(source).name, "trl", HardwareFlags(gpu="A100-80GB"))
    plan = make_plan(back.spec, back.arch, back.gpu, back.archs)
    got = {(d.role, p.name): p.peak_bytes for d in plan.devices for p in d.phases}
    for peak in best["phase_peaks"]:
        if peak["device"] != "host":
            assert abs(got[(peak["device"], peak["phase"])] - peak["peak_bytes"]) <= 0.01 * peak["peak_bytes"], peak


def test_trl_patch_sizes_and_logits_are_the_files(monkeypatch) -> None:
    """Under a patch (the file's run as fallback) TRL's writer refuses a colocated engine size
    other than batch × TP × steps (grpo_trainer.md's example on A100-40GB: vLLM's 256 planned,
    TRL's 8 read back, 0.71 GiB apart) and an unkeyed logits mode other than the release's
    (open-r1's DeepSeek recipe: full_bf16 wanted, 1.16's tiled head read back)."""
    from oomless.adapters import common as C
    from oomless.adapters.trl import writer as TW
    from oomless.spec.run import LogitsMode, RolloutEngine

    monkeypatch.chdir(CORPUS / "trl" / "v1.5.0")
    run, _ = load_native(Path("docs/source/grpo_trainer.md.L767-770.sh"), "trl", HardwareFlags(gpu="A100-40GB"))
    assert run.spec.rollout.engine == RolloutEngine.hf and run.spec.logits == LogitsMode.chunked_head
    batch = run.spec.batch
    sized = batch.micro_batch_size * (batch.steps_per_generation or batch.gradient_accumulation_steps)
    colocated = run.spec.model_copy(update={"rollout": run.spec.rollout.model_copy(
        update={"engine": RolloutEngine.vllm_colocate, "max_num_seqs": sized, "max_num_batched_tokens": 4096})})
    with C.collect_unexpressed(run.spec) as found:
        TW.native_settings(colocated)
    assert not found
    for update, field in (({"max_num_seqs": None}, "rollout.max_num_seqs"), ({"tensor_parallel_size": 2}, "rollout.max_num_seqs"),
                          ({"max_num_batched_tokens": None}, "rollout.max_num_batched_tokens")):
        other = colocated.model_copy(update={"rollout": colocated.rollout.model_copy(update=update)})
        with C.collect_unexpressed(run.spec) as found:
            TW.native_settings(other)
        assert field in [f for f, _ in found], update
    bf16 = colocated.model_copy(update={"logits": LogitsMode.full_bf16})
    with C.collect_unexpressed(run.spec) as found:
        TW.native_settings(bf16)
    assert [f for f, _ in found] == ["logits"]
