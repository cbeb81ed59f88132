"""open-r1's `sbatch slurm/train.slurm ...` jobs (`adapters/trl/slurm.py`): both argument layouts
read as the `trl vllm-serve` + `accelerate launch` commands the script runs, the vLLM server's node
planned beside a training node, and one-line errors where the script would fail."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from oomless.adapters import HardwareFlags
from oomless.adapters.common import parse_shell
from oomless.adapters.trl import slurm as SL
from oomless.adapters.trl.reader import import_path
from oomless.cli.main import app
from oomless.errors import InputError

MODEL = "Qwen/Qwen2.5-1.5B-Instruct"  # 12 attention heads (catalog)
HEAD_SCRIPT = """#!/bin/bash
#SBATCH --job-name=open_r1
#SBATCH --gres=gpu:8
{sbatch}
while [[ $# -gt 0 ]]; do
  case $1 in
    --model)
      MODEL="$2"
      shift 2
      ;;
  esac
done
GPUS_PER_NODE={gpus}
"""
CA8664D_SCRIPT = """#!/bin/bash
#SBATCH --job-name=open-r1-sft
{sbatch}
MODEL=$1
TASK=$2
GPUS_PER_NODE={gpus}
"""
ZERO = """compute_environment: LOCAL_MACHINE
deepspeed_config:
  deepspeed_multinode_launcher: standard
  offload_optimizer_device: none
  offload_param_device: none
  zero_stage: {stage}
distributed_type: DEEPSPEED
mixed_precision: bf16
num_machines: 1
num_processes: 8
"""
RECIPE = f"""model_name_or_path: {MODEL}
torch_dtype: bfloat16
bf16: true
use_vllm: {{use_vllm}}
vllm_mode: server
gradient_accumulation_steps: 4
gradient_checkpointing: true
max_prompt_length: 512
max_completion_length: 1024
num_generations: 16
per_device_train_batch_size: 16
"""


def repo(tmp_path: Path, command: str, *, layout: str = "head", gpus: int = 8, use_vllm: str = "true",
         sbatch: str = "", recipe: str = RECIPE) -> Path:
    """A miniature open-r1 checkout in ``tmp_path`` and a launch file holding ``command``."""
    script = (HEAD_SCRIPT if layout == "head" else CA8664D_SCRIPT).format(gpus=gpus, sbatch=sbatch)
    files = {"slurm/train.slurm": script,
             "recipes/accelerate_configs/zero2.yaml": ZERO.format(stage=2),
             "recipes/accelerate_configs/zero3.yaml": ZERO.format(stage=3),
             "recipes/Qwen2.5-1.5B-Instruct/grpo/config_demo.yaml": recipe.format(use_vllm=use_vllm)}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    launch = tmp_path / "job.sh"
    launch.write_text(command + "\n", encoding="utf-8")
    return launch


def read(path: Path, **hw: Any) -> tuple[dict, list, list]:
    return import_path(path, HardwareFlags(gpu="H100-80GB", **hw))


HEAD_CMD = "sbatch --nodes={nodes} slurm/train.slurm --model Qwen2.5-1.5B-Instruct --task grpo --config demo " \
           "--accelerator {acc} --dp {dp} --tp {tp}"


def head(nodes: int = 2, acc: str = "zero2", dp: int = 8, tp: int = 1, extra: str = "") -> str:
    return HEAD_CMD.format(nodes=nodes, acc=acc, dp=dp, tp=tp) + extra


@pytest.mark.parametrize(("nodes", "dp", "tp"), [(2, 8, 1), (3, 2, 2), (5, 1, 1)])
def test_head_job_trains_on_all_but_the_server_node(tmp_path: Path, nodes: int, dp: int, tp: int) -> None:
    spec, ignored, notes = read(repo(tmp_path, head(nodes, dp=dp, tp=tp)), gpus_per_node=8)
    rollout = spec["rollout"]
    assert rollout["engine"] == "vllm_separate"
    assert (rollout["num_gpus"], rollout["tensor_parallel_size"]) == (dp * tp, tp)
    assert spec["hardware"]["num_nodes"] == nodes - 1
    assert spec["hardware"]["gpus_per_node"] - rollout["num_gpus"] == 8  # GPUS_PER_NODE processes per training node
    assert any("node of its own" in n and "host RAM per node then counts both" in n for n in notes)
    assert any(line.startswith("accelerate gradient_accumulation_steps") for line in ignored)


def test_gpus_per_node_and_nodes_come_from_the_script_and_its_sbatch_lines(tmp_path: Path) -> None:
    path = repo(tmp_path, "sbatch slurm/train.slurm --model Qwen2.5-1.5B-Instruct --task grpo --config demo "
                "--accelerator zero2 --dp 2", gpus=4, sbatch="#SBATCH --nodes=3")
    spec, _, _ = read(path, gpus_per_node=4)
    assert spec["hardware"]["num_nodes"] == 2
    assert spec["hardware"]["gpus_per_node"] == 4 + 2


@pytest.mark.parametrize(("acc", "strategy"), [("zero2", "zero2"), ("zero3", "zero3")])
def test_accelerator_names_the_zero_stage(tmp_path: Path, acc: str, strategy: str) -> None:
    spec, _, _ = read(repo(tmp_path, head(acc=acc)), gpus_per_node=8)
    assert spec["distribution"]["strategy"] == strategy


def test_optional_args_override_the_recipe(tmp_path: Path) -> None:
    path = repo(tmp_path, head(extra=" --args '--per_device_train_batch_size=4 --gradient_checkpointing false'"))
    spec, _, _ = read(path, gpus_per_node=8)
    assert spec["batch"]["micro_batch_size"] == 4
    assert spec["gradient_checkpointing"] is False


def test_same_spec_as_the_commands_the_script_runs(tmp_path: Path) -> None:
    job = repo(tmp_path, head(nodes=3, dp=4, tp=2, extra=" --args --beta=0.04"))
    by_hand = tmp_path / "by_hand.sh"
    by_hand.write_text(
        f"trl vllm-serve --model {MODEL} --tensor_parallel_size 2 --data_parallel_size 4 &\n"
        "accelerate launch --config_file recipes/accelerate_configs/zero2.yaml --num_machines 2 --num_processes 16 "
        "src/open_r1/grpo.py --config recipes/Qwen2.5-1.5B-Instruct/grpo/config_demo.yaml --beta=0.04 "
        "--vllm_server_host=node3\n", encoding="utf-8")
    assert read(job)[0] == read(by_hand)[0]


def test_ca8664d_positional_layout_derives_the_server_tp_from_the_heads(tmp_path: Path) -> None:
    path = repo(tmp_path, "sbatch --nodes=2 slurm/train.slurm Qwen2.5-1.5B-Instruct grpo demo zero3 "
                "'--per_device_train_batch_size=8'", layout="ca8664d")
    spec, _, notes = read(path, gpus_per_node=8)
    # get_tensor_parallel_size.py: 12 heads % 8 != 0 → gcd(12, 8) = 4; no --data_parallel_size
    assert (spec["rollout"]["tensor_parallel_size"], spec["rollout"]["num_gpus"]) == (4, 4)
    assert spec["distribution"]["strategy"] == "zero3"
    assert spec["batch"]["micro_batch_size"] == 8
    assert any("get_tensor_parallel_size.py" in n for n in notes)


def test_without_use_vllm_every_node_trains(tmp_path: Path) -> None:
    spec, _, _ = read(repo(tmp_path, head(nodes=2), use_vllm="false"), gpus_per_node=8)
    assert spec["rollout"]["engine"] == "hf"
    assert (spec["hardware"]["num_nodes"], spec["hardware"]["gpus_per_node"]) == (2, 8)


def test_setup_py_pins_the_trl_release(tmp_path: Path) -> None:
    recipe = RECIPE.replace("vllm_mode: server\n", "")  # TRL 0.18's default mode is server, 1.16's colocate
    path = repo(tmp_path, head(), recipe=recipe)
    (tmp_path / "setup.py").write_text('_deps = [\n    "trl[vllm]==0.18.0",\n]\n', encoding="utf-8")
    spec, _, notes = read(path, gpus_per_node=8)
    assert spec["rollout"]["engine"] == "vllm_separate"
    (tmp_path / "setup.py").unlink()
    spec, _, notes = read(path, gpus_per_node=8)
    assert spec["rollout"]["engine"] == "vllm_colocate"
    assert any("does not use the `trl vllm-serve`" in n for n in notes)


@pytest.mark.parametrize(("command", "layout", "field", "words"), [
    ("sbatch --nodes=2 slurm/train.slurm Qwen2.5-1.5B-Instruct grpo config_demo zero2", "ca8664d",
     "config_suffix (3rd argument)", ("recipes/Qwen2.5-1.5B-Instruct/grpo/config_config_demo.yaml", "give 'demo'")),
    (head(acc="zero9"), "head", "--accelerator", ("recipes/accelerate_configs/zero9.yaml", "allowed: zero2, zero3")),
    (head(nodes=1), "head", "--nodes", ("leaves no node to train", "2 or more")),
    ("sbatch slurm/train.slurm --model Qwen2.5-1.5B-Instruct --task grpo --config demo", "head", "--accelerator",
     ("requires --model, --task, --config and --accelerator",)),
    ("sbatch slurm/train.slurm Qwen2.5-1.5B-Instruct grpo demo", "ca8664d", "accelerator (4th argument)",
     ("MODEL TASK CONFIG_SUFFIX ACCELERATOR",)),
    ("sbatch --nodes=2 slurm/train.slurm --model=Qwen2.5-1.5B-Instruct --task grpo", "head",
     "slurm/train.slurm --model=Qwen2.5-1.5B-Instruct", ("unknown option", "--args VALUE")),
    (head().replace("--task grpo", "--task sft"), "head", "--task", ("allowed: grpo",)),
    (head(extra=" --help"), "head", "--help", ("prints its usage",)),
    (head(dp=8, tp=2), "head", "--dp", ("16 vLLM GPUs", "tp × dp <= 8")),
    (head(nodes=2).replace("--nodes=2", "--nodes=2-4"), "head", "--nodes", ("one node count",)),
])
def test_errors_name_the_argument_and_what_is_allowed(tmp_path: Path, command: str, layout: str, field: str,
                                                      words: tuple[str, ...]) -> None:
    path = repo(tmp_path, command, layout=layout)
    with pytest.raises(InputError) as err:
        read(path, gpus_per_node=8)
    assert err.value.field == field
    assert all(w in err.value.message for w in words), err.value.message
    result = CliRunner().invoke(app, ["plan", "--from", "trl", str(path), "--gpu", "H100-80GB", "--gpus-per-node", "8"])
    assert result.exit_code == 2 and "Traceback" not in result.output


@pytest.mark.parametrize(("flags", "code"), [
    (["--gpus-per-node", "8"], 0),  # the script's GPUS_PER_NODE: the server node planned beside a training node
    (["--gpus-per-node", "16"], 0),  # the planned node: 8 training + 8 server GPUs
    (["--gpus-per-node", "8", "--nodes", "2"], 0),  # sbatch's count, server node included
    (["--gpus-per-node", "8", "--nodes", "1"], 0),  # the training nodes
    (["--gpus-per-node", "4"], 2),  # the script starts 8 processes per node
    (["--gpus-per-node", "8", "--nodes", "3"], 2),
])
def test_plan_exit_codes(tmp_path: Path, flags: list[str], code: int) -> None:
    path = repo(tmp_path, head(nodes=2))
    result = CliRunner().invoke(app, ["plan", "--from", "trl", str(path), "--gpu", "H100-80GB", *flags])
    assert result.exit_code == code, result.output


def test_plan_from_the_installed_cli(tmp_path: Path) -> None:
    path = repo(tmp_path, head(nodes=2))
    oomless = Path(sys.executable).with_name("oomless")
    done = subprocess.run([str(oomless), "plan", "--from", "trl", str(path), "--gpu", "H100-80GB", "--gpus-per-node", "8"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "1 × 16 H100-80GB" in done.stdout and "rollout GPUs (8 per node: vllm)" in done.stdout


BIG = RECIPE.replace("per_device_train_batch_size: 16", "per_device_train_batch_size: 64").replace(
    "max_completion_length: 1024", "max_completion_length: 4096").replace("gradient_checkpointing: true",
                                                                        "gradient_checkpointing: false")


@pytest.mark.parametrize(("layout", "command"), [
    ("head", head(nodes=2, extra=" --args '--seed=3'")),
    ("ca8664d", "sbatch --nodes=2 slurm/train.slurm Qwen2.5-1.5B-Instruct grpo demo zero2"),
])
def test_write_back_goes_into_optional_args(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str,
                                            command: str) -> None:
    """fit's changes land in the job's OPTIONAL_ARGS (HEAD --args, ca8664d the 5th argument), which
    the script appends after --config and so override the recipe; the recipe and script stay."""
    monkeypatch.chdir(tmp_path)  # sbatch runs in the repository root; the written copy is read from there too
    path = repo(tmp_path, command, layout=layout, recipe=BIG)
    others = {p: p.read_text(encoding="utf-8") for p in tmp_path.rglob("*") if p.is_file() and p != path}
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["fit", "--from", "trl", str(path), "--gpu", "H100-80GB", "--gpus-per-node", "8",
                                      "--write", str(out)])
    assert result.exit_code == 0, result.output
    written = (out / path.name).read_text(encoding="utf-8")
    assert written.startswith(command.split(" --args")[0])
    job = SL.sbatch_command(parse_shell(written, "job.sh"))
    args = job.argv[-1]
    assert args.startswith("--") and "--per_device_train_batch_size=" in args
    if layout == "head":
        assert job.argv[-2] == "--args" and "--seed=3" in args  # the user's own OPTIONAL_ARGS kept
    else:
        assert len(job.argv) == 8  # sbatch --nodes=2 script MODEL TASK SUFFIX ACCELERATOR OPTIONAL_ARGS
    assert "reads it back: fits" in result.output
    assert others == {p: p.read_text(encoding="utf-8") for p in tmp_path.rglob("*")
                      if p.is_file() and p != path and out not in p.parents}
    assert path.read_text(encoding="utf-8") == command + "\n"  # --write: the user's file untouched


def test_write_back_from_a_job_in_a_subfolder_and_args_with_variables(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """sbatch runs in the repository root, so a job file under jobs/ names recipes from there; an
    OPTIONAL_ARGS that expands a variable cannot be rewritten without losing it: refused."""
    monkeypatch.chdir(tmp_path)
    path = repo(tmp_path, head(nodes=2), recipe=BIG)
    (tmp_path / "jobs").mkdir()
    job = tmp_path / "jobs" / "run.sh"
    job.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    result = CliRunner().invoke(app, ["fit", "--from", "trl", "jobs/run.sh", "--gpu", "H100-80GB", "--gpus-per-node", "8",
                                      "--write", str(tmp_path / "out")])
    assert result.exit_code == 0 and "--per_device_train_batch_size=" in (tmp_path / "out" / "run.sh").read_text(), result.output
    job.write_text(head(nodes=2, extra=' --args "$EXTRA --seed=3"') + "\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["fit", "--from", "trl", "jobs/run.sh", "--gpu", "H100-80GB", "--gpus-per-node", "8",
                                      "--write", str(tmp_path / "out2")])
    assert result.exit_code == 2 and "expands a shell variable or command" in result.output


def test_the_server_engine_settings_stay_as_the_job_starts_them(tmp_path: Path) -> None:
    from oomless.adapters.common import read_text
    from oomless.adapters.patch import sayable
    from oomless.cli.import_cmd import load_native

    path = repo(tmp_path, head(nodes=2))
    run, _ = load_native(path, "trl", HardwareFlags(gpu="H100-80GB", gpus_per_node=8))
    check = sayable("trl", path, read_text(path), run.spec)
    lower = run.spec.model_copy(update={"rollout": run.spec.rollout.model_copy(update={"gpu_memory_utilization": 0.5})})
    smaller = run.spec.model_copy(update={"batch": run.spec.batch.model_copy(update={"micro_batch_size": 8})})
    assert run.spec.rollout.engine.value == "vllm_separate" and not check(lower) and check(smaller)


def test_other_gpus_per_node_is_refused_naming_what_is_allowed(tmp_path: Path) -> None:
    path = repo(tmp_path, head(nodes=2, dp=2, tp=2).replace("sbatch", "sbatch --gres=gpu:4 --job-name x"))
    with pytest.raises(InputError) as err:
        read(path, gpus_per_node=4)
    assert err.value.field == "--gpus-per-node" and "allowed: 8, or 12" in err.value.message
    _, ignored, _ = read(path, gpus_per_node=8)
    assert any(line.startswith("sbatch --gres: not read") for line in ignored)
    assert "sbatch --job-name: no effect on memory" in ignored


def test_vllm_device_is_dropped_under_a_stated_trl_that_lacks_it(tmp_path: Path) -> None:
    """open-r1's codeforces recipe keeps `vllm_device: auto`; TRL 0.18's TrlParser drops keys it does
    not know (trl 0.18.0 scripts/utils.py: `parse_args_and_config` without remaining strings), so the
    job uses the script's server (vllm_mode's 0.18 default); unstated, the key is read as TRL <= 0.15's."""
    recipe = RECIPE.replace("vllm_mode: server\n", "vllm_device: auto\n")
    path = repo(tmp_path, "# oomless: trl==0.18\n" + head(), recipe=recipe)
    spec, _, _ = read(path, gpus_per_node=8)
    assert (spec["rollout"]["engine"], spec["rollout"]["num_gpus"]) == ("vllm_separate", 8)
    path.write_text(head() + "\n", encoding="utf-8")
    with pytest.raises(InputError) as err:
        read(path, gpus_per_node=8)
    assert err.value.field == "--gpus-per-node" and "# oomless: trl==X.Y" in err.value.message
