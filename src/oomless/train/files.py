"""The run folder's files, written so that a crash or Ctrl-C never leaves half of one.

Every write goes to a temporary file in the same folder and then replaces the target
(`os.replace`, atomic on POSIX and Windows within one file system): a reader sees the old file
or the new one. JSON-lines files are appended to the same way (old lines + new lines, then
replace); a run's files hold one record per step and phase, so each rewrite is small.

Checkpoints (`checkpoint-N/`) are written by transformers itself, straight into the folder
(transformers 5.24 `Trainer._save_checkpoint`: model, optimizer, scheduler, RNG, then
`trainer_state.json` last). What is ours is to resume only from a checkpoint whose
`trainer_state.json` exists (`last_complete_checkpoint`): one cut off while saving is skipped.
The final model (`final/`) is saved into a staging folder that then takes its name
(`replace_folder`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..charts.files import write_atomically
from ..telemetry import stamped

CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
TRAINER_STATE = "trainer_state.json"
"""Written last into a checkpoint by transformers (`TRAINER_STATE_NAME`)."""


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, text.encode("utf-8"))


def append_jsonl(path: Path, records: Iterable[dict[str, Any]], schema: bool = False) -> None:
    """Add one JSON line per record (``schema``: stamped with the telemetry schema version)."""
    lines = "".join(json.dumps(stamped(r) if schema else r) + "\n" for r in records)
    if not lines:
        return
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    if old and not old.endswith("\n"):
        old += "\n"
    write_text(path, old + lines)


def replace_folder(target: Path, write: Callable[[Path], None]) -> None:
    """``write`` fills a new folder beside ``target``, which then takes its name (the old one,
    if any, is renamed away first and removed last): a crash leaves the old folder or the new."""
    staging = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        write(staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    old = target.with_name(f".{target.name}.old-{os.getpid()}")
    if target.exists():
        os.replace(target, old)
    os.replace(staging, target)
    shutil.rmtree(old, ignore_errors=True)


def checkpoints(folder: Path) -> list[tuple[int, Path]]:
    """(step, folder) of every `checkpoint-N` folder, by step."""
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if p.is_dir() and (m := CHECKPOINT.match(p.name))]
    return sorted(found)


def last_complete_checkpoint(folder: Path) -> tuple[Path | None, list[Path]]:
    """The newest checkpoint transformers finished writing, and the newer ones it did not."""
    incomplete: list[Path] = []
    for _, path in reversed(checkpoints(folder)):
        if (path / TRAINER_STATE).is_file():
            return path, incomplete
        incomplete.append(path)
    return None, incomplete
