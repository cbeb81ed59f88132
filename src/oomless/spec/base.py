"""Base class of every spec section: frozen, unknown keys are errors, every float is finite
(`.inf`/`.nan` in YAML are refused with the field named, before any arithmetic) and every
integer fits in 64 bits. Fields with a physical range say it in their own constraints (the
JSON schema shows them); the 64-bit bound (`INT64`, last in every integer field's
annotation) catches the rest before arithmetic turns a huge integer into an OverflowError
(``float(10**400)``).

The spec modules do not postpone annotations (no ``from __future__ import annotations``):
pydantic would compile and evaluate each of the ~140 field annotations from its string when
the models are built, ~10 ms of every start-up."""

from typing import Any

from pydantic import AfterValidator, BaseModel, ConfigDict

MAX_SPEC_INT = 2**63 - 1
"""Largest integer any field holds: int64, how PyTorch, DeepSpeed and vLLM store these counts."""


def _within_int64(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_SPEC_INT:
        raise ValueError(f"at most {MAX_SPEC_INT} (2**63 - 1) in magnitude")
    return value


INT64 = AfterValidator(_within_int64)
"""The 64-bit bound of an integer field, checked after the field's own type and constraints
(so its own range speaks first), on the whole field: ``Annotated[<field type>, INT64]``.
Only integer fields carry it (a validator on every field, ``field_validator("*")``, cost
~10 ms of start-up building the models)."""


class Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_enum_values=False, allow_inf_nan=False)
