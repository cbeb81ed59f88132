"""Rows of a local dataset, read without executing anything: JSONL, JSON, Parquet, a saved or
cached Hugging Face dataset folder, or a Hub dataset id already in the local cache.

At most ``limit`` rows are read (the first ones; percentiles of a large dataset come from that
sample, and the report says so). Parquet, Arrow and Hub datasets need the ``datasets`` package
(the ``train`` extra); JSON needs nothing.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .. import safe_paths as SP
from ..errors import InputError
from ..safe_json import load_json

FIELD = "DATA"
JSON_SUFFIXES = (".jsonl", ".json", ".ndjson")
TABLE_SUFFIXES = (".parquet", ".arrow")


def _json_rows(path: Path) -> Iterator[dict[str, Any]]:
    if path.suffix == ".json":
        try:
            data = load_json(path.read_bytes(), str(path))
        except OSError as err:
            raise InputError(FIELD, f"cannot read {path}: {err.strerror}") from None
        rows = data.get("data", data.get("rows")) if isinstance(data, dict) else data
        if not isinstance(rows, list):
            raise InputError(FIELD, f"{path}: expected a list of rows (or {{'data': [...]}})")
        yield from (r for r in rows if isinstance(r, dict))
        return
    try:
        handle = path.open("rb")
    except OSError as err:
        raise InputError(FIELD, f"cannot read {path}: {err.strerror}") from None
    with handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = load_json(line, f"{path}:{number}")
            except InputError as err:
                raise InputError(FIELD, f"{path}:{number} is not a JSON object ({err.message.removeprefix('not valid JSON (').removesuffix(')')})") from None
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
    datasets = _datasets()
    try:
        with _quiet_datasets():
            dataset = datasets.load_dataset(kind, data_files=[str(f) for f in files], split=split)
    except Exception as err:  # pyarrow/datasets raise many kinds on a damaged file; one line each
        raise InputError(FIELD, f"{files[0] if len(files) == 1 else files[0].parent} is not a readable {kind} "
                         f"dataset ({_first_line(err)})") from None
    yield from dataset


@contextlib.contextmanager
def _quiet_datasets() -> Iterator[None]:
    """datasets logs its own line for a damaged file before raising; the one line is ours."""
    logger = logging.getLogger("datasets")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def _first_line(err: Exception) -> str:
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0][:200]}" if text else type(err).__name__


def _folder_rows(path: Path, split: str) -> Iterator[dict[str, Any]]:
    if (path / "dataset_info.json").exists() or (path / "dataset_dict.json").exists():
        try:
            loaded = _datasets().load_from_disk(str(path))
        except Exception as err:  # a damaged saved dataset: one line
            raise InputError(FIELD, f"{path} is not a readable saved dataset ({_first_line(err)})") from None
        if hasattr(loaded, "keys"):  # a DatasetDict: one of its splits
            if split not in loaded:
                raise InputError(FIELD, f"{path} has no split {split!r}; allowed: {', '.join(map(str, loaded.keys()))}")
            loaded = loaded[split]
        yield from loaded
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


def iter_rows(source: str, split: str = "train", subset: str | None = None) -> Iterator[dict[str, Any]]:
    """Rows of ``source``: a file, a folder, or a Hub dataset id (its ``subset``, datasets'
    config name) in the local cache, read offline."""
    if not source.strip():
        raise InputError(FIELD, "empty; allowed: a .jsonl/.json/.parquet/.arrow file, a dataset folder or a cached Hub dataset id")
    path = SP.checked_path(source, FIELD)
    if SP.is_dir(path):
        yield from _folder_rows(path, split)
    elif SP.is_file(path):
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
            with _offline(datasets):
                loaded = datasets.load_dataset(source, name=subset, split=split)
        except Exception as err:  # datasets raises many kinds; one line with the first of its message
            raise InputError(FIELD, f"{source!r}{f' ({subset})' if subset else ''} is not a local file or folder, and "
                             f"datasets could not load it from the local cache ({_first_line(err)})") from None
        yield from loaded


@contextlib.contextmanager
def _offline(datasets: Any) -> Iterator[None]:
    """datasets' and huggingface_hub's offline switches on for one load: a Hub id is read from
    the local cache, never downloaded (datasets reads `config.HF_HUB_OFFLINE` when it resolves
    a dataset, huggingface_hub `constants.HF_HUB_OFFLINE`)."""
    from huggingface_hub import constants

    saved = datasets.config.HF_HUB_OFFLINE, constants.HF_HUB_OFFLINE
    datasets.config.HF_HUB_OFFLINE = constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE, constants.HF_HUB_OFFLINE = saved


def read_rows(source: str, limit: int, split: str = "train", subset: str | None = None) -> tuple[list[dict[str, Any]], bool]:
    """The first ``limit`` rows and whether more were left unread."""
    rows: list[dict[str, Any]] = []
    for row in iter_rows(source, split, subset):
        if len(rows) == limit:
            return rows, True
        rows.append(dict(row))
    if not rows:
        raise InputError(FIELD, f"{source} has no rows")
    return rows, False
