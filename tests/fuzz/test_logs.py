"""Mutated crash logs through `oomless doctor` (issue 15).

Messages are drawn in the shapes PyTorch (CUDA, HIP, CPU allocator), vLLM, Ray, the Linux OOM
killer and NCCL print (`tests/fuzz/logs.py` names each printer's source), with their numbers
drawn too, so every property has its truth:

- a message is read back: its kind, and every size it prints to within the printer's rounding
  (two decimals of the unit), every count exactly;
- what a launcher or a terminal adds (CRLF/CR, colour codes anywhere, a prefix on every line,
  a wrap every 80-200 characters) changes nothing the doctor reads;
- a damaged log (byte flips, truncation, absurd numbers, a line repeated thousands of times,
  200,000-character lines, bytes that are not UTF-8, interleaved ranks) gives a report, never an
  exception, within `TIME_BOUND_S`; every size it reports is an integer within int64; a message
  the damage left whole is still found; through the command line it exits 0 or 1 with valid
  JSON and no traceback.
"""

from __future__ import annotations

import json
import time

from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from oomless.cli.doctor_cmd import render
from oomless.cli.main import app
from oomless.doctor import Diagnosis, Finding, clean, diagnose, read_log
from oomless.doctor.report import diagnosis_to_dict
from oomless.doctor.sizes import MAX_SIZE_BYTES
from tests.fuzz.logs import TRACEBACK, Message, cosmetic, messages, mutated, wrapped
from tests.fuzz.strategies import fuzz_settings

TIME_BOUND_S = 10.0
"""The issue's bound for any input to end in a verdict or a one-line error."""


def found(diagnosis: Diagnosis, kind: str) -> list[Finding]:
    return [f for f in diagnosis.findings if f.kind.value == kind]


def reads_back(f: Finding, msg: Message) -> bool:
    sizes_ok = all(abs(f.numbers.get(k, -10**30) - true) <= error for k, (true, error) in msg.sizes.items())
    return sizes_ok and all(f.numbers.get(k) == v for k, v in msg.counts.items())


def report(diagnosis: Diagnosis) -> str:
    """Both renderings the command line prints."""
    return render(diagnosis, diagnosis.fixes, None, None) + json.dumps(diagnosis_to_dict(diagnosis))


@fuzz_settings()
@given(messages(), st.booleans())
def test_a_message_is_read_back(msg: Message, with_traceback: bool) -> None:
    text = (TRACEBACK if with_traceback else "") + msg.text + "\n"
    d = diagnose(clean(text))
    assert d.primary is not None and d.primary.kind.value == msg.kind, text[:400]
    assert any(reads_back(f, msg) for f in found(d, msg.kind)), (text[:600], [f.numbers for f in found(d, msg.kind)])
    report(d)


@fuzz_settings()
@given(messages(), st.data())
def test_what_launchers_and_terminals_add_changes_nothing(msg: Message, data: st.DataObject) -> None:
    text = TRACEBACK + msg.text + "\n"
    shown = data.draw(cosmetic(text))
    plain, dressed = diagnose(clean(text)), diagnose(clean(shown))
    assert [(f.kind, f.variant, f.numbers) for f in dressed.findings] == [(f.kind, f.variant, f.numbers) for f in plain.findings], repr(shown[:600])
    assert (dressed.phase.phase, dressed.phase.detail) == (plain.phase.phase, plain.phase.detail)


@fuzz_settings()
@given(messages(), st.sampled_from([80, 120, 200]), st.sampled_from(["", "[rank0]: ", "(WorkerDict pid=7) "]))
def test_a_terminal_wrap_changes_nothing(msg: Message, width: int, prefix: str) -> None:
    text = TRACEBACK + msg.text + "\n"
    plain, cut = diagnose(clean(text)), diagnose(clean(wrapped(text, width, prefix)))
    assert [(f.kind, f.numbers) for f in cut.findings] == [(f.kind, f.numbers) for f in plain.findings]


def check_damaged(diagnosis: Diagnosis, cleaned: str, msg: Message) -> None:
    assert diagnosis.recognised == (diagnosis.primary is not None)
    for f in diagnosis.findings:
        for key, value in f.numbers.items():
            if key.endswith("_bytes"):
                assert isinstance(value, int) and 0 <= value <= MAX_SIZE_BYTES, (key, value)
    if msg.text in cleaned:
        assert found(diagnosis, msg.kind), f"{msg.kind} left whole but not found"


@fuzz_settings()
@given(messages(), st.data())
def test_a_damaged_log_gives_a_report_in_bounded_time(tmp_path_factory, msg: Message, data: st.DataObject) -> None:
    raw = data.draw(mutated(TRACEBACK + msg.text + "\nDone.\n"))
    path = tmp_path_factory.mktemp("log") / "crash.log"
    path.write_bytes(raw)
    start = time.monotonic()
    cleaned = read_log(path)
    diagnosis = diagnose(cleaned)
    report(diagnosis)
    elapsed = time.monotonic() - start
    assert elapsed < TIME_BOUND_S, f"{elapsed:.1f} s on {len(raw)} bytes"
    check_damaged(diagnosis, cleaned, msg)


@fuzz_settings(ci_examples=10)
@given(messages(), st.data(), st.booleans())
def test_a_damaged_log_through_the_command_line(tmp_path_factory, msg: Message, data: st.DataObject, as_json: bool) -> None:
    path = tmp_path_factory.mktemp("cli") / "crash.log"
    path.write_bytes(data.draw(mutated(TRACEBACK + msg.text + "\n")))
    result = CliRunner().invoke(app, ["doctor", str(path), *(["--json"] if as_json else [])])
    assert result.exit_code in (0, 1), result.output[-800:]
    assert "Traceback" not in result.output
    if as_json:
        json.loads(result.stdout)
