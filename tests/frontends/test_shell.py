"""frontends.shell / frontends.words: launch scripts read through bashlex, never run."""

from __future__ import annotations

import pytest

from oomless.errors import InputError
from oomless.frontends.shell import parse_shell, pick_command, read_script

SCRIPT = r"""#!/bin/bash
set -x
MODEL_PATH=/data/Qwen2.5-7B-Instruct  # the model
export N=${N:-8}
ENGINE=${1:-vllm}
ARGS="--a 1 --b 2"
HERE=$(cd "$(dirname "$0")" && pwd)
for seed in 1 2 3; do
  python3 -m verl.trainer.main \
    config=x.yaml \
    worker.actor.model.model_path=${MODEL_PATH} seed=$seed n=$((N * 2)) engine=$ENGINE  # inline comment
done
python t.py $ARGS "$ARGS" --here $HERE --unset "$NOT_SET" > log.txt 2>&1 &
"""


def test_assignments_loops_and_expansions() -> None:
    script = read_script(SCRIPT, "run.sh")
    main = next(c for c in script.commands if "verl.trainer.main" in c.argv)
    assert main.argv[3:] == ("config=x.yaml", "worker.actor.model.model_path=/data/Qwen2.5-7B-Instruct", "seed=1",
                             "n=16", "engine=vllm")
    assert main.line == 9 and main.env == {"N": "8"}
    assert main.context == "first pass of `for seed in 1 2 3` (seed=1)"
    other = next(c for c in script.commands if c.argv[:2] == ("python", "t.py"))
    assert other.argv[2:8] == ("--a", "1", "--b", "2", "--a 1 --b 2", "--here")
    assert other.argv[8] == "." and other.argv[-1] == "$NOT_SET" and other.unresolved == ("NOT_SET",)
    assert other.background and script.commands[0].argv == ("set", "-x")


def test_arrays_if_defaults_functions_and_bash_c() -> None:
    text = """ARGS=(
   --actor.num_nodes 1   # one node
   # --ds.adam_offload
   "--x" 'y z'
)
if [ -z "$MODEL" ]; then MODEL=Qwen/Qwen2.5-7B; fi
MODEL2=keep
if true; then MODEL2=changed; fi
run() { python3 -m openrlhf.cli.train_ppo_ray ${ARGS[@]} --n ${#ARGS[@]} --pretrain $MODEL --m2 $MODEL2; }
run
srun -N1 bash -c "cd /w && python3 -m other.tool --k ${ARGS[1]}"
"""
    commands = parse_shell(text, "s.sh")
    train = commands[0]
    assert train.argv[3:] == ("--actor.num_nodes", "1", "--x", "y z", "--n", "4", "--pretrain", "Qwen/Qwen2.5-7B",
                              "--m2", "keep")
    inner = next(c for c in commands if c.argv[:3] == ("python3", "-m", "other.tool"))
    assert inner.argv[-2:] == ("--k", "1") and inner.line == 11


def test_unparseable_statements_are_skipped_and_named() -> None:
    script = read_script("case $x in a) echo a;; esac\npython3 -m verl.trainer.main_ppo a=1\n", "s.sh")
    assert script.skipped == (1,)
    command, notes = pick_command(script, lambda c: "verl.trainer.main_ppo" in c.argv, "s.sh", "main_ppo")
    assert command.argv[-1] == "a=1" and notes == ["s.sh: line(s) 1 not read (bash constructs the parser does not support)"]


def test_pick_command_says_which_and_refuses_none() -> None:
    script = read_script("torchrun a.py --x 1\ntorchrun a.py --x 2\n", "s.sh")
    command, notes = pick_command(script, lambda c: c.argv[0] == "torchrun", "s.sh", "torchrun ...")
    assert command.line == 1 and notes == ["s.sh runs 2 training commands (lines 1, 2); planned the first, line 1"]
    with pytest.raises(InputError, match=r"^s.sh: no training command found \(line 1: echo\); allowed: torchrun"):
        pick_command(read_script("echo hi\n", "s.sh"), lambda c: c.argv[0] == "torchrun", "s.sh", "torchrun ...")


@pytest.mark.parametrize(("text", "message"), [
    ("swift rlhf --system 'unterminated\n", r"^s.sh:1: malformed shell: no closing quotation"),
    ("for x in 1 2; do\n  echo $x\n", r"^s.sh:1: malformed shell: the statement never ends"),
    ("echo $((4 / 0))\n", "division by zero"),
])
def test_malformed_scripts_are_one_line(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_shell(text, "s.sh")


def test_readme_placeholders_and_trailing_continuations() -> None:
    (command,) = parse_shell("torchrun g.py --image_root <your_image_root> --n 4 \\\n\n", "s.sh")
    assert command.argv == ("torchrun", "g.py", "--image_root", "<your_image_root>", "--n", "4")


def test_unknown_command_substitution_stays_one_word() -> None:
    (command,) = parse_shell('run --log out-$(date +%Y%m%d_%H%M%S).txt --n $(expr 2 \\* 3)\n', "s.sh")
    assert command.argv == ("run", "--log", "out-$(date_+%Y%m%d_%H%M%S).txt", "--n", "6")
