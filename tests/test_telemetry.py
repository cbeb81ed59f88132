"""The one telemetry schema (oomless.telemetry): versioned records, strict reading."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oomless.errors import InputError
from oomless.telemetry import SCHEMA_VERSION, append_records, read_records


def test_records_round_trip_with_the_version_first(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    append_records(path, [{"step": 1, "phase": "train", "peak_bytes": 5}])
    assert next(iter(json.loads(path.read_text()))) == "schema"
    assert read_records(path) == [{"schema": SCHEMA_VERSION, "step": 1, "phase": "train", "peak_bytes": 5}]


def test_unversioned_records_read_as_version_1(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"step": 0, "phase": "load", "peak_bytes": 1}\n')
    assert read_records(path)[0]["phase"] == "load"


@pytest.mark.parametrize("line, message", [
    ("{not json", "not a JSON record"), ('{"step": 1}', "needs step, phase, peak_bytes"),
    ('{"schema": 99, "step": 1, "phase": "x", "peak_bytes": 1}', "telemetry schema 99"),
])
def test_bad_lines_name_the_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"step": 0, "phase": "load", "peak_bytes": 1}\n' + line + "\n")
    with pytest.raises(InputError, match=message) as err:
        read_records(path)
    assert err.value.field == f"{path}:2"
