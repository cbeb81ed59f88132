"""Prompt lengths and image sizes of a dataset's rows, and their percentiles, in the spec's
terms (``lengths.typical_prompt_tokens``/``prompt_percentiles``, ``vision.typical_pixels``/
``pixels_percentiles``/``typical_images_per_prompt``).

Token counts come from the model's tokenizer when one is given and transformers is installed
(chat prompts through its chat template, with the generation prompt), else from characters at
``CHARS_PER_TOKEN``, an estimate the report labels as such. Image areas are the processor's
output: Qwen2-VL's ``smart_resize`` within the spec's pixel limits (the images' own sizes are
read with Pillow, from paths, bytes or decoded images).
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..memory import constants as C
from ..memory.vision_tokens import smart_resize

CHARS_PER_TOKEN = 4
"""Fallback without a tokenizer: about four characters of English text per token.
Source: OpenAI, "What are tokens and how to count them?" (help.openai.com); BPE tokenizers of
the Qwen/Llama families are in the same range for English, denser for code and CJK."""
PERCENTILES = (50, 90, 99)
PROMPT_FIELDS = ("prompt", "messages", "conversations", "problem", "question", "query", "instruction", "input", "text")
SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "system": "system"}
"""ShareGPT turns (`{"from": "human", "value": ...}`, LLaVA/VLM-R1/LLaMA-Factory data) as chat roles."""
IMAGE_FIELDS = ("images", "image", "image_path", "image_paths")


@dataclass
class DatasetStats:
    num_rows: int
    truncated: bool
    prompt_field: str
    tokens_from: str
    prompt_tokens: list[int]
    image_field: str | None = None
    images_per_prompt: list[int] = field(default_factory=list)
    pixels: list[int] = field(default_factory=list)
    unreadable_images: int = 0
    row_image_sizes: list[list[tuple[int, int]] | None] = field(default_factory=list)
    """Per row, each image's (height, width) as stored; None where one of them is unreadable."""
    templated: bool = False
    """Every prompt was counted through the tokenizer's chat template (what a framework encodes)."""


def percentile(values: Sequence[int], p: float) -> int:
    """Nearest-rank percentile (the smallest value with at least p % of values at or below it)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def percentiles(values: Sequence[int]) -> dict[int, int]:
    return {p: percentile(values, p) for p in PERCENTILES} if values else {}


def _pick(rows: list[dict[str, Any]], wanted: str | None, candidates: tuple[str, ...], what: str) -> str | None:
    if wanted is not None:
        if wanted not in rows[0]:
            raise InputError(f"--{what}-field", f"no column {wanted!r}; columns: {', '.join(map(str, rows[0]))}")
        return wanted
    return next((c for c in candidates if c in rows[0]), None)


def prompt_part(value: Any, drop_answer: bool = False) -> Any:
    """A row's prompt as chat turns (ShareGPT `from`/`value` read as `role`/`content`);
    ``drop_answer``: without the trailing assistant turns, where the framework takes them as the
    reference answer (VLM-R1 asks the first turn only). Kept otherwise: TRL continues a final
    assistant turn (trl/data_utils.py `apply_chat_template`, `continue_final_message`), verl
    templates the whole list."""
    if not (isinstance(value, list) and value and all(isinstance(v, dict) for v in value)):
        return value
    turns = [{"role": SHAREGPT_ROLES.get(str(v.get("from")), str(v.get("from"))), "content": v.get("value", "")}
             if "from" in v and "role" not in v else v for v in value]
    while drop_answer and len(turns) > 1 and turns[-1].get("role") == "assistant":
        turns.pop()
    return turns


def _text_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # chat messages, or content parts
        return "\n".join(_text_of(v.get("content", v.get("text", "")) if isinstance(v, dict) else v) for v in value)
    if isinstance(value, dict):
        return _text_of(value.get("content", value.get("text", "")))
    return "" if value is None else str(value)


def token_counter(tokenizer: str | None, chat: bool = False, template: str | None = None) -> tuple[Callable[..., int], str]:
    """A counter of prompt tokens ``count(value, chat=chat)`` and a description of how it counts;
    ``chat``: a plain-text prompt goes through the chat template as one user message, as the
    framework sends it; ``template``: the chat template the framework sets in place of the
    tokenizer's. The counter's `templated` attribute says whether it has a template."""
    if tokenizer is None:
        def estimate(value: Any, chat: bool = chat) -> int:
            return math.ceil(len(_text_of(value)) / CHARS_PER_TOKEN)
        estimate.templated = False  # type: ignore[attr-defined]
        return estimate, f"characters / {CHARS_PER_TOKEN} (estimate)"
    try:
        from transformers import AutoTokenizer
    except ModuleNotFoundError:
        raise InputError("--tokenizer", "needs transformers: pip install 'oomless[trace]'") from None
    try:
        tok = AutoTokenizer.from_pretrained(tokenizer)
    except Exception as err:  # transformers raises many kinds (OSError, ValueError, RuntimeError for ~user)
        first = str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__
        raise InputError("--tokenizer", f"cannot load {tokenizer[:200]!r}: {first}") from None

    if template is not None:
        tok.chat_template = template
        how = f"tokenizer {tokenizer} with the config's chat template"
    else:
        how = f"tokenizer {tokenizer}"

    def count(value: Any, chat: bool = chat) -> int:
        if chat and isinstance(value, str) and tok.chat_template:
            value = [{"role": "user", "content": value}]
        if isinstance(value, list) and value and isinstance(value[0], dict) and tok.chat_template:
            final = value[-1].get("role") == "assistant"  # a prefilled answer the policy continues
            try:
                out = tok.apply_chat_template(value, add_generation_prompt=not final, continue_final_message=final,
                                              tokenize=True, return_dict=True)
            except Exception as err:  # jinja2 TemplateError and friends: the template refuses these messages
                first = str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__
                raise InputError("chat template", f"{tokenizer}'s template refuses a prompt ({first})") from None
            return len(out["input_ids"])
        return len(tok(_text_of(value))["input_ids"])

    count.templated = bool(tok.chat_template)  # type: ignore[attr-defined]
    return count, how


def _image_size(item: Any, base: Path) -> tuple[int, int] | None:
    from PIL import Image

    try:
        if hasattr(item, "size") and hasattr(item, "mode"):  # a decoded PIL image (datasets Image feature)
            return item.size
        if isinstance(item, dict):
            if item.get("bytes"):
                with Image.open(io.BytesIO(item["bytes"])) as im:
                    return im.size
            item = item.get("path")
        if isinstance(item, str):
            path = Path(item) if Path(item).is_absolute() else base / item
            with Image.open(path) as im:
                return im.size
    except (OSError, ValueError, Image.DecompressionBombError):  # unreadable, or > 2 × PIL's pixel limit
        return None
    return None


def _images(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def measure(rows: list[dict[str, Any]], truncated: bool, *, tokenizer: str | None = None, prompt_field: str | None = None,
            image_field: str | None = None, min_pixels: int = C.QWEN_VL_MIN_PIXELS, max_pixels: int = C.QWEN_VL_MAX_PIXELS,
            base: Path = Path("."), chat: bool = False, added_text: str = "", template: str | None = None,
            drop_answer: bool = False) -> DatasetStats:
    """Prompt tokens per row (``added_text``'s tokens on each: what the framework adds to every
    prompt), images per row and each image's area after the processor's resize."""
    prompt_col = _pick(rows, prompt_field, PROMPT_FIELDS, "prompt")
    if prompt_col is None:
        raise InputError("--prompt-field", f"no prompt column found; columns: {', '.join(map(str, rows[0]))}")
    count, how = token_counter(tokenizer, chat, template)
    added = count(added_text, chat=False) if added_text else 0  # the text alone: the template is counted once
    if added:
        how += f", plus {added} tokens the framework adds to each prompt"
    values = [prompt_part(r.get(prompt_col), drop_answer) for r in rows]
    stats = DatasetStats(len(rows), truncated, prompt_col, how, [max(count(v) + added, 1) for v in values])
    stats.templated = getattr(count, "templated", False) and all(
        chat and isinstance(v, str) or isinstance(v, list) and v and isinstance(v[0], dict) for v in values)
    image_col = _pick(rows, image_field, IMAGE_FIELDS, "image")
    if image_col is None:
        return stats
    stats.image_field = image_col
    for row in rows:
        items = _images(row.get(image_col))
        stats.images_per_prompt.append(len(items))
        sizes: list[tuple[int, int]] | None = []
        for item in items:
            size = _image_size(item, base)
            if size is None:
                stats.unreadable_images += 1
                sizes = None
                continue
            width, height = size
            sizes = None if sizes is None else [*sizes, (height, width)]
            h, w = smart_resize(height, width, min_pixels=min_pixels, max_pixels=max_pixels)
            stats.pixels.append(h * w)
        stats.row_image_sizes.append(sizes)
    return stats


def completion_lengths(rows: list[dict[str, Any]], field: str, tokenizer: str | None) -> tuple[list[int], str]:
    """Tokens of each row's ``field``: completions a run generated (a rollout dump: verl
    `trainer.rollout_data_dir` rows `output`, ms-swift `completions.jsonl` rows `completion`),
    counted as plain text, no template; and how they were counted."""
    if field not in rows[0]:
        raise InputError("--completion-field", f"no column {field!r}; columns: {', '.join(map(str, rows[0]))}")
    count, how = token_counter(tokenizer)
    return [max(count(_text_of(r.get(field)), chat=False), 1) for r in rows], how


def completion_fragment(counts: Sequence[int], limit: int | None) -> dict[str, Any]:
    """The spec's completion keys from ``counts``: median, percentiles, mean, and with the run's
    limit, the share that reached it (`completion_clip_fraction`), the rest capped at it."""
    capped = [min(c, limit) for c in counts] if limit else list(counts)
    found = percentiles(capped)
    out: dict[str, Any] = {"typical_completion_tokens": found[50],
                           "completion_percentiles": {k: v for k, v in found.items() if k != 50},
                           "mean_completion_tokens": math.ceil(10 * sum(capped) / len(capped)) / 10}
    if limit:
        out["completion_clip_fraction"] = sum(c >= limit for c in counts) / len(counts)
        if out["completion_clip_fraction"] > 0:  # the CDF jumps at the limit: no percentile point beside it
            cut = 100 * (1 - out["completion_clip_fraction"])
            out["completion_percentiles"] = {k: v for k, v in out["completion_percentiles"].items() if v < limit and k <= cut}
    if not out["completion_percentiles"]:
        del out["completion_percentiles"]
    return out


def bounds_prompts(stats: DatasetStats) -> bool:
    """Whether the longest prompt seen bounds the run's: every row was read and counted by a
    tokenizer (characters / 4 is an estimate, low for code and CJK text)."""
    return not stats.truncated and not stats.tokens_from.startswith("characters")


def spec_fragment(stats: DatasetStats) -> dict[str, Any]:
    """The spec keys these statistics fill, ready to paste under the spec's sections."""
    prompts = percentiles(stats.prompt_tokens)
    out: dict[str, Any] = {"lengths": {"typical_prompt_tokens": prompts[50],
                                       "prompt_percentiles": {k: v for k, v in prompts.items() if k != 50},
                                       "mean_prompt_tokens": math.ceil(10 * sum(stats.prompt_tokens) / len(stats.prompt_tokens)) / 10}}
    if bounds_prompts(stats):
        out["lengths"]["data_max_prompt_tokens"] = max(stats.prompt_tokens)
    if stats.image_field is not None:
        vision: dict[str, Any] = {"typical_images_per_prompt": percentile(stats.images_per_prompt, 50)}
        if stats.pixels:
            pixels = percentiles(stats.pixels)
            vision.update(typical_pixels=pixels[50], pixels_percentiles={k: v for k, v in pixels.items() if k != 50})
        out["vision"] = vision
    return out
