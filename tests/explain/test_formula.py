"""The formula machinery: the text shown is the text evaluated, filled in with the inputs'
values; sources come from the memory model's own docstrings."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from oomless.explain.formula import Formula, Input, code_ref, constant, doc_source
from oomless.memory import constants as C
from oomless.memory import states as S
from oomless.memory import vllm as V


def formula(expression: str, **values: float) -> Formula:
    return Formula(expression, tuple(Input(k, v, k) for k, v in values.items()), source="hand")


def test_the_value_is_the_expression_evaluated() -> None:
    f = formula("ceil(W / N) + max(a, b) - floor(x * y) // 2", W=10, N=4, a=3, b=7, x=0.5, y=9)
    assert f.value == math.ceil(10 / 4) + 7 - math.floor(4.5) // 2
    assert f.filled() == "ceil(10 / 4) + max(3, 7) - floor(0.5 * 9) // 2"


def test_filled_values_are_thousands_separated() -> None:
    assert formula("W * 2", W=15_231_233_024).filled() == "15,231,233,024 * 2"


def test_a_symbol_without_an_input_is_refused() -> None:
    with pytest.raises(AssertionError, match="lacks inputs"):
        formula("W / N", W=1)


def test_inputs_the_expression_does_not_use_are_dropped() -> None:
    assert [i.symbol for i in formula("W", W=1, N=4).inputs] == ["W"]


@pytest.mark.parametrize("expression", ["__import__('os').system('true')", "W.bit_length()", "[W][0]", "W if W else 1", "W ** 2"])
def test_anything_but_arithmetic_is_refused(expression: str) -> None:
    with pytest.raises((ValueError, AssertionError)):
        _ = formula(expression, W=3).value


def test_sources_come_from_the_docstrings() -> None:
    assert doc_source(V.kv_bytes_per_token).startswith("vllm/v1/kv_cache_interface.py")
    assert doc_source(S.sharded_bytes) == ""  # no Source: in it
    c = constant(C, "VLLM_BLOCK_SIZE")
    assert c.value == 16 and c.source == "vllm/config/cache.py" and c.code.startswith("oomless/memory/constants.py:")


def test_code_points_at_the_def_line() -> None:
    path, line_name = code_ref(V.kv_bytes_per_token).split(":")
    line, name = line_name.split(" ")
    source = Path(V.__file__).read_text(encoding="utf-8").splitlines()
    assert path == "oomless/memory/vllm.py" and name == "kv_bytes_per_token"
    assert source[int(line) - 1].startswith("def kv_bytes_per_token(")
