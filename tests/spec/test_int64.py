"""The 64-bit bound of integer fields (`oomless.spec.base.INT64`): every field that takes an
integer carries it, it speaks only after the field's own range, and the message names the field."""

from __future__ import annotations

import typing
from typing import Any

import pytest
from pydantic import BaseModel

from oomless.errors import InputError
from oomless.spec.base import INT64, MAX_SPEC_INT
from oomless.spec.load import parse_spec
from oomless.spec.run import RunSpec
from tests.helpers import BASE_SPEC, merged


def _sections(model: type[BaseModel], seen: dict[str, type[BaseModel]]) -> dict[str, type[BaseModel]]:
    """Every model reachable from ``model`` through its fields (lists and unions included)."""
    seen[model.__name__] = model
    for field in model.model_fields.values():
        stack = [field.annotation]
        while stack:
            ann = stack.pop()
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                if ann.__name__ not in seen:
                    _sections(ann, seen)
            else:
                stack.extend(typing.get_args(ann))
    return seen


def _takes_a_bare_int(annotation: Any) -> bool:
    """The field's value itself can be an int (``int``, ``int | None``, ``int | Literal[...]``);
    ints inside a dict or list are bounded by their own constraints."""
    if annotation is int:
        return True
    if typing.get_origin(annotation) in (dict, list, tuple, typing.Literal):
        return False
    return any(_takes_a_bare_int(a) for a in typing.get_args(annotation) if not isinstance(a, (int, str, float)) or a is int)


def _carries_int64(field: Any) -> bool:
    nested = (getattr(a, "__metadata__", ()) for a in typing.get_args(field.annotation))
    return INT64 in field.metadata or any(INT64 in meta for meta in nested)


def test_every_integer_field_carries_the_64_bit_bound() -> None:
    sections = _sections(RunSpec, {})
    integer_fields = [(m.__name__, name) for m in sections.values() for name, f in m.model_fields.items()
                      if _takes_a_bare_int(f.annotation)]
    assert len(integer_fields) > 40  # the walk reaches the sections (batch, rollout, train, ...)
    missing = [(m.__name__, name) for m in sections.values() for name, f in m.model_fields.items()
               if _takes_a_bare_int(f.annotation) and not _carries_int64(f)]
    assert missing == []


WITH_TRAIN = merged(BASE_SPEC, train={"data": {"arithmetic": {}}, "rewards": ["accuracy"]})
"""The base spec with a `train:` section, whose `seed` is an integer field with no range of its own."""


@pytest.mark.parametrize("value", [MAX_SPEC_INT + 1, -(MAX_SPEC_INT + 1), 10**400, str(10**30)],
                         ids=["2**63", "-2**63", "10**400", "'10**30' as text"])
@pytest.mark.parametrize("path", ["train.seed", "distribution.stage3_max_live_parameters", "batch.steps_per_generation",
                                  "distribution.reduce_bucket_size"])
def test_an_integer_past_int64_is_one_line_naming_the_field(path: str, value: Any) -> None:
    if path != "train.seed" and value == -(MAX_SPEC_INT + 1):
        pytest.skip("a field with a lower bound of its own refuses a negative value with that bound")
    with pytest.raises(InputError) as err:
        parse_spec(merged(WITH_TRAIN, **{path: value}))
    assert str(err.value).startswith(path + ": ")
    assert str(err.value).endswith(f"at most {MAX_SPEC_INT} (2**63 - 1) in magnitude")


def test_int64_itself_is_accepted_where_the_field_allows_it() -> None:
    spec = parse_spec(merged(WITH_TRAIN, **{"train.seed": -MAX_SPEC_INT, "distribution.stage3_max_live_parameters": MAX_SPEC_INT,
                                            "distribution.reduce_bucket_size": MAX_SPEC_INT}))
    assert spec.train is not None and spec.train.seed == -MAX_SPEC_INT
    assert spec.distribution.stage3_max_live_parameters == MAX_SPEC_INT
    assert spec.distribution.reduce_bucket_size == MAX_SPEC_INT
    auto = parse_spec(merged(BASE_SPEC, **{"distribution.reduce_bucket_size": "auto"}))
    assert auto.distribution.reduce_bucket_size == "auto"


def test_a_field_with_its_own_range_speaks_first() -> None:
    with pytest.raises(InputError) as err:
        parse_spec(merged(BASE_SPEC, **{"hardware.gpus_per_node": MAX_SPEC_INT + 1}))
    assert str(err.value).startswith("hardware.gpus_per_node: ")
    assert "1024" in str(err.value) and "2**63" not in str(err.value)
