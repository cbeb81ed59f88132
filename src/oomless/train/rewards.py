"""Reward functions in TRL's signature: `f(prompts, completions, completion_ids, **columns) -> list[float]`.

Built-ins (`train.rewards` names): `accuracy` (math answer accuracy), `format` (the completion
matches a pattern) and `length` (DAPO's soft overlong punishment); anything else is imported
from `module:function` (the spec's folder is importable). Pure Python: no torch.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..spec.train_section import RewardSpec

RewardFunc = Callable[..., list[float | None]]
ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:/\d+)?")
DEFAULT_FORMAT_PATTERN = r"<think>.*?</think>\s*<answer>.*?</answer>"
"""DeepSeek-R1's format (think, then answer), as in TRL's and open-r1's format rewards."""


def completion_text(completion: Any) -> str:
    """A completion as text: TRL passes strings, or a list of messages for chat prompts."""
    if isinstance(completion, list):
        return "".join(str(m.get("content", "")) for m in completion if isinstance(m, dict))
    return str(completion)


def answer_part(text: str) -> str:
    """The content of the last <answer>…</answer> block, else the whole text."""
    tagged = ANSWER_TAG.findall(text)
    return tagged[-1].strip() if tagged else text.strip()


def plain_number(text: str) -> Fraction | None:
    """``text`` as an exact number when it is nothing but one (``12``, ``-3``, ``0.5``, ``1/2``)."""
    if not NUMBER.fullmatch(text.strip()):
        return None
    return Fraction(text.strip())


def last_number(text: str) -> Fraction | None:
    found = NUMBER.findall(text)
    return Fraction(found[-1]) if found else None


def _math_verify() -> tuple[Callable[..., Any], Callable[..., Any]] | None:
    try:
        from math_verify import parse, verify
    except ImportError:
        return None
    return parse, verify


def answers_match(predicted: str, gold: str) -> bool:
    """Plain numbers compare exactly (math-verify's verdict on them, without its parser);
    anything else goes to math-verify (LaTeX, fractions, sets), or, when it is not installed,
    the last number of the prediction is compared with the gold number."""
    pred, ref = plain_number(predicted), plain_number(gold)
    if pred is not None and ref is not None:
        return pred == ref
    mv = _math_verify()
    if mv is not None:
        parse, verify = mv
        return bool(verify(parse(gold), parse(predicted)))
    pred = last_number(predicted)
    return pred is not None and ref is not None and pred == ref


def accuracy(completions: list[Any], answer_column: str = "answer", **columns: Any) -> list[float | None]:
    """1 when the completion's answer (its <answer> block, else all of it) equals the gold
    answer mathematically, else 0; None (unscored) where the row has no gold answer."""
    golds = columns.get(answer_column)
    if golds is None:
        raise KeyError(f"reward accuracy: the data set has no column {answer_column!r}")
    out: list[float | None] = []
    for completion, gold in zip(completions, golds):
        if gold is None:
            out.append(None)
            continue
        out.append(1.0 if answers_match(answer_part(completion_text(completion)), str(gold)) else 0.0)
    return out


def format_reward(completions: list[Any], pattern: str = DEFAULT_FORMAT_PATTERN, value: float = 1.0, **_: Any) -> list[float | None]:
    """``value`` when the whole completion matches ``pattern`` (dot matches newlines), else 0."""
    compiled = re.compile(pattern, re.DOTALL)
    return [value if compiled.fullmatch(completion_text(c).strip()) else 0.0 for c in completions]


def length_reward(completion_ids: list[list[int]], max_tokens: int, cache_tokens: int | None = None, **_: Any) -> list[float | None]:
    """DAPO's soft overlong punishment: 0 up to ``max_tokens - cache_tokens`` tokens, then a
    linear ramp to -1 at ``max_tokens``, -1 beyond. Source: Yu et al. 2025 (DAPO), eq. 13.
    Assumes: ``cache_tokens`` defaults to a quarter of ``max_tokens``."""
    cache = max(1, max_tokens // 4) if cache_tokens is None else cache_tokens
    start = max_tokens - cache
    out: list[float | None] = []
    for ids in completion_ids:
        n = len(ids)
        out.append(0.0 if n <= start else -1.0 if n > max_tokens else (start - n) / cache)
    return out


def _named(func: Callable[..., Any], name: str, **options: Any) -> RewardFunc:
    """``func`` with ``options`` bound, called ``name`` (TRL logs `rewards/<name>/mean`)."""

    def reward(*args: Any, **kwargs: Any) -> list[float | None]:
        return func(*args, **{**options, **kwargs})

    reward.__name__ = reward.__qualname__ = name
    return reward


def import_reward(path: str, search_dir: Path | None) -> RewardFunc:
    """``module:function``; ``search_dir`` (the spec's folder) is importable first."""
    module_name, _, func_name = path.partition(":")
    if search_dir is not None and str(search_dir) not in sys.path:
        sys.path.insert(0, str(search_dir))
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise InputError("train.rewards", f"{path}: cannot import {module_name!r} ({err})") from None
    func = getattr(module, func_name, None)
    if not callable(func):
        raise InputError("train.rewards", f"{path}: {module_name} has no function {func_name!r}")
    return func


def build_reward(spec: RewardSpec, max_completion_tokens: int, search_dir: Path | None = None) -> RewardFunc:
    """The callable TRL gets for one `train.rewards` entry."""
    options = dict(spec.options)
    if spec.function == "accuracy":
        return _named(accuracy, "accuracy", **options)
    if spec.function == "format":
        return _named(format_reward, "format", **options)
    if spec.function == "length":
        options.setdefault("max_tokens", max_completion_tokens)
        return _named(length_reward, "length", **options)
    if options:
        return _named(import_reward(spec.function, search_dir), spec.function.partition(":")[2], **options)
    return import_reward(spec.function, search_dir)
