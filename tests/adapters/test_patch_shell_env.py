"""The training command's environment as a native key (`env:NAME`): ms-swift's process count
is `NPROC_PER_NODE`, set before `swift rlhf`. The patch edits the assignment the command sees,
or adds one; before, it could not, so S1-after's fastest answer (3 → 4 processes with the
engine moved into them) was not written and a slower alternative was (`patched_choice` 2)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from oomless.adapters.patch.shell_text import current_value, patch_shell, pick_command
from oomless.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
KEY = "env:NPROC_PER_NODE"
PREFIXED = "CUDA_VISIBLE_DEVICES=0,1,2,3 \\\nNPROC_PER_NODE=3 \\\nswift rlhf \\\n    --rlhf_type grpo\n"
EXPORTED = "# NPROC_PER_NODE=2 is too few\nexport NPROC_PER_NODE=8\nNPROC_PER_NODE=6  # six\nswift rlhf --rlhf_type grpo\n"


def test_the_assignment_the_command_sees_is_read_and_edited() -> None:
    assert current_value(pick_command(PREFIXED, ["rlhf_type"], "flags", "a.sh"), KEY, "flags") == "3"
    assert patch_shell(PREFIXED, {KEY: "4"}, "flags", "a.sh", ["rlhf_type"]) == PREFIXED.replace("=3 ", "=4 ")
    assert current_value(pick_command(EXPORTED, ["rlhf_type"], "flags", "b.sh"), KEY, "flags") == "6"
    out = patch_shell(EXPORTED, {KEY: "4"}, "flags", "b.sh", ["rlhf_type"])
    assert out == EXPORTED.replace("NPROC_PER_NODE=6 ", "NPROC_PER_NODE=4 ")  # the comment and the export kept


def test_an_unset_variable_is_added_to_the_command() -> None:
    text = "swift rlhf \\\n    --rlhf_type grpo\n"
    assert current_value(pick_command(text, ["rlhf_type"], "flags", "c.sh"), KEY, "flags") is None
    assert patch_shell(text, {KEY: "2"}, "flags", "c.sh", ["rlhf_type"]) == "NPROC_PER_NODE=2 " + text


def test_s1_after_fastest_answer_is_written(tmp_path: Path) -> None:
    source = ROOT / "examples/seeds/native/s1-after.sh"
    result = CliRunner().invoke(app, ["fit", "--from", "swift", str(source), "--gpu", "A10", "--write", str(tmp_path),
                                      "--top", "0", "--json"])
    assert result.exit_code == 0, result.output
    native = json.loads(result.stdout)["native"]
    assert native["patched_choice"] == 0 and native["cannot_express"] is None, native
    assert "NPROC_PER_NODE=3 → 4" in native["changes"]
    assert "reads it back: fits" in native["read_back"]
    assert "NPROC_PER_NODE=4 \\\n" in (tmp_path / source.name).read_text()


SCRIPT = """CUDA_VISIBLE_DEVICES=0 \\
NPROC_PER_NODE=1 \\
swift rlhf \\
    --rlhf_type grpo \\
    --model Qwen/Qwen2.5-0.5B \\
    --tuner_type full \\
    --use_vllm true \\
    --vllm_mode colocate \\
    --per_device_train_batch_size 4 \\
    --gradient_accumulation_steps 2 \\
    --num_generations 4
"""


def test_an_added_process_gets_its_gpu_made_visible(tmp_path: Path) -> None:
    """A patch that adds a training process also makes its GPU visible: NPROC_PER_NODE 1 → 2
    under `CUDA_VISIBLE_DEVICES=0` does not read back (the reader refuses more processes than
    visible GPUs); ms-swift's tree_rollout.sh had been written as alternative #5 for it."""
    from oomless.adapters import HardwareFlags
    from oomless.adapters.patch import settled_patch
    from oomless.cli.import_cmd import load_native

    path = tmp_path / "run.sh"
    path.write_text(SCRIPT)
    run, _ = load_native(path, "swift", HardwareFlags(gpu="A100-80GB"))
    assert run.spec.hardware.gpus_per_node == 1
    wider = run.spec.model_copy(update={
        "hardware": run.spec.hardware.model_copy(update={"gpus_per_node": 2}),
        "batch": run.spec.batch.model_copy(update={"gradient_accumulation_steps": 1})})
    patch, problems, back = settled_patch("swift", path, SCRIPT, run.spec, wider, HardwareFlags(gpu="A100-80GB"), run.arch)
    assert "CUDA_VISIBLE_DEVICES=0 → 0,1" in [c.shown for c in patch.changes]
    assert "NPROC_PER_NODE=1 → 2" in [c.shown for c in patch.changes]
    assert not problems and back.spec.hardware.gpus_per_node == 2
