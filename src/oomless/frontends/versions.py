"""Version numbers through `packaging`: the versions a file declares in comments, checked
against the range an adapter's defaults follow.

- `read_directives(text)`: `# oomless: trl==1.16 vllm==0.8.5 max_prompt_tokens=512` lines, for
  what a framework's own config cannot say (its version, the vLLM version);
- `declared_version(text, framework)`: a pip-style `# verl==0.4.1` comment, with its line;
- `check_version(...)`: that version inside [lowest, highest], else one `InputError` naming the
  file, the line and the range allowed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from packaging.version import InvalidVersion, Version

from ..errors import InputError

DIRECTIVE_PREFIX = "oomless:"


def version(name: str, text: str) -> Version:
    try:
        return Version(str(text).strip())
    except InvalidVersion:
        raise InputError(name, f"{text!r} is not a version number; allowed: PEP 440 versions such as 3.4.1") from None


def parse_version(name: str, text: str) -> tuple[int, ...]:
    """'3.4.1' → (3, 4, 1); pre-, post- and dev-release parts ('4.6.0.dev0', '0.8.5.post1') are dropped."""
    return version(name, text).release


def version_text(parts: Sequence[int]) -> str:
    return ".".join(str(p) for p in parts)


def read_directives(text: str, source: str = "") -> dict[str, str]:
    """Keys of `# oomless: name==version key=value ...` comment lines (later lines win)."""
    found: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        body = line.strip()
        if not body.startswith("#") or not body[1:].strip().startswith(DIRECTIVE_PREFIX):
            continue
        for item in body[1:].strip()[len(DIRECTIVE_PREFIX):].split():
            key, sep, value = item.partition("==") if "==" in item else item.partition("=")
            if not sep or not key or not value:
                where = f"{source}:{number}" if source else f"line {number}"
                raise InputError(where, f"oomless directive {item!r}: expected name==version or key=value")
            found[key] = value
    return found


def declared_version(text: str, framework: str) -> tuple[str, int] | None:
    """(version, line) of a pip-style `# framework==X` comment, or None."""
    pattern = re.compile(rf"#.*\b{re.escape(framework)}\s*==\s*([0-9][\w.+\-]*)", re.I)
    for number, line in enumerate(text.splitlines(), start=1):
        match = pattern.search(line)
        if match:
            return match.group(1), number
    return None


def check_version(text: str, framework: str, lowest: str, highest: str, source: str = "") -> tuple[int, ...] | None:
    """The declared version (major.minor.patch), or None; an InputError naming the file and line
    when it is not a version or lies outside [lowest, highest] (compared on major.minor.patch)."""
    declared = declared_version(text, framework)
    if declared is None:
        return None
    text_version, line = declared
    where = f"{source}:{line}" if source else f"{framework}=={text_version}"
    found = version(where, text_version).release[:3]
    low, high = version(where, lowest).release[:3], version(where, highest).release[:3]
    if not _pad(low) <= _pad(found) <= _pad(high):
        raise InputError(where, f"unknown {framework} version {text_version}; allowed: {lowest} to {highest}")
    return found


def _pad(parts: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(parts) + (0,) * (3 - len(parts))
