"""`fit.overrides.apply` builds its copies directly (`_updated`): each must be the instance
`model_copy(update=...)` gives, field values, set fields, extra and private state alike, and
never change the spec it copies."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomless.fit import overrides as O
from oomless.spec.load import load_run

SEEDS = sorted(Path(__file__).resolve().parents[2].joinpath("examples", "seeds").glob("*.yaml"))
STATE = ("__dict__", "__pydantic_extra__", "__pydantic_fields_set__", "__pydantic_private__")


def _models(spec):
    yield spec
    for name in type(spec).model_fields:
        value = getattr(spec, name)
        if hasattr(value, "__pydantic_fields_set__"):
            yield value


@pytest.mark.parametrize("path", SEEDS, ids=lambda p: p.name)
def test_updated_is_model_copy(path: Path) -> None:
    spec = load_run(path).spec
    for model in _models(spec):
        before = {a: getattr(model, a) for a in STATE[:3]}
        for name in type(model).model_fields:
            for value in (getattr(model, name), None):
                values = {name: value}
                ours, theirs = O._updated(model, values), model.model_copy(update=values)
                assert type(ours) is type(theirs)
                for attr in STATE:
                    assert getattr(ours, attr) == getattr(theirs, attr), (name, attr)
                assert list(ours.__dict__) == list(theirs.__dict__)
        assert {a: getattr(model, a) for a in STATE[:3]} == before


def test_apply_sets_nested_and_top_level_fields() -> None:
    spec = load_run(SEEDS[0]).spec
    out = O.apply(spec, {"batch.micro_batch_size": 1, "gradient_checkpointing": not spec.gradient_checkpointing})
    assert out.batch.micro_batch_size == 1 and out.gradient_checkpointing != spec.gradient_checkpointing
    assert "micro_batch_size" in out.batch.model_fields_set and "gradient_checkpointing" in out.model_fields_set
    assert out.distribution is spec.distribution  # untouched sections are shared, as model_copy shares them
