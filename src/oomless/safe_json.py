"""JSON read with bounds: model `config.json`s, DeepSpeed configs, dataset rows.

`json.loads` itself has two ways to fail that are not `JSONDecodeError`: a document nested
deeper than Python's recursion limit (RecursionError from the scanner) and one so large that
reading it exhausts memory. A document that parses but nests hundreds of levels would break
the recursive code after it instead (flattening keys, merging defaults). Here the text's size
is bounded before parsing and the parsed value's depth is counted without recursion.
"""

from __future__ import annotations

import json
from typing import Any

from .errors import InputError

MAX_JSON_BYTES = 64 * 1024**2
"""Largest JSON text read (64 MiB): a model's config.json is a few KiB, a DeepSpeed config
under one, a dataset row rarely above a few MiB (images are paths or base64 of one image)."""
MAX_JSON_DEPTH = 100
"""Deepest nesting of objects/arrays read; real configs nest under ten levels."""


def load_json(text: str | bytes, where: str) -> Any:
    """The value in ``text``; an ``InputError`` naming ``where`` when it is not JSON, larger
    than `MAX_JSON_BYTES`, or nested deeper than `MAX_JSON_DEPTH`."""
    if len(text) > MAX_JSON_BYTES:
        raise InputError(where, f"{len(text):,} bytes of JSON; at most {MAX_JSON_BYTES:,} are read")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(where, f"not valid JSON ({err.msg} at line {err.lineno} column {err.colno})") from None
    except UnicodeDecodeError as err:
        raise InputError(where, f"not valid JSON (not UTF-8 text: {err.reason} at byte {err.start})") from None
    except RecursionError:
        raise InputError(where, f"JSON nested too deeply; at most {MAX_JSON_DEPTH} levels are read") from None
    if _depth(value) > MAX_JSON_DEPTH:
        raise InputError(where, f"JSON nested deeper than {MAX_JSON_DEPTH} levels; at most that many are read")
    return value


def _depth(value: Any) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, depth)
            if depth <= MAX_JSON_DEPTH:
                stack.extend((child, depth + 1) for child in (node.values() if isinstance(node, dict) else node))
    return deepest
