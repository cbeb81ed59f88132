"""Training commands run through sudo or a container (frontends/launchers.py `unwrap`): the
command inside is the one planned, and the `-e KEY=value` the container gets reach it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oomless.frontends.commented import commented_commands
from oomless.frontends.launchers import unwrap
from oomless.frontends.shell import parse_shell

TORCHRUN = "torchrun --nproc_per_node 8 src/open_r1/grpo_rec.py --per_device_train_batch_size 2"


@pytest.mark.parametrize("wrapper", [
    "sudo -E",
    "sudo -u trainer -E",
    "docker run --rm -it --gpus all --shm-size 16g -v /data:/data -e NPROC=8 --ipc=host my/image:tag",
    "docker compose -f docker-compose.yml run --rm -e NPROC=8 trainer",
    "docker-compose -f compose.yml run --rm trainer",
    "podman run --rm --device nvidia.com/gpu=all my/image",
    "singularity exec --nv -B /data:/data image.sif",
    "apptainer run --nv --env NPROC=8 image.sif",
    "sudo -E docker-compose -f docker-compose.yml run --rm trainer",
])
def test_the_command_inside_a_wrapper_is_the_training_command(wrapper: str) -> None:
    (command,) = parse_shell(f"{wrapper} {TORCHRUN}\n", "run.sh")
    assert command.argv[:3] == ("torchrun", "--nproc_per_node", "8")
    assert command.argv[-1] == "2"


def test_container_environment_reaches_the_command() -> None:
    (command,) = parse_shell(f"docker run -e NPROC_PER_NODE=4 --env=MAX_PIXELS=401408 -e HOME img {TORCHRUN}\n", "r.sh")
    assert command.env["NPROC_PER_NODE"] == "4" and command.env["MAX_PIXELS"] == "401408"
    assert "HOME" not in command.env  # `-e NAME` passes the host's value, which the script does not set


def test_singularity_minus_e_is_cleanenv_not_an_environment_value() -> None:
    inner, env = unwrap(["singularity", "exec", "-e", "--env", "A=1", "image.sif", "python", "train.py"])
    assert inner == ["python", "train.py"] and env == {"A": "1"}


@pytest.mark.parametrize("argv", [["docker", "ps"], ["docker", "run", "image"], ["sudo"], ["docker", "compose", "up"],
                                  ["python", "train.py"]])
def test_what_runs_nothing_or_is_no_wrapper_is_left_alone(argv: list[str]) -> None:
    assert unwrap(argv) is None


def test_singularity_contain_is_a_flag() -> None:
    inner, _ = unwrap(["apptainer", "exec", "-c", "--nv", "image.sif", "torchrun", "train.py"])
    assert inner == ["torchrun", "train.py"]


WORDS = st.sampled_from(["sudo", "-E", "-u", "docker", "compose", "run", "--rm", "-e", "A=1", "--env", "img", "exec",
                         "singularity", "apptainer", "-c", "--", "torchrun", "python", "-m", "x.py", "="])


@settings(max_examples=200, deadline=None)
@given(st.lists(WORDS, max_size=12))
def test_unwrap_never_raises_and_only_shortens(argv: list[str]) -> None:
    found = unwrap(argv)
    if found is not None:
        inner, env = found
        assert inner and len(inner) < len(argv) and all(isinstance(v, str) for v in env.values())


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("# \\\n'\"$(){}`;&|abc=-")), max_size=200))
def test_commented_commands_never_raise(text: str) -> None:
    for command in commented_commands(text, "fuzz.sh"):
        assert command.argv and command.line >= 1


def test_sudo_takes_variables_and_long_options_with_values() -> None:
    (command,) = parse_shell(f"sudo --user root CUDA_VISIBLE_DEVICES=0,1 NPROC=2 {TORCHRUN}\n", "run.sh")
    assert command.argv[0] == "torchrun"
    assert command.env["CUDA_VISIBLE_DEVICES"] == "0,1" and command.env["NPROC"] == "2"
