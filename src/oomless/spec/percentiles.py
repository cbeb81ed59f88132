"""Length and image-size distributions given as percentiles (percentile in (0, 100) → value)."""

from typing import Annotated

from pydantic import Field

Percentiles = dict[Annotated[float, Field(gt=0, lt=100)], Annotated[int, Field(ge=1, le=2**40)]]
"""Percentile (strictly between 0 and 100) → value, e.g. {50: 300, 90: 800, 99: 1500, 99.9: 4000}."""


def check_percentiles(name: str, percentiles: dict[float, int] | None, median: int | None, limit: int | None) -> "None":
    """Values rise with the percentile, stay within the limit and agree with the median given."""
    if not percentiles:
        return
    ordered = sorted(percentiles.items())
    for (k0, v0), (k1, v1) in zip(ordered, ordered[1:]):
        if v1 < v0:
            raise ValueError(f"{name}: p{k1:g}={v1} is below p{k0:g}={v0}")
    if limit is not None and ordered[-1][1] > limit:
        raise ValueError(f"{name}: p{ordered[-1][0]:g}={ordered[-1][1]} exceeds the limit {limit}")
    if median is not None and 50 in percentiles and percentiles[50] != median:
        raise ValueError(f"{name}: p50={percentiles[50]} differs from the typical value {median}")
