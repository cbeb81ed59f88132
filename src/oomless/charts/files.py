"""Where charts may be written: checked before anything is drawn.

Chart files are outputs the user named, so an existing chart is replaced; but a chart never
replaces an input (the spec it was planned from), the HTML and PNG never share a path, the
name says what the file is (`.html`/`.htm`, `.png`), and the folder must exist. Writes go to a
temporary file in the same folder, then replace the target, so a failure leaves no half file.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from ..errors import InputError

SUFFIXES = {"--html": (".html", ".htm"), "--png": (".png",)}


def _same_file(a: Path, b: Path) -> bool:
    if a.exists() and b.exists():
        return os.path.samefile(a, b)
    return a.resolve() == b.resolve()


def check_outputs(outputs: dict[str, Path | None], inputs: Iterable[Path] = ()) -> None:
    """``outputs`` maps an option name (`--html`, `--png`) to its path, or None when not asked."""
    asked = {flag: Path(p) for flag, p in outputs.items() if p is not None}
    for flag, path in asked.items():
        allowed = SUFFIXES[flag]
        if path.suffix.lower() not in allowed:
            raise InputError(flag, f"{str(path)!r} must end in {' or '.join(allowed)}")
        if path.is_dir():
            raise InputError(flag, f"{str(path)!r} is a directory; give a file name")
        if not path.parent.is_dir():
            raise InputError(flag, f"folder {str(path.parent)!r} does not exist")
        for source in inputs:
            if _same_file(path, Path(source)):
                raise InputError(flag, f"{str(path)!r} is an input of this command; refusing to overwrite it")
    paths = list(asked.items())
    for i, (flag, path) in enumerate(paths):
        for other_flag, other in paths[i + 1 :]:
            if _same_file(path, other):
                raise InputError(other_flag, f"{str(other)!r} is also the {flag} file; give two different paths")


def write_atomically(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    """The process's umask (mkstemp creates files 0600; a chart gets the usual 0666 & ~umask)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask
