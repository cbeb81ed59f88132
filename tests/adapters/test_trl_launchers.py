"""A `python script.py` TRL launch is one process on one GPU (noted when the node has more);
`python -m torch.distributed.run` / `-m accelerate.commands.launch` are the launchers they name."""

from __future__ import annotations

import pytest

from tests.adapters.test_trl import from_files


@pytest.mark.parametrize(("launcher", "gpus"), [
    ("python examples/scripts/grpo.py", 1),
    ("python -m torch.distributed.run --nproc_per_node 4 examples/scripts/grpo.py", 4),
    ("python -m accelerate.commands.launch --num_processes 2 examples/scripts/grpo.py", 2),
])
def test_python_runs_one_process_unless_it_runs_a_launcher(launcher: str, gpus: int) -> None:
    text = (f"# oomless: trl==1.16\n{launcher} --model_name_or_path Qwen/Qwen2.5-1.5B-Instruct --output_dir out "
            "--use_vllm true --vllm_mode colocate\n")
    spec, _, notes = from_files({"launch.sh": text}, gpus_per_node=8 if gpus == 1 else gpus)
    assert spec["hardware"]["gpus_per_node"] == gpus
    assert any("`python` runs one training process" in n for n in notes) == (gpus == 1)
