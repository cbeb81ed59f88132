"""Reading values out of an HF ``config.json`` dict, shared by ``models`` and ``vision``."""

from __future__ import annotations

from typing import Any

FIELD = "model"
"""The spec field that bad config values are reported against."""


def config_int(config: dict[str, Any], key: str, default: int = 0) -> int:
    """``config[key]`` as an int, ``default`` when absent or null."""
    value = config.get(key)
    return default if value is None else int(value)
