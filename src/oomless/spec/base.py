"""Base class of every spec section: frozen, unknown keys are errors, and every float is
finite (`.inf`/`.nan` in YAML are refused with the field named, before any arithmetic)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_enum_values=False, allow_inf_nan=False)
