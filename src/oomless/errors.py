"""User-facing errors and the CLI's exit codes.

Every error a user can cause by what they wrote (spec, model id, GPU name, flag) is an
``InputError``: one line naming the field, the value and what is allowed. The CLI turns it
into that line on stderr and ``EXIT_BAD_INPUT``; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

EXIT_FITS = 0
"""The plan fits on every GPU and on the host."""
EXIT_DOES_NOT_FIT = 1
"""The plan was made and some phase does not fit (GPU or host)."""
EXIT_BAD_INPUT = 2
"""The input could not be planned: bad spec, unknown model/GPU, unreadable file."""
EXIT_INTERNAL_ERROR = 3
"""oomless itself failed (a bug): never a verdict. Kept apart from 1 so a script that gates on
"does not fit" never reads a crash as one."""
EXIT_INTERRUPTED = 130
"""Stopped by Ctrl-C (128 + SIGINT, the shell convention)."""


_LINE_BREAKS = {ord(c): repr(c)[1:-1] for c in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"}
"""Every character `str.splitlines` breaks on, written as its escape: a field or a message
that quotes user input (a key holding a newline, a script's statement) stays one line."""


class InputError(ValueError):
    """Bad user input; ``str(err)`` is a single line ready to print."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field.translate(_LINE_BREAKS)
        self.message = message.translate(_LINE_BREAKS)
        super().__init__(f"{self.field}: {self.message}" if field else self.message)


def closest_names(name: str, candidates: Iterable[str], limit: int = 3) -> list[str]:
    """Catalog names that look most like ``name`` (case-insensitive), best first."""
    by_lower = {c.lower(): c for c in candidates}
    hits = difflib.get_close_matches(name.lower(), list(by_lower), n=limit, cutoff=0.3)
    return [by_lower[h] for h in hits]


def unknown_name_error(field: str, name: str, candidates: Iterable[str]) -> InputError:
    """An ``InputError`` for a name missing from a catalog, suggesting the closest ones."""
    near = closest_names(name, candidates)
    hint = f"; closest: {', '.join(near)}" if near else ""
    return InputError(field, f"unknown {name!r}{hint}")
