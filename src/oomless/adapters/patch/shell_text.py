"""Set flags or Hydra overrides of a launch script in its text: only the changed words are
replaced and new ones appended to the training command; every other byte stays as it was.

Words are located with bashlex positions on the text the shell front-end parses
(`frontends.shell._mask` keeps offsets; `_parse` reads statement by statement when the whole
script does not parse). The training command is the one that already sets the most of the
framework's keys. Styles:
- ``flags``: `--key value` / `--key=value`; booleans written `true`/`false`, lists as words;
- ``switch_flags``: as ``flags``, but True is the bare `--key` and False removes it (argparse
  store_true, OpenRLHF);
- ``hydra``: `key=value` (also `+key=` / `++key=`), values in Hydra's override grammar. A key
  the command does not set yet is appended with the prefix the caller's ``added_prefix`` gives it
  (verl's Hydra adds a key its config lacks only as `+key=`; EasyR1's `OmegaConf.from_cli` knows
  no prefixes); a key it sets is edited in place, its own prefix kept.
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...errors import InputError
from ...frontends.shell import _closing, _mask, _parse
from .edits import Edit, apply_edits, line_indent


@dataclass(frozen=True)
class Word:
    start: int
    end: int
    text: str
    """The word as written (quotes kept)."""
    segment: int = 0
    """0: a word of the command itself; else one number per bash array the command expands."""
    use: tuple[int, int] | None = None
    """For an array's word: the span of the command's `${ARGS[@]}` that expands it."""
    quote: str = ""
    """For a word of a script passed as a quoted string (`bash -c "..."`): that string's quote
    character; text written there is escaped for it."""

    @property
    def in_command(self) -> tuple[int, int]:
        """Where the word stands in the command's own text."""
        return self.use if self.use is not None else (self.start, self.end)


def _commands(node: Any) -> list[list[Word]]:
    """Every simple command's words, in source order."""
    found: list[list[Word]] = []

    def walk(n: Any) -> None:
        kind = getattr(n, "kind", None)
        if kind == "command":
            words = [p for p in n.parts if getattr(p, "kind", None) == "word"]
            if words:
                found.append([Word(w.pos[0], w.pos[1], "") for w in words])
        if kind == "word":
            return
        for value in vars(n).values():
            for child in value if isinstance(value, list) else [value]:
                if hasattr(child, "kind"):
                    walk(child)

    walk(node)
    return found


def script_commands(text: str, where: str) -> list[list[Word]]:
    """Every command's words; a bash array it expands (`${ARGS[@]}`) stands for the words of
    that array's definitions before the command (`ARGS=(...)`, then any `ARGS+=(...)`)."""
    skipped: list[int] = []
    out = []
    for node in _parse(_mask(text), where, skipped):
        for words in _commands(node):
            words = _with_arrays(text, [Word(w.start, w.end, text[w.start:w.end]) for w in words])
            out.append(words)
            out.extend(_inline_commands(text, words, where))
    return out


_SHELLS = ("bash", "sh")


def _inline_commands(text: str, words: list[Word], where: str) -> list[list[Word]]:
    """The commands of a script a command passes to a shell (`srun ... bash -c "cmd --flag v"`,
    as the reader runs it: `frontends.shell._inline_script`), each word with its offsets in
    ``text`` and the quote it sits in; its text is the word as the inner shell sees it."""
    for i in range(1, len(words) - 1):
        if _unquoted(words[i].text) == "-c" and _unquoted(words[i - 1].text).rsplit("/", 1)[-1] in _SHELLS:
            inner, where_in, quotes = _unquote_with_offsets(text, words[i + 1].start, words[i + 1].end)
            if not inner:
                return []
            return [[Word(where_in[w.start], where_in[w.end - 1] + 1, w.text, w.segment, None, quotes[w.start])
                     for w in command] for command in script_commands(inner, where)]
    return []


def _unquote_with_offsets(text: str, start: int, end: int) -> tuple[str, list[int], list[str]]:
    """The shell word text[start:end] with its quotes removed (bash's rules: nothing escapes in
    '...'; in "..." a backslash escapes $ ` " \\ and a newline), the offset in ``text`` of each
    character kept, and the quote each sits in."""
    kept: list[tuple[str, int, str]] = []
    i, state = start, ""
    while i < end:
        c = text[i]
        if c == state or (not state and c in "'\""):
            state = "" if c == state else c
            i += 1
        elif c == "\\" and i + 1 < end and state != "'" and (not state or text[i + 1] in '$`"\\\n'):
            if text[i + 1] != "\n":
                kept.append((text[i + 1], i + 1, state))
            i += 2
        else:
            kept.append((c, i, state))
            i += 1
    return "".join(c for c, _, _ in kept), [at for _, at, _ in kept], [q for _, _, q in kept]


def _escaped(command: _Command, edit: Edit) -> Edit:
    """``edit`` with its text escaped for the quoted string it lands in (`Word.quote`)."""
    quote = next((w.quote for w in command.words if w.start <= edit.start <= w.end), "")
    if quote == '"':
        return Edit(edit.start, edit.end, re.sub(r'([$`"])', r"\\\1", edit.text))
    if quote == "'":
        return Edit(edit.start, edit.end, edit.text.replace("'", "'\\''"))
    return edit


_ARRAY_USE = re.compile(r'^"?\$\{([A-Za-z_]\w*)\[[@*]\]\}"?$')


def _with_arrays(text: str, words: list[Word]) -> list[Word]:
    out: list[Word] = []
    for w in words:
        used = _ARRAY_USE.match(w.text)
        items = _array_words(text, used.group(1), (w.start, w.end), len(out) + 1) if used else None
        out.extend(items if items is not None else [w])
    return out


def _array_words(text: str, name: str, use: tuple[int, int], segment: int) -> list[Word] | None:
    """The words of ``name``'s array definitions before its ``use`` (from its last plain
    assignment on), with their offsets; None when the script defines no such array there."""
    spans, before = [], use[0]
    for match in re.finditer(rf"(?m)(?:^|(?<=[\s;])){name}(\+?)=\(", text[:before]):
        end = _closing(text, match.end() - 1)
        if end < 0 or end > before:
            continue
        if not match.group(1):
            spans = []
        spans.append((match.end(), end))
    if not spans:
        return None
    return [Word(a, b, text[a:b], segment, use) for start, end in spans for a, b in _word_spans(text, start, end)]


def _word_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """(start, end) of each shell word in text[start:end]: quotes and backslash escapes kept in
    the word, `#` comments and line continuations skipped."""
    out, i = [], start
    while i < end:
        c = text[i]
        if c in " \t\n" or text.startswith("\\\n", i):
            i += 2 if c == "\\" else 1
            continue
        if c == "#":
            newline = text.find("\n", i, end)
            i = end if newline < 0 else newline
            continue
        a = i
        while i < end and text[i] not in " \t\n":
            if text[i] in "'\"":
                close = text.find(text[i], i + 1, end)
                i = end if close < 0 else close + 1
            else:
                i += 2 if text[i] == "\\" else 1
        out.append((a, min(i, end)))
    return out


@functools.lru_cache(maxsize=65_536)  # pure; every key lookup of every dialect re-reads the same words
def _unquoted(word: str) -> str:
    try:
        parts = shlex.split(word)
    except ValueError:
        return word
    return parts[0] if len(parts) == 1 else word


def flag_name(key: str) -> str:
    return key if key.startswith("-") else f"--{key}"


def hydra_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{hydra_value(v)}" for k, v in value.items()) + "}"
    text = str(value)
    return text if text and all(c.isalnum() or c in "._-/:" for c in text) else shlex.quote(f'"{text}"')


def flag_words(value: Any) -> list[str]:
    values = value if isinstance(value, (list, tuple)) else [value]
    return [shlex.quote("true" if v is True else "false" if v is False else str(v)) for v in values]


class _Command:
    def __init__(self, text: str, words: list[Word]) -> None:
        self.text, self.words = text, words

    def find_flag(self, flag: str) -> tuple[int, bool] | None:
        """(index of the flag word, whether it carries `=value`)."""
        for i, w in enumerate(self.words):
            u = _unquoted(w.text)
            if u == flag:
                return i, False
            if u.startswith(flag + "="):
                return i, True
        return None

    def find_override(self, key: str) -> int | None:
        """The override of ``key`` that takes effect (Hydra applies repeated ones in order)."""
        return (self.find_overrides(key) or [None])[-1]

    def find_overrides(self, key: str) -> list[int]:
        return [i for i, w in enumerate(self.words) if _unquoted(w.text).lstrip("+").startswith(key + "=")]

    def value_span(self, i: int) -> tuple[int, int]:
        """Indices [i+1, j) of the words after flag ``i`` that are its values."""
        j = i + 1
        while (j < len(self.words) and not _unquoted(self.words[j].text).startswith("--")
               and self.words[j].segment == self.words[i].segment):
            j += 1
        return i + 1, j

    def append_point(self) -> tuple[int, str, str]:
        """(offset, text before, text after) to add a word: after the last word, or after the
        word before a trailing `"$@"`; on a new continued line when the command is written over lines."""
        last = self.words[-1].in_command
        multiline = "\\\n" in self.text[self.words[0].in_command[0]:last[1]]
        indent = line_indent(self.text, last[0]) if multiline else ""
        sep = f" \\\n{indent}" if multiline else " "
        if _unquoted(self.words[-1].text) in ("$@", "${@}") and len(self.words) > 1:
            return self.words[-2].in_command[1], sep, ""
        return last[1], sep, ""


def pick_command(text: str, keys: list[str], style: str, where: str) -> _Command:
    commands = [_Command(text, words) for words in script_commands(text, where)]
    if not commands:
        raise InputError(where, "no command to patch in the script")

    def score(c: _Command) -> int:
        if style == "hydra":
            return sum(c.find_override(k) is not None for k in keys)
        return sum(c.find_flag(flag_name(k)) is not None for k in keys)

    return max(reversed(commands), key=score)


ENV_PREFIX = "env:"
"""A native key `env:NAME` is the environment variable NAME of the training command (ms-swift's
`NPROC_PER_NODE`): its value where the script last assigns it before the command (`NAME=v cmd`,
`export NAME=v`, `NAME=v` on a line of its own), else a `NAME=v ` prefix added to the command."""


def _env_value_span(command: _Command, name: str) -> tuple[int, int] | None:
    """The span of the value of the last assignment of ``name`` before the command's first
    word (comments skipped), or None."""
    text, first = command.text, command.words[0].in_command[0]
    found = None
    for match in re.finditer(rf"(?<![\w$]){re.escape(name)}=", text[:first]):
        line_start = text.rfind("\n", 0, match.start()) + 1
        if "#" in text[line_start:match.start()]:
            continue
        line_end = text.find("\n", match.end())
        spans = _word_spans(text, match.end(), len(text) if line_end < 0 else line_end)
        at_value = spans and spans[0][0] == match.end()
        found = (match.end(), spans[0][1]) if at_value else (match.end(), match.end())
    return found


def _env_edit(command: _Command, name: str, value: Any, edits: list[Edit]) -> None:
    if value is None:
        return  # the script's own value stands (a process count is never removed)
    word = shlex.quote(str(value))
    span = _env_value_span(command, name)
    if span is None:
        first = command.words[0].in_command[0]
        edits.append(Edit(first, first, f"{name}={word} "))
    else:
        edits.append(Edit(span[0], span[1], word))


def current_value(command: _Command, key: str, style: str) -> Any:
    """The value the script gives ``key`` (a string or list of strings), True for a bare
    switch, None when the key is not in the command."""
    if key.startswith(ENV_PREFIX):
        span = _env_value_span(command, key[len(ENV_PREFIX):])
        return None if span is None else _unquoted(command.text[span[0]:span[1]])
    if style == "hydra":
        i = command.find_override(key)
        return None if i is None else _unquoted(command.words[i].text).lstrip("+").split("=", 1)[1]
    found = command.find_flag(flag_name(key))
    if found is None:
        return None
    i, inline = found
    if inline:
        return _unquoted(command.words[i].text).split("=", 1)[1]
    a, b = command.value_span(i)
    values = [_unquoted(w.text) for w in command.words[a:b]]
    return True if not values else values[0] if len(values) == 1 else values


AddedPrefix = Callable[[str], str]
"""A Hydra-style key the command does not set → the prefix its appended override takes (`+`, or
"" for a plain `key=value`)."""


def patch_shell(text: str, values: dict[str, Any], style: str, where: str, keys: list[str],
                added_prefix: AddedPrefix | None = None) -> str:
    """``text`` with each key set (None: removed, the default applies) in the training command,
    the one setting the most of ``keys``; ``added_prefix``: see `AddedPrefix` (None: plain)."""
    command = pick_command(text, keys, style, where)
    edits: list[Edit] = []
    appended: list[str] = []
    for key, value in values.items():
        if key.startswith(ENV_PREFIX):
            _env_edit(command, key[len(ENV_PREFIX):], value, edits)
        elif style == "hydra":
            _hydra_edit(command, key, value, edits, appended, added_prefix)
        else:
            _flag_edit(command, key, value, style, edits, appended)
    if appended:
        at, before, after = command.append_point()
        edits.append(Edit(at, at, before + (before or after).join(appended) + after))
    return apply_edits(text, [_escaped(command, e) for e in edits])


def _remove(command: _Command, a: int, b: int, edits: list[Edit]) -> None:
    """Words a..b-1 removed with the space (and continuation) before them; inside an array, or
    after a comment, from the first word on (the array's and the comment's text kept)."""
    before = command.words[a - 1] if a > 0 else None
    keep = before is None or before.segment != command.words[a].segment or "#" in command.text[before.end:command.words[a].start]
    start = command.words[a].start if keep else before.end
    edits.append(Edit(start, command.words[b - 1].end, ""))


def _hydra_edit(command: _Command, key: str, value: Any, edits: list[Edit], appended: list[str],
                added_prefix: AddedPrefix | None) -> None:
    found = command.find_overrides(key)
    if not found:
        if value is not None:
            appended.append(f"{added_prefix(key) if added_prefix else ''}{key}={hydra_value(value)}")
        return
    for i in found:  # each repetition, so no later one undoes the change
        if value is None:
            _remove(command, i, i + 1, edits)
            continue
        w = command.words[i]
        prefix, old = _unquoted(w.text).split("=", 1)
        text = hydra_value(value)
        if isinstance(value, bool) and old in ("True", "False"):
            text = text.capitalize()  # the script's own spelling of booleans
        edits.append(Edit(w.start, w.end, f"{prefix}={text}"))


def _flag_edit(command: _Command, key: str, value: Any, style: str, edits: list[Edit], appended: list[str]) -> None:
    flag = flag_name(key)
    switch = style == "switch_flags" and isinstance(value, bool)
    found = command.find_flag(flag)
    remove = value is None or (switch and value is False)
    if found is None:
        if not remove:
            appended.append(flag if switch else " ".join([flag, *flag_words(value)]))
        return
    i, inline = found
    a, b = (i + 1, i + 1) if inline or (switch and style == "switch_flags") else command.value_span(i)
    if remove:
        _remove(command, i, b, edits)
    elif switch:
        return
    elif inline:
        w = command.words[i]
        edits.append(Edit(w.start, w.end, f"{flag}={' '.join(flag_words(value)) if not isinstance(value, list) else ','.join(map(str, value))}"))
    elif a == b:
        end = command.words[i].end
        edits.append(Edit(end, end, " " + " ".join(flag_words(value))))
    else:
        edits.append(Edit(command.words[a].start, command.words[b - 1].end, " ".join(flag_words(value))))
