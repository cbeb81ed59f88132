"""Bash word expansion over the source text of one word: quotes, parameters, arithmetic and
the two command substitutions whose output is known without running anything.

bashlex finds the words (`frontends.shell`); this module turns one word's source text into the
strings bash would pass, with a deliberately small subset of bash:

- quotes: `'...'` literal, `"..."` with `$` expansion, `\\` escapes;
- parameters: `$NAME`, `${NAME}`, `${NAME:-default}` / `-`, `${NAME:=default}` / `=`,
  `${NAME:+alt}` / `+`, `${#NAME}`; unquoted results are split on whitespace, as bash does;
- `$((arithmetic))`: integers and `+ - * / %`, names read as variables;
- `$(expr a op b)`, `$(echo words)`; any other command substitution stays as literal text.

A variable the script never sets is not guessed: its reference stays as written (`${MODEL_PATH}`)
and its name is reported, so an adapter can say which variable to set. Nothing is executed.
"""

from __future__ import annotations

import ast
import operator
import re
import posixpath
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field

from ..errors import InputError

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPECIAL = "@*#?$!-0123456789"
_MAX_ARITHMETIC_CHARS = 2000
"""Longer `$((...))` expressions are refused (no launch script needs one; the evaluation recurses)."""
_ARITH_OPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Div: operator.floordiv, ast.Mod: operator.mod,
}


@dataclass
class Expansion:
    """The variables an expansion reads and may assign (`${X:=v}`), and what it could not resolve."""

    variables: MutableMapping[str, str]
    where: str
    unresolved: set[str] = field(default_factory=set)
    arrays: Mapping[str, list[str]] = field(default_factory=dict)
    """Indexed arrays `A=(x y)`: `${A[@]}` is every item, `${A[1]}` one, `${#A[@]}` the count."""
    script: str = ""
    """The script's own path: `$0` and `${BASH_SOURCE[0]}`."""


WORD_BREAK = "\x1f"
"""Separates the items of `"${A[@]}"`: each is a word of its own even inside quotes."""


def expand_words(text: str, ex: Expansion) -> list[str]:
    """The words one shell word expands to (unquoted expansions split on whitespace)."""
    pieces = _pieces(text, ex)
    words: list[str] = []
    current, started = "", False
    for piece, splittable in pieces:
        if WORD_BREAK in piece:
            first, *rest = piece.split(WORD_BREAK)
            parts = [first, *rest]
            for k, part in enumerate(parts):
                if k:
                    words.append(current)
                    current = ""
                current, started = current + part, True
            continue
        if not splittable:
            current, started = current + piece, True
            continue
        parts = piece.split()
        if not parts:
            if piece and started:
                words.append(current)
                current, started = "", False
            continue
        if piece[0].isspace() and started:
            words.append(current)
            current, started = "", False
        for part in parts[:-1]:
            words.append(current + part)
            current = ""
        current, started = current + parts[-1], True
        if piece[-1].isspace():
            words.append(current)
            current, started = "", False
    if started:
        words.append(current)
    return words


def expand_string(text: str, ex: Expansion) -> str:
    """One string with no word splitting (assignment values, `${X:-default}` defaults)."""
    return "".join(piece for piece, _ in _pieces(text, ex)).replace(WORD_BREAK, " ")


def _pieces(text: str, ex: Expansion) -> list[tuple[str, bool]]:
    """(text, splittable) runs: literal and quoted text is never split, unquoted expansions are."""
    out: list[tuple[str, bool]] = []
    i, quoted = 0, False
    while i < len(text):
        char = text[i]
        if char == "\\":
            nxt = text[i + 1:i + 2]
            if nxt == "\n":
                i += 2
                continue
            if quoted and nxt not in ('$', '`', '"', '\\'):
                out.append((char, False))
                i += 1
                continue
            out.append((nxt, False))
            i += 2
        elif char == "'" and not quoted:
            end = text.find("'", i + 1)
            if end < 0:
                raise InputError(ex.where, "malformed shell: no closing quotation")
            out.append((text[i + 1:end], False))
            i = end + 1
        elif char == '"':
            quoted = not quoted
            if quoted:
                out.append(("", False))  # `""` is an empty word, not nothing
            i += 1
        elif char == "$" or char == "`":
            value, i = _dollar(text, i, ex)
            out.append((value, not quoted))
        else:
            out.append((char, False))
            i += 1
    if quoted:
        raise InputError(ex.where, "malformed shell: no closing quotation")
    return out


def _dollar(text: str, i: int, ex: Expansion) -> tuple[str, int]:
    """The value of the expansion starting at ``text[i]`` and the index after it."""
    if text[i] == "`":
        end = text.find("`", i + 1)
        end = len(text) - 1 if end < 0 else end
        return _substitute(text[i:end + 1], text[i + 1:end], ex), end + 1
    if text.startswith("$((", i):
        end = _matching(text, i + 1, "(", ")")
        if end > 0 and text[end - 1] == ")":
            inner = text[i + 3:end - 1]
            return str(arithmetic(expand_string(inner, ex), ex)), end + 1
    if text.startswith("$(", i):
        end = _matching(text, i + 1, "(", ")")
        end = len(text) - 1 if end < 0 else end
        return _substitute(text[i:end + 1], text[i + 2:end], ex), end + 1
    if text.startswith("${", i):
        end = _matching(text, i + 1, "{", "}")
        end = len(text) - 1 if end < 0 else end
        return _parameter(text[i:end + 1], text[i + 2:end], ex), end + 1
    match = _NAME.match(text, i + 1)
    if match:
        return _lookup(match.group(0), text[i:match.end()], ex), match.end()
    if text[i + 1:i + 2] == "0" and ex.script:
        return ex.script, i + 2
    if text[i + 1:i + 2] and text[i + 1] in _SPECIAL:
        return text[i:i + 2], i + 2  # positional and special parameters stay literal
    return "$", i + 1


def _matching(text: str, start: int, open_: str, close: str) -> int:
    """Index of the bracket closing the one at ``start``, or -1. Quotes are respected, and a
    `$(`/`${` inside double quotes opens a nested level with quotes of its own (bash)."""
    depth, i = 0, start
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if char == "'":
            end = text.find("'", i + 1)
            i = len(text) if end < 0 else end + 1
            continue
        if char == '"':
            i = _end_of_double_quote(text, i + 1)
            continue
        if char == open_:
            depth += 1
        elif char == close:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def _end_of_double_quote(text: str, i: int) -> int:
    """Index after the `"` that closes a double quote whose text starts at ``i``."""
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2
        elif char == '"':
            return i + 1
        elif text.startswith("$(", i) or text.startswith("${", i):
            end = _matching(text, i + 1, text[i + 1], ")" if text[i + 1] == "(" else "}")
            i = len(text) if end < 0 else end + 1
        else:
            i += 1
    return i


def substitution_end(text: str, start: int) -> int:
    """Index of the `)` closing the `$(` at ``start`` (``text[start] == "$"``), or -1."""
    return _matching(text, start + 1, "(", ")")


def _lookup(name: str, original: str, ex: Expansion) -> str:
    if name in ex.variables:
        return ex.variables[name]
    ex.unresolved.add(name)
    return original


_INDEXED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\[([^\]]*)\]")


def _parameter(original: str, body: str, ex: Expansion) -> str:
    if body.startswith("#") and _NAME.fullmatch(body[1:]):
        return str(len(ex.variables.get(body[1:], ""))) if body[1:] in ex.variables else original
    count = _INDEXED.fullmatch(body[1:]) if body.startswith("#") else None
    if count and count.group(2) in ("@", "*") and count.group(1) in ex.arrays:
        return str(len(ex.arrays[count.group(1)]))
    indexed = _INDEXED.fullmatch(body)
    if indexed:
        return _item(original, indexed.group(1), indexed.group(2), ex)
    match = _NAME.match(body) or re.match(r"[0-9]+|[@*]", body)
    if not match:
        return original
    name, rest = match.group(0), body[match.end():]
    if not _NAME.fullmatch(name):  # positional parameters: never set when a script is read
        op = re.match(r":?[-=+?]", rest)
        if op and op.group(0)[-1] in "-=":
            return expand_string(rest[op.end():], ex)
        if op and op.group(0)[-1] == "+":
            return ""
        return ex.script if name == "0" and ex.script else original
    if not rest:
        return _lookup(name, original, ex)
    op = re.match(r":?[-=+?]", rest)
    if not op:  # substrings, pattern removal, case changes: not evaluated
        return original if name in ex.variables else _unresolved(name, original, ex)
    word, value = rest[op.end():], ex.variables.get(name)
    empty = value is None or (op.group(0).startswith(":") and value == "")
    kind = op.group(0)[-1]
    if kind == "+":
        return "" if empty else expand_string(word, ex)
    if not empty:
        return value or ""
    if kind == "?":
        return _unresolved(name, original, ex)
    default = expand_string(word, ex)
    if kind == "=":
        ex.variables[name] = default
    return default


def _item(original: str, name: str, index: str, ex: Expansion) -> str:
    if name == "BASH_SOURCE" and index in ("0", "@", "*") and ex.script:
        return ex.script
    if name not in ex.arrays:
        return original if name in ex.variables else _unresolved(name, original, ex)
    items = ex.arrays[name]
    if index in ("@", "*"):
        return WORD_BREAK.join(items) if index == "@" else " ".join(items)
    try:
        return items[arithmetic(expand_string(index, ex), ex)]
    except (IndexError, InputError):
        return ""


def _unresolved(name: str, original: str, ex: Expansion) -> str:
    ex.unresolved.add(name)
    return original


def _substitute(original: str, command: str, ex: Expansion) -> str:
    """What a command substitution prints, for the few commands whose output is known without
    running them: `expr`, `echo`, and the paths of `dirname`, `basename`, `realpath`,
    `readlink -f` and `cd DIR && pwd`. Any other stays as one word naming the command."""
    words = [w for raw in raw_words(command) for w in expand_words(raw, ex)]
    if words[:1] == ["expr"]:
        return str(arithmetic(" ".join(w.replace("\\*", "*") for w in words[1:]), ex))
    if words[:1] == ["echo"]:
        return " ".join(w for w in words[1:] if w not in ("-n", "-e"))
    args = [w for w in words[1:] if not w.startswith("-")]
    if words[:1] == ["dirname"] and len(args) == 1:
        return posixpath.dirname(args[0]) or "."
    if words[:1] == ["basename"] and args:
        return posixpath.basename(args[0].rstrip("/"))
    if words[:1] in (["realpath"], ["readlink"]) and len(args) == 1:
        return posixpath.normpath(args[0])
    if len(words) == 4 and words[0] == "cd" and words[2:] == ["&&", "pwd"]:
        return posixpath.normpath(words[1])
    return "$(" + "_".join(command.split()) + ")"


def arithmetic(expression: str, ex: Expansion) -> int:
    """Integer `+ - * / %` and parentheses, as shell arithmetic (`/` truncates); a bare name
    is the variable's value, 0 when unset (bash)."""
    text = _NAME.sub(lambda m: ex.variables.get(m.group(0), "") or "0", expression)
    if len(text) > _MAX_ARITHMETIC_CHARS:
        raise InputError(ex.where, f"arithmetic of {len(text)} characters is too long to read "
                                   f"(allowed: up to {_MAX_ARITHMETIC_CHARS})")
    try:
        tree = ast.parse(text.strip() or "0", mode="eval")
    except (SyntaxError, RecursionError, MemoryError):
        raise InputError(ex.where, f"cannot evaluate arithmetic {expression!r}") from None

    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Expression):
            return value(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            return -value(node.operand) if isinstance(node.op, ast.USub) else value(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITH_OPS:
            right = value(node.right)
            if right == 0 and isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)):
                raise InputError(ex.where, f"division by zero in {expression!r}")
            return _ARITH_OPS[type(node.op)](value(node.left), right)
        raise InputError(ex.where, f"cannot evaluate arithmetic {expression!r} (integers and + - * / % only)")

    try:
        return value(tree)
    except RecursionError:
        raise InputError(ex.where, "arithmetic nested too deeply to read") from None


def raw_words(line: str) -> list[str]:
    """The words of one line as written (quotes kept), split at unquoted blanks."""
    words, current, quote = [], "", None
    i = 0
    while i < len(line):
        char = line[i]
        if char == "\\" and quote != "'":
            current += line[i:i + 2]
            i += 2
            continue
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char.isspace():
            if current:
                words.append(current)
            current = ""
            i += 1
            continue
        current += char
        i += 1
    if current:
        words.append(current)
    return words
