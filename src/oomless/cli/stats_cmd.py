"""`oomless stats DATA`: prompt lengths and image sizes of a dataset, as spec keys.

Examples:
    oomless stats data/train.jsonl                                  # characters / 4 per token
    oomless stats data/train.parquet --tokenizer ./Qwen2.5-VL-7B-Instruct --max-pixels 1003520
    oomless stats hiyouga/geometry3k --split train --json          # a dataset in the local HF cache
    oomless stats rollouts/120.jsonl --completion-field output --max-completion-tokens 1024  # a run's completions
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from .main import run_guarded


def stats_command(
    data: str = typer.Argument(..., help="A .jsonl/.json/.parquet/.arrow file, a dataset folder, or a cached Hub dataset id."),
    tokenizer: str = typer.Option(None, "--tokenizer", help="Tokenizer folder or id (transformers); default: characters / 4."),
    prompt_field: str = typer.Option(None, "--prompt-field", help="Prompt column. Default: the first of prompt, messages, problem, question, ..."),
    image_field: str = typer.Option(None, "--image-field", help="Image column. Default: images or image when present."),
    min_pixels: int = typer.Option(None, "--min-pixels", min=1, help="Processor's min_pixels (Qwen2-VL resize). Default Qwen2-VL's."),
    max_pixels: int = typer.Option(None, "--max-pixels", min=1, help="Processor's max_pixels. Default Qwen2-VL's."),
    split: str = typer.Option("train", "--split", help="Split of a dataset folder or Hub id."),
    limit: int = typer.Option(100_000, "--limit", min=1, help="Rows read at most (the first ones)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of text."),
    completion_field: str = typer.Option(
        None, "--completion-field", help="Column of completions a run generated (a rollout dump: verl "
        "trainer.rollout_data_dir `output`, ms-swift completions.jsonl `completion`): their lengths too."),
    max_completion_tokens: int = typer.Option(
        None, "--max-completion-tokens", min=1, help="The run's completion limit: the share that reached it "
        "(completion_clip_fraction); lengths above it are counted at it."),
) -> None:
    """Measure a dataset: typical prompt tokens and percentiles, images per prompt, image areas
    after the processor's resize; prints the spec keys to paste (lengths:, vision:)."""

    def body() -> int:
        import yaml

        from ..memory import constants as C
        from ..stats.measure import percentile, spec_fragment
        from ..stats.measure import measure as run_measure
        from ..stats.read import read_rows

        rows, truncated = read_rows(data, limit, split)
        base = Path(data).parent if Path(data).is_file() else Path(data)
        stats = run_measure(rows, truncated, tokenizer=tokenizer, prompt_field=prompt_field, image_field=image_field,
                            min_pixels=min_pixels or C.QWEN_VL_MIN_PIXELS, max_pixels=max_pixels or C.QWEN_VL_MAX_PIXELS,
                            base=base)
        fragment = spec_fragment(stats)
        completions = None
        if completion_field is not None:
            from ..stats.measure import completion_fragment, completion_lengths

            completions, _ = completion_lengths(rows, completion_field, tokenizer)
            fragment["lengths"].update(completion_fragment(completions, max_completion_tokens))
        elif max_completion_tokens is not None:
            typer.echo("warning: --max-completion-tokens is ignored without --completion-field", err=True)
        if not stats.templated:  # plain text: the template a framework wraps it in is not counted
            fragment["lengths"].pop("data_max_prompt_tokens", None)
        summary = {"rows": stats.num_rows, "truncated": truncated, "prompt_field": stats.prompt_field,
                   "tokens_from": stats.tokens_from, "max_prompt_tokens_seen": max(stats.prompt_tokens),
                   "image_field": stats.image_field, "unreadable_images": stats.unreadable_images,
                   "max_pixels_seen": max(stats.pixels) if stats.pixels else None,
                   "completion_field": completion_field, "max_completion_tokens_seen": max(completions) if completions else None}
        if as_json:
            typer.echo(json.dumps({"summary": summary, "spec": fragment}, indent=2))
            return 0
        more = " (the first rows only: --limit)" if truncated else ""
        typer.echo(f"# {stats.num_rows} rows{more}; prompts from {stats.prompt_field!r}, tokens by {stats.tokens_from}")
        typer.echo(f"# longest prompt seen: {summary['max_prompt_tokens_seen']} tokens "
                   f"(p99 {percentile(stats.prompt_tokens, 99)}); set lengths.max_prompt_tokens to your framework's limit")
        if stats.image_field:
            typer.echo(f"# images from {stats.image_field!r}: {len(stats.pixels)} read, {stats.unreadable_images} unreadable;"
                       f" areas after the Qwen2-VL resize within [{min_pixels or C.QWEN_VL_MIN_PIXELS}, {max_pixels or C.QWEN_VL_MAX_PIXELS}] px")
        if "data_max_prompt_tokens" not in fragment["lengths"]:
            why = ("only the first rows were read" if truncated else "tokens are estimated from characters"
                   if stats.tokens_from.startswith("characters") else "plain-text prompts are counted without the chat "
                   "template a framework wraps them in (`oomless plan --from FW CONFIG --data DATA` counts it)")
            typer.echo(f"# no data_max_prompt_tokens: {why}, so the longest prompt seen does not bound the run's")
        if completions:
            typer.echo(f"# completions from {completion_field!r}: {len(completions)}, longest {max(completions)} tokens")
        else:
            typer.echo("# completion lengths come from a run: --completion-field on its rollout dump, or "
                       "`oomless plan --run-log LOG` (completions/mean_length, response_length/mean)")
        typer.echo(yaml.safe_dump(fragment, sort_keys=False).rstrip())
        return 0

    run_guarded(body)


def register(app: typer.Typer) -> None:
    app.command("stats")(stats_command)
