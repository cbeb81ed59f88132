"""Commands around the training command of a launch script: the remote command `ssh` runs, and
how a refusal names the commands a script does run.

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
