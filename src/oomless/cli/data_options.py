"""`--data`, `--data-split`, `--tokenizer`: the run's dataset for `plan` and `fit` (`stats.apply`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

DATA_OPTION = typer.Option(
    None, "--data", help="The run's dataset (a .jsonl/.json/.parquet/.arrow file, a dataset folder or a cached Hub "
    "dataset id; `auto`: the one the --from config names): its prompt lengths (and image sizes) bound the batches the "
    "run meets; the worst batch the limits allow is reported beside them.")
DATA_SPLIT_OPTION = typer.Option("train", "--data-split", help="Split of --data (a dataset folder or Hub id).")
TOKENIZER_OPTION = typer.Option(
    None, "--tokenizer", help="Tokenizer for --data (folder or id). Default: the model's, from its folder or the local "
    "Hugging Face cache; else characters / 4.")


def measured(run: Any, raw: dict | None, spec: Path, data: str | None, split: str,
             tokenizer: str | None) -> tuple[Any, dict | None]:
    """The run (and, for `fit`, its spec mapping) with ``data``'s lengths, its notes printed;
    unchanged, with a warning for options given in vain, without ``data``."""
    if data is None:
        if tokenizer is not None or split != "train":
            typer.echo("warning: --tokenizer/--data-split are ignored without --data", err=True)
        return run, raw
    from ..stats.apply import with_data, with_data_raw

    folder = spec.resolve().parent
    if raw is None:
        run, notes = with_data(run, data, split, tokenizer, config_folder=folder)
    else:
        run, raw, notes = with_data_raw(run, raw, data, split, tokenizer, config_folder=folder)
    for note in notes:
        typer.echo(f"note: {note}", err=True)
    return run, raw
