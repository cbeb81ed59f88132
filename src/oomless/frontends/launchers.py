"""Commands around the training command of a launch script: the remote command `ssh` runs, the
command inside `sudo` and container runners (`unwrap`), and how a refusal names the commands a
script does run.

Source: ssh(1), OpenSSH 9.x: `ssh [options] destination [command [argument ...]]`; the command
words are joined with spaces and run by the remote user's shell; the options listed in
`SSH_OPTIONS_WITH_VALUE` take an argument.
"""

from __future__ import annotations

from collections.abc import Sequence

SSH_OPTIONS_WITH_VALUE = frozenset("BbcDEeFIiJLlmOoPpQRSWw")
NOT_LAUNCHERS = frozenset("echo printf mkdir cd sleep wait cat set source rm cp mv ls touch date tail head true pwd ssh".split())
"""Not listed in a refusal beside commands that run something (`ssh`: its remote commands are)."""


def ssh_remote_command(argv: Sequence[str]) -> str | None:
    """The command string of `ssh [options] host command...`, or None when it has none."""
    i = 1
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if len(argv[i]) == 2 and argv[i][-1] in SSH_OPTIONS_WITH_VALUE else 1
    return " ".join(argv[i + 1:]) or None


def described(line: int, argv: Sequence[str]) -> str:
    """`line N: prog`, with the Python script it runs when there is one (`line 9: sudo … src/train.py`)."""
    script = next((w for w in argv[1:] if w.endswith(".py")), None)
    return f"line {line}: {argv[0]}" + (f" … {script}" if script else "")


# --- wrappers that run the training command in another context -------------------------------

SUDO_OPTIONS_WITH_VALUE = frozenset((
    "-u -g -C -D -h -p -r -t -T -U --user --group --close-from --chdir --host --prompt --role --type "
    "--command-timeout --other-user").split())
"""sudo(8), 1.9: the options that take an argument; every other option is a flag. A command's
`VAR=value` words before it are its environment (sudo(8): "Environment variables to be set
for the command may also be passed on the command line in the form of VAR=value")."""

CONTAINER_OPTIONS_WITH_VALUE = frozenset((
    # docker run / podman run (docker docs "docker container run", podman-run(1))
    "-a --attach --add-host --blkio-weight --cap-add --cap-drop --cgroup-parent --cidfile --cpu-period --cpu-quota "
    "--cpu-shares -c --cpus --cpuset-cpus --cpuset-mems --device --dns --dns-option --dns-search -e --env "
    "--entrypoint --env-file --expose --gpus --group-add -h --hostname --health-cmd --health-interval "
    "--health-retries --health-timeout --ip --ipc --label -l --label-file --link --log-driver --log-opt -m --memory "
    "--memory-swap --mount --name --network --net --network-alias --pid --platform -p --publish --pull --restart "
    "--runtime --security-opt --shm-size --stop-signal --stop-timeout --storage-opt --sysctl --tmpfs -u --user "
    "--ulimit --userns --uts -v --volume --volume-driver --volumes-from -w --workdir "
    # docker compose (global, then `run`): docs "docker compose", "docker compose run"
    "-f --file --project-name --project-directory --profile "
    # singularity / apptainer exec|run (apptainer-exec(1)); their -e is --cleanenv, a flag
    "-B --bind --overlay -o --pwd -W --home -H --scratch -S --security --network-args --app"
).split())

CONTAINER_ENV_OPTIONS = frozenset({"-e", "--env"})


def unwrap(argv: Sequence[str]) -> tuple[list[str], dict[str, str]] | None:
    """The command a wrapper runs and the `KEY=value` environment it gives that command, for
    `sudo [options] cmd`, `docker|podman|nvidia-docker run [options] IMAGE cmd`, `docker compose
    [options] run [options] SERVICE cmd` (and `docker-compose`), `singularity|apptainer exec|run
    [options] IMAGE cmd`; None when ``argv`` is none of them or runs nothing after the image."""
    name = argv[0].rsplit("/", 1)[-1] if argv else ""
    if name == "sudo":
        found = _after_options(list(argv[1:]), SUDO_OPTIONS_WITH_VALUE, image=False)
        if found is None:
            return None
        inner, env = found
        while inner and "=" in inner[0] and inner[0].split("=", 1)[0].isidentifier():
            key, _, value = inner.pop(0).partition("=")
            env[key] = value
        return (inner, env) if inner else None
    words = list(argv[1:])
    if name in ("docker", "podman", "nvidia-docker") and words[:1] == ["compose"]:
        name, words = "docker-compose", words[1:]
    if name == "docker-compose":
        words = _skip_options(words, CONTAINER_OPTIONS_WITH_VALUE)[0]
        return _after_options(words[1:], CONTAINER_OPTIONS_WITH_VALUE, image=True) if words[:1] == ["run"] else None
    if name in ("docker", "podman", "nvidia-docker") and words[:1] == ["run"]:
        return _after_options(words[1:], CONTAINER_OPTIONS_WITH_VALUE, image=True)
    if name in ("singularity", "apptainer") and words[:1] in (["exec"], ["run"]):
        singularity = CONTAINER_OPTIONS_WITH_VALUE - {"-e", "-c"} | {"--env"}  # -e --cleanenv, -c --contain: flags
        return _after_options(words[1:], singularity, image=True, env_options=frozenset({"--env"}))
    return None


def _skip_options(words: list[str], with_value: frozenset[str],
                  env_options: frozenset[str] = CONTAINER_ENV_OPTIONS) -> tuple[list[str], dict[str, str]]:
    env: dict[str, str] = {}
    i = 0
    while i < len(words) and words[i].startswith("-") and words[i] != "--":
        option, _, inline = words[i].partition("=")
        value = inline if inline or "=" in words[i] else None
        if value is None and option in with_value and i + 1 < len(words):
            i, value = i + 1, words[i + 1]
        if option in env_options and value and "=" in value:
            key, _, val = value.partition("=")
            env[key] = val
        i += 1
    if i < len(words) and words[i] == "--":
        i += 1
    return words[i:], env


def _after_options(words: list[str], with_value: frozenset[str], image: bool,
                   env_options: frozenset[str] = CONTAINER_ENV_OPTIONS) -> tuple[list[str], dict[str, str]] | None:
    rest, env = _skip_options(words, with_value, env_options if image else frozenset())
    if image:
        rest = rest[1:]  # the image or service
    return (rest, env) if rest else None
