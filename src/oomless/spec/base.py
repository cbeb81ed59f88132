"""Base class of every spec section: frozen, unknown keys are errors, every float is finite
(`.inf`/`.nan` in YAML are refused with the field named, before any arithmetic) and every
integer fits in 64 bits. Fields with a physical range say it in their own constraints (the
JSON schema shows them); the 64-bit bound catches the rest before arithmetic turns a huge
integer into an OverflowError (``float(10**400)``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

MAX_SPEC_INT = 2**63 - 1
"""Largest integer any field holds: int64, how PyTorch, DeepSpeed and vLLM store these counts."""


class Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_enum_values=False, allow_inf_nan=False)

    @field_validator("*", mode="after")
    @classmethod
    def _int64(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_SPEC_INT:
            raise ValueError(f"at most {MAX_SPEC_INT} (2**63 - 1) in magnitude")
        return value
