"""Prompts for the trainer: a local file, a `datasets` name, or a generated arithmetic set.

The trainer reads the column `prompt` (text, or a list of chat messages); rewards read the
other columns by name. `train.data.columns` renames data-set columns to those names; text
prompts become one user message (after an optional system message) so the tokenizer's chat
template applies (TRL applies it to conversational prompts).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from ..spec.train_section import ArithmeticData, TrainData

if TYPE_CHECKING:
    from datasets import Dataset

FILE_BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv"}
"""`datasets` builder for each local file suffix."""


def arithmetic_rows(spec: ArithmeticData) -> list[dict[str, str]]:
    """``num_samples`` rows ``{"prompt": "a+b=", "answer": "a+b"}`` with operands in 0..max_operand."""
    rng = random.Random(spec.seed)
    rows = []
    for _ in range(spec.num_samples):
        a, b = rng.randint(0, spec.max_operand), rng.randint(0, spec.max_operand)
        rows.append({"prompt": f"{a}+{b}=", "answer": str(a + b)})
    return rows


def _load_file(path: Path, split: str) -> Dataset:
    from datasets import load_dataset

    builder = FILE_BUILDERS.get(path.suffix.lower())
    if builder is None:
        raise InputError("train.data.path", f"{path.name}: unknown file type; allowed: {', '.join(FILE_BUILDERS)}")
    if not path.is_file():
        raise InputError("train.data.path", f"no such file: {path}")
    return load_dataset(builder, data_files={split: str(path)}, split=split)


def _load_named(name: str, split: str, base_dir: Path | None) -> Dataset:
    from datasets import load_dataset, load_from_disk

    local = Path(name) if base_dir is None or Path(name).is_absolute() else base_dir / name
    try:
        if local.is_dir() and (local / "dataset_info.json").exists():
            return load_from_disk(str(local))
        return load_dataset(str(local) if local.exists() else name, split=split)
    except Exception as err:  # datasets raises many kinds (offline, missing split, no builder)
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise InputError("train.data.name", f"{name}: cannot load split {split!r}: {first}") from None


def as_messages(prompt: Any, system_prompt: str | None) -> Any:
    """A text prompt as chat messages; a prompt that already is a message list is kept."""
    if not isinstance(prompt, str):
        return prompt
    head = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return head + [{"role": "user", "content": prompt}]


def load_prompts(data: TrainData, base_dir: Path | None = None) -> Dataset:
    """The data set the trainer iterates, with `prompt` (and reward columns) named."""
    from datasets import Dataset

    if data.arithmetic is not None:
        ds = Dataset.from_list(arithmetic_rows(data.arithmetic))
    elif data.path is not None:
        path = Path(data.path)
        ds = _load_file(path if path.is_absolute() or base_dir is None else base_dir / path, data.split)
    else:
        assert data.name is not None  # TrainData checks one source is given
        ds = _load_named(data.name, data.split, base_dir)
    for trainer_column, source in data.columns.items():
        if source not in ds.column_names:
            raise InputError(f"train.data.columns.{trainer_column}", f"no column {source!r}; the data has {', '.join(ds.column_names)}")
        if source != trainer_column:
            if trainer_column in ds.column_names:
                ds = ds.remove_columns(trainer_column)
            ds = ds.rename_column(source, trainer_column)
    if "prompt" not in ds.column_names:
        raise InputError("train.data.columns", f"no `prompt` column; map one, e.g. {{prompt: question}} (columns: {', '.join(ds.column_names)})")
    if data.max_samples is not None:
        ds = ds.select(range(min(data.max_samples, len(ds))))
    if data.conversational:
        ds = ds.map(lambda row: {"prompt": as_messages(row["prompt"], data.system_prompt)})
    return ds


def drop_long_prompts(ds: Dataset, prompt_token_counts: list[int], max_prompt_tokens: int) -> tuple[Dataset, int]:
    """Rows whose prompt fits `lengths.max_prompt_tokens` (TRL 1.16 does not truncate prompts,
    and the plan assumes none is longer), and how many were dropped."""
    keep = [i for i, n in enumerate(prompt_token_counts) if n <= max_prompt_tokens]
    if not keep:
        raise InputError("lengths.max_prompt_tokens", f"{max_prompt_tokens} is shorter than every prompt (shortest {min(prompt_token_counts)} tokens)")
    return (ds if len(keep) == len(ds) else ds.select(keep)), len(ds) - len(keep)
