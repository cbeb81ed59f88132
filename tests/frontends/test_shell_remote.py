"""frontends.shell: the remote command of `ssh host "..."` is read as a script, and a refusal names
what a script does run (the Python script behind a wrapper), not its echo lines."""

from __future__ import annotations

import pytest

from oomless.errors import InputError
from oomless.frontends.shell import parse_shell, pick_command, read_script

REMOTE = r"""PORT=2222
for host in node1 node2; do
  ssh -p $PORT -o StrictHostKeyChecking=no $host "cd /work && \
      NODE_RANK=0 torchrun --nproc_per_node=8 src/open_r1/grpo_jsonl.py --lr 1e-6" > log.txt 2>&1 &
done
"""


def test_the_remote_command_of_ssh_is_read_after_its_options_and_host() -> None:
    commands = parse_shell(REMOTE, "multi.sh")
    train = next(c for c in commands if c.argv[0] == "torchrun")
    assert train.argv[1:] == ("--nproc_per_node=8", "src/open_r1/grpo_jsonl.py", "--lr", "1e-6")
    assert train.env.get("NODE_RANK") == "0" and train.line == 3


def test_ssh_without_a_remote_command_adds_nothing() -> None:
    assert [c.argv[0] for c in parse_shell("ssh -i key.pem node1\n", "s.sh")] == ["ssh"]


def test_a_refusal_lists_the_command_inside_the_wrappers_and_leaves_echo_out() -> None:
    text = 'echo start\nmkdir -p logs\nssh node1 "sudo -E docker compose run trainer torchrun src/train.py --x 1"\n'
    with pytest.raises(InputError, match=r"^s.sh: no training command found \(line 3: torchrun … src/train.py\); allowed: "):
        pick_command(read_script(text, "s.sh"), lambda c: "grpo" in " ".join(c.argv), "s.sh", "torchrun ... grpo_*.py")
