"""collect.py finds the commands of a README the way a shell would read them."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import collect  # noqa: E402  (tests/real_configs is not a package)


def test_a_command_whose_environment_line_is_continued_is_found_from_that_line() -> None:
    text = ("Then run training with:\n"
            "CUDA_VISIBLE_DEVICES=1,2,3 ACCELERATE_LOG_LEVEL=info \\\n"
            "    accelerate launch --num_processes=3 \\\n"
            "    src/open_r1/grpo.py --config recipe.yaml\n"
            "echo done\n")
    assert collect.commands(text) == [(2, 4)]


def test_a_command_on_one_line_and_prose_between_commands() -> None:
    text = "python train.py --config a.yaml\nsome prose\ntorchrun --nproc_per_node 2 x.py \\\n  --flag 1\n"
    assert collect.commands(text) == [(1, 1), (3, 4)]


def test_a_broken_continuation_ends_the_command_where_the_shell_would() -> None:
    text = ("ACCELERATE_LOG_LEVEL=info \\\n"
            "    accelerate launch --num_processes=7\n"
            "    src/open_r1/grpo.py --config recipe.yaml\n")
    assert collect.commands(text) == [(1, 2)]
