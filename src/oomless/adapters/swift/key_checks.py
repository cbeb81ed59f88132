"""ms-swift flags checked against the generated key tables (`data/key_table.json`: RLHFArguments
of ms-swift 3.2-4.6; transformers' TrainingArguments, which it inherits): a flag of another
release is named in a note with the releases that have it, a flag of no release is reported so.
What a flag means for memory stays in `keys` (hand-written)."""

from __future__ import annotations

from collections.abc import Iterable

from .. import key_tables as KT
from ..common import version_text
from . import keys as SF


def tables() -> tuple[KT.KeyTable, KT.KeyTable]:
    return KT.load("swift"), KT.transformers_table()


def other_release_notes(flags: Iterable[str], version: tuple[int, ...]) -> list[str]:
    """A note per flag that ms-swift ``version`` lacks and another release has (read with its
    meaning there); the flags of `keys.FLAGS` are gated by the reader instead."""
    swift, transformers = tables()
    current = ((swift, version), (transformers, None))  # the transformers release is not known
    release = f"ms-swift {version_text(version)}"
    notes = (KT.other_release_note(name, current, release, shown=f"--{name}") for name in flags if name not in SF.FLAGS)
    return [note for note in notes if note]


def unread_why(name: str) -> str:
    """Why a flag nobody read is reported (see `key_tables.unread_key_why`)."""
    return KT.unread_key_why(tables(), name)
