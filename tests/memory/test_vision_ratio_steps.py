"""The worst-case image search's aspect-ratio steps (`vision_tokens._ratio_steps`, exact integer
pairs) against the definition written with `Fraction`s: every ratio in [1/200, 200] where
√(pixels·r)/f or √(pixels/r)/f is an integer, plus both ends, each once, in order."""

from __future__ import annotations

import math
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from oomless.memory import constants as C
from oomless.memory import vision_tokens as VT


def _steps_by_definition(pixels: int, f: int) -> list[Fraction]:
    most = C.QWEN_VL_MAX_ASPECT_RATIO
    lo, hi = Fraction(1, most), Fraction(most)
    points = {lo, hi}
    for k in range(1, math.isqrt(pixels * most) // f + 2):
        square = (f * k) ** 2
        points.update(r for r in (Fraction(square, pixels), Fraction(pixels, square)) if lo <= r <= hi)
    return sorted(points)


@settings(max_examples=60, deadline=None)
@given(f=st.sampled_from([14, 16, 28, 32]), pixels=st.integers(1, 3_000_000))
def test_ratio_steps_are_the_definitions_in_order(f: int, pixels: int) -> None:
    steps = VT._ratio_steps(pixels, f)
    assert [Fraction(n, d) for n, d in steps] == _steps_by_definition(pixels, f)


def test_ratio_steps_keep_a_ratio_reached_twice_once() -> None:
    # pixels = (28·28)²: s/pixels = pixels/s' for squares s = (28k)², s' = (28j)² whenever
    # k·j = 28 (k = j = √28 aside: 1·28, 2·14, 4·7), and r = 1 for s = s' = pixels.
    pixels = (28 * 28) ** 2
    steps = [Fraction(n, d) for n, d in VT._ratio_steps(pixels, 28)]
    assert len(steps) == len(set(steps))
    assert Fraction(1) in steps
