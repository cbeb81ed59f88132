"""Adversarial logs (issue 15): very long lines and absurd numbers are diagnosed (or reported
as unrecognised) without raising. The patterns that open on a repeatable run (digits, a word)
carry a lookbehind so a search tries only the run's start: linear in a line's length (a
100,000-character line took 11 s before, quadratic)."""

from __future__ import annotations

import re

import pytest

from oomless.doctor import clean, diagnose
from oomless.doctor import parse_gpu, parse_host, phase
from oomless.doctor.sizes import MAX_SIZE_BYTES, to_bytes, to_int
from oomless.units import format_bytes

TORCH_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
             "capacity of 79.15 GiB of which 1.00 GiB is free.")


@pytest.mark.parametrize("filler", ["9", "x", "a.py:1 in ", "File a.py:1 in f "])
def test_a_long_line_beside_a_known_error_is_still_diagnosed(filler: str) -> None:
    run = (filler * (60_000 // len(filler)))
    d = diagnose(clean(f"{run}\n{TORCH_OOM}\n{run}"))
    assert d.primary is not None and d.primary.kind.value == "torch_gpu_oom"


def test_an_error_in_the_middle_of_a_long_line_is_found() -> None:
    d = diagnose(clean("x" * 50_000 + " " + TORCH_OOM + " " + "y" * 50_000))
    assert d.primary is not None and d.primary.kind.value == "torch_gpu_oom"


@pytest.mark.parametrize("pattern", [parse_host._RAY_SUMMARY, phase._FRAME])
def test_patterns_that_open_on_a_run_start_only_at_its_start(pattern: re.Pattern[str]) -> None:
    # A search over n repeats must not try every position of the run as a start: the pattern
    # text carries a negative lookbehind for the run's own characters.
    assert "(?<!" in pattern.pattern


def test_numbers_in_gpu_messages_start_at_the_start_of_a_digit_run() -> None:
    assert parse_gpu.NUM.startswith("(?<!")
    assert re.search(parse_gpu.SIZE, "1234.5 GiB").group(1) == "1234.5"


def test_absurd_sizes_are_unreadable_not_a_crash() -> None:
    assert to_bytes("99999999999999999999.00", "GiB") is None
    assert to_int("9" * 400) is None
    assert to_int(str(MAX_SIZE_BYTES)) == MAX_SIZE_BYTES
    assert to_bytes("7.75", "GiB") == 8_321_499_136


def test_absurd_sizes_in_logs_are_diagnosed() -> None:
    big = "99999999999999999999.00"
    d = diagnose(clean(TORCH_OOM.replace("2.00", big)))
    assert d.primary is not None
    d = diagnose(clean("DefaultCPUAllocator: not enough memory: you tried to allocate " + "9" * 400 + " bytes."))
    assert d.primary is not None and d.primary.kind.value == "host_alloc_oom"


def test_format_bytes_takes_any_integer() -> None:
    assert format_bytes(10**400).endswith(" GiB")
    assert format_bytes(-(10**400)).startswith("-")
    assert format_bytes(5 * 2**30) == "5.00 GiB"
