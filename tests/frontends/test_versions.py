"""frontends.versions: declared versions through packaging, checked with file and line."""

from __future__ import annotations

import pytest

from oomless.errors import InputError
from oomless.frontends.versions import check_version, parse_version, read_directives


def test_versions_and_directives() -> None:
    assert parse_version("v", "4.6.0.dev0") == (4, 6, 0) and parse_version("v", "0.8.5.post1") == (0, 8, 5)
    assert check_version("x\n# verl==0.9.1\n", "verl", "0.9.0", "0.9.1", "run.sh") == (0, 9, 1)
    assert read_directives("# oomless: trl==1.16 max_prompt_tokens=512\n") == {"trl": "1.16", "max_prompt_tokens": "512"}


@pytest.mark.parametrize(("text", "message"), [
    ("a\n# verl==0.12.0\n", "run.sh:2: unknown verl version 0.12.0; allowed: 0.9.0 to 0.9.1"),
    ("# verl==0.9.x1\n", "run.sh:1: '0.9.x1' is not a version number"),
])
def test_unknown_versions_name_file_line_and_range(text: str, message: str) -> None:
    with pytest.raises(InputError) as err:
        check_version(text, "verl", "0.9.0", "0.9.1", "run.sh")
    assert str(err.value).startswith(message)
