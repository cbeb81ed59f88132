"""File names from user input, checked before any filesystem call.

A model id, a dataset, a `--config-name` or a `--deepspeed` file written in a spec or a
framework script becomes a path here. Three inputs make `pathlib` raise instead of answering
"no such file": a name longer than the system allows (OSError ENAMETOOLONG on `exists()`), a
NUL character (ValueError), and `~user` for a user this machine does not have (RuntimeError
from `expanduser()`). `checked_path` refuses the first two in one line naming the field;
`expand_user` leaves an unknown `~user` as written (then it simply does not exist); the
predicates answer False instead of raising for whatever the filesystem still refuses
(permissions, loops).
"""

from __future__ import annotations

from pathlib import Path

from .errors import InputError

MAX_NAME_BYTES = 255
"""Longest file or folder name (one path component) in bytes: NAME_MAX of Linux ext4/xfs and
of macOS APFS."""
MAX_PATH_BYTES = 4096
"""Longest path in bytes: PATH_MAX of Linux (limits.h)."""


def shown(name: str, limit: int = 80) -> str:
    """``name`` for a one-line message: cut to ``limit`` characters, its length said."""
    return repr(name) if len(name) <= limit else f"{name[:limit]!r}… ({len(name):,} characters)"


def path_problem(name: str) -> str | None:
    """Why ``name`` cannot be a path on this system, or None when it can."""
    if "\0" in name:
        return "contains a NUL character"
    size = len(name.encode("utf-8", "surrogateescape"))
    if size > MAX_PATH_BYTES:
        return f"is {size:,} bytes long; a path has at most {MAX_PATH_BYTES:,}"
    longest = max((len(part.encode("utf-8", "surrogateescape")) for part in name.split("/")), default=0)
    if longest > MAX_NAME_BYTES:
        return f"has a name of {longest:,} bytes; a file or folder name has at most {MAX_NAME_BYTES}"
    return None


def expand_user(name: str) -> Path:
    """``Path(name).expanduser()``, or the path as written when its ``~user`` is unknown here."""
    try:
        return Path(name).expanduser()
    except RuntimeError:  # "Could not determine home directory"
        return Path(name)


def checked_path(name: str, field: str) -> Path:
    """``name`` as a path (``~`` expanded where possible); an ``InputError`` naming ``field``
    when it is too long or holds a NUL, before the filesystem is asked anything."""
    problem = path_problem(str(name))
    if problem is not None:
        raise InputError(field, f"{shown(str(name))} {problem}")
    return expand_user(str(name))


def exists(path: Path) -> bool:
    """``path.exists()``, False where the filesystem refuses the question."""
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def is_file(path: Path) -> bool:
    """``path.is_file()``, False where the filesystem refuses the question."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def is_dir(path: Path) -> bool:
    """``path.is_dir()``, False where the filesystem refuses the question."""
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False
