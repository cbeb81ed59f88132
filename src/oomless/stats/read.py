"""Rows of a local dataset, read without executing anything: JSONL, JSON, Parquet, a saved or
cached Hugging Face dataset folder, or a Hub dataset id already in the local cache.

At most ``limit`` rows are read (the first ones; percentiles of a large dataset come from that
sample, and the report says so). Parquet, Arrow and Hub datasets need the ``datasets`` package
(the ``train`` extra); JSON needs nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import InputError

FIELD = "DATA"
JSON_SUFFIXES = (".jsonl", ".json", ".ndjson")
TABLE_SUFFIXES = (".parquet", ".arrow")


def _json_rows(path: Path) -> Iterator[dict[str, Any]]:
    if path.suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise InputError(FIELD, f"{path} is not readable JSON ({err})") from None
        rows = data.get("data", data.get("rows")) if isinstance(data, dict) else data
        if not isinstance(rows, list):
            raise InputError(FIELD, f"{path}: expected a list of rows (or {{'data': [...]}})")
        yield from (r for r in rows if isinstance(r, dict))
        return
    try:
        handle = path.open(encoding="utf-8")
    except OSError as err:
        raise InputError(FIELD, f"cannot read {path}: {err.strerror}") from None
    with handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise InputError(FIELD, f"{path}:{number} is not a JSON object ({err.msg})") from None
            if isinstance(row, dict):
                yield row


def _datasets() -> Any:
    try:
        import datasets
    except ModuleNotFoundError:
        raise InputError(FIELD, "Parquet, Arrow and Hub datasets need the datasets package: pip install 'oomless[train]'") from None
    return datasets


def _table_rows(files: list[Path], split: str) -> Iterator[dict[str, Any]]:
    kind = "parquet" if files[0].suffix == ".parquet" else "arrow"
    dataset = _datasets().load_dataset(kind, data_files=[str(f) for f in files], split=split)
    yield from dataset


def _folder_rows(path: Path, split: str) -> Iterator[dict[str, Any]]:
    if (path / "dataset_info.json").exists() or (path / "dataset_dict.json").exists():
        loaded = _datasets().load_from_disk(str(path))
        yield from loaded[split] if hasattr(loaded, "keys") and split in loaded else loaded
        return
    for suffixes in (TABLE_SUFFIXES, JSON_SUFFIXES):
        files = sorted(p for p in path.rglob("*") if p.suffix in suffixes and p.is_file())
        if files:
            if suffixes == TABLE_SUFFIXES:
                yield from _table_rows(files, "train")
            else:
                for file in files:
                    yield from _json_rows(file)
            return
    raise InputError(FIELD, f"{path} holds no .jsonl/.json/.parquet/.arrow files and no saved dataset")


def iter_rows(source: str, split: str = "train") -> Iterator[dict[str, Any]]:
    """Rows of ``source``: a file, a folder, or a Hub dataset id in the local cache."""
    path = Path(source).expanduser()
    if path.is_dir():
        yield from _folder_rows(path, split)
    elif path.is_file():
        if path.suffix in JSON_SUFFIXES:
            yield from _json_rows(path)
        elif path.suffix in TABLE_SUFFIXES:
            yield from _table_rows([path], split)
        else:
            raise InputError(FIELD, f"{path}: unknown format; allowed: {', '.join(JSON_SUFFIXES + TABLE_SUFFIXES)}, a folder, or a Hub dataset id")
    elif path.suffix in JSON_SUFFIXES + TABLE_SUFFIXES or source.startswith((".", "/", "~")):
        raise InputError(FIELD, f"no such file or folder: {source}")
    else:
        datasets = _datasets()
        try:
            yield from datasets.load_dataset(source, split=split)
        except Exception as err:  # datasets raises many kinds; one line with the first of its message
            first = str(err).splitlines()[0][:200] if str(err) else type(err).__name__
            raise InputError(FIELD, f"{source!r} is not a local file or folder, and datasets could not load it ({first})") from None


def read_rows(source: str, limit: int, split: str = "train") -> tuple[list[dict[str, Any]], bool]:
    """The first ``limit`` rows and whether more were left unread."""
    rows: list[dict[str, Any]] = []
    for row in iter_rows(source, split):
        if len(rows) == limit:
            return rows, True
        rows.append(dict(row))
    if not rows:
        raise InputError(FIELD, f"{source} has no rows")
    return rows, False
