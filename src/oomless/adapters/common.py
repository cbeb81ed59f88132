"""Helpers every framework adapter uses: shell scripts, command-line flags, versions, YAML,
value checks, files. The one place for them; `_native` keeps only what the Ray-based adapters
(verl, EasyR1, OpenRLHF, ORZ, VLM-R1) share beyond this.

Pure functions over text (no I/O except `read_text` and `write_new_files`). Errors are
`InputError`s naming the file, line, key or flag, so the CLI prints one line.

- `parse_shell(text, source)`: the simple commands of a launch script, with the environment
  each one sees. Bash subset: line continuations, comments, `VAR=value` (script variables),
  `export VAR=value`, inline `VAR=value cmd`, `$VAR`/`${VAR}`/`${VAR:-default}`,
  `$((arithmetic))` and `$(expr a op b)`, `;`/`&&`/`||`/`|`/`&` separators, redirections, and
  the prefixes `env`, `nohup`, `exec`, `time`. Other command substitutions stay literal text.
  Tokens come from `shlex` (POSIX mode).
- `parse_flags(args, source)`: `--name value [value ...]`, `--name=value` and bare `--name`
  (HfArgumentParser style, as ms-swift, TRL and transformers parse them).
- `shell_words(text, where)` / `command_after(words, markers)`: a lighter word split without
  expansion, for launch lines whose `$VAR`s stay literal (the Ray-based adapters).
- `read_directives(text)`: `# oomless: trl==1.16 vllm==0.8.5 max_prompt_tokens=512` lines,
  for what a framework's own config cannot say (its version, the vLLM version);
  `check_version(text, framework, ...)`: a pip-style `# verl==0.4.1` comment.
- `to_*` (HfArgumentParser-style: `1e3` is an int) and `as_*` (YAML-style: strict types)
  value checks; `require(spec, dotted, allowed, framework)` for exporters.
"""

from __future__ import annotations

import ast
import json
import operator
import re
import shlex
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import yaml

from ..errors import InputError

DIRECTIVE_PREFIX = "oomless:"
_PREFIX_COMMANDS = ("env", "nohup", "exec", "time")
_SEPARATORS = (";", "&&", "||", "|", "&")
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
_TRUE = ("true", "t", "yes", "y", "1")
_FALSE = ("false", "f", "no", "n", "0")


@dataclass(frozen=True)
class ShellCommand:
    """One simple command of a script: its words after expansion and assignments."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    """Exported variables plus the command's inline `VAR=value` prefixes."""
    background: bool = False
    line: int = 1
    """1-based line where the command starts."""


# --- files -------------------------------------------------------------------------------

def write_new_files(files: Mapping[Path, str], force: bool) -> list[Path]:
    """Write every file, or none: an existing file without ``force`` is an InputError naming it."""
    if not force:
        for path in files:
            if path.exists():
                raise InputError(str(path), "file exists; pass --force to overwrite it")
    written = []
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def write_new_file(path: Path, text: str, force: bool) -> Path:
    return write_new_files({path: text}, force)[0]


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(str(path), f"cannot read: {err}") from None


def load_yaml_mapping(text: str, where: str, allow_empty: bool = True) -> dict[str, Any]:
    """A YAML document that must be a mapping; an empty one is ``{}`` when ``allow_empty``."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise InputError(where, f"malformed YAML{at}: {getattr(err, 'problem', None) or 'invalid YAML'}") from None
    if data is None and allow_empty:
        return {}
    if not isinstance(data, dict):
        raise InputError(where, f"expected a mapping of keys at the top level, got {type(data).__name__}")
    return data


# --- values ------------------------------------------------------------------------------

def to_bool(name: str, value: str | bool) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise InputError(name, f"{value!r} is not a boolean; allowed: true, false")


def to_int(name: str, value: Any, minimum: int | None = None) -> int:
    try:
        number = float(value) if isinstance(value, str) and re.search(r"[eE.]", value) else value
        result = int(number)
        if result != float(number):
            raise ValueError
    except (TypeError, ValueError):
        raise InputError(name, f"{value!r} is not an integer") from None
    if minimum is not None and result < minimum:
        raise InputError(name, f"{result} is below the minimum {minimum}")
    return result


def to_float(name: str, value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise InputError(name, f"{value!r} is not a number") from None


def to_json(name: str, value: str | Mapping[str, Any]) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as err:
        raise InputError(name, f"{value!r} is not valid JSON: {err.msg}") from None


def as_int(key: str, value: Any, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InputError(key, f"{value!r} is not an integer")
    try:
        number = int(value)
    except ValueError:
        raise InputError(key, f"{value!r} is not an integer") from None
    if minimum is not None and number < minimum:
        raise InputError(key, f"{number} is too small; allowed: >= {minimum}")
    return number


def as_float(key: str, value: Any, low: float | None = None, high: float | None = None) -> float:
    if isinstance(value, bool):
        raise InputError(key, f"{value!r} is not a number")
    number = to_float(key, value)
    if (low is not None and number < low) or (high is not None and number > high):
        raise InputError(key, f"{number} is out of range; allowed: {low} to {high}")
    return number


def as_bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise InputError(key, f"{value!r} is not true or false")


def spec_get(spec: Any, dotted: str) -> Any:
    node = spec
    for part in dotted.split("."):
        node = getattr(node, part)
    return node.value if isinstance(node, Enum) else node


def require(spec: Any, dotted: str, allowed: tuple[Any, ...], framework: str) -> Any:
    """The spec's value at ``dotted``; InputError when ``framework`` cannot express it."""
    value = spec_get(spec, dotted)
    if value not in allowed:
        shown = ", ".join(str(a) for a in allowed)
        raise InputError(dotted, f"{value!r} cannot be written for {framework}; allowed: {shown}")
    return value


# --- versions ----------------------------------------------------------------------------

def parse_version(name: str, text: str) -> tuple[int, ...]:
    """'3.4.1' → (3, 4, 1); pre-release suffixes ('4.6.0.dev0', '0.8.5.post1') are dropped."""
    match = re.match(r"^v?(\d+(?:\.\d+)*)", text.strip())
    if not match:
        raise InputError(name, f"{text!r} is not a version number (expected e.g. 3.4.1)")
    return tuple(int(p) for p in match.group(1).split("."))


def version_text(version: Sequence[int]) -> str:
    return ".".join(str(p) for p in version)


def read_directives(text: str) -> dict[str, str]:
    """Keys of `# oomless: name==version key=value ...` comment lines (later lines win)."""
    found: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        body = line.strip()
        if not body.startswith("#") or not body[1:].strip().startswith(DIRECTIVE_PREFIX):
            continue
        for item in body[1:].strip()[len(DIRECTIVE_PREFIX):].split():
            key, sep, value = item.partition("==") if "==" in item else item.partition("=")
            if not sep or not key or not value:
                raise InputError(f"line {number}", f"oomless directive {item!r}: expected name==version or key=value")
            found[key] = value
    return found


def declared_version(text: str, framework: str) -> str | None:
    """A version the file declares in a comment, pip style: `# openrlhf==0.10.1`."""
    match = re.search(rf"#.*\b{re.escape(framework)}\s*==\s*([0-9][\w.+\-]*)", text, re.I)
    return match.group(1) if match else None


def check_version(text: str, framework: str, lowest: str, highest: str) -> tuple[int, ...] | None:
    """The declared version (major.minor.patch), or None; InputError when outside [lowest, highest]."""
    version = declared_version(text, framework)
    if version is None:
        return None
    where = f"{framework}=={version}"
    v = parse_version(where, version)[:3]
    if not parse_version(where, lowest)[:3] <= v <= parse_version(where, highest)[:3]:
        raise InputError(where, f"unknown {framework} version; supported: {lowest} to {highest}")
    return v


# --- flags -------------------------------------------------------------------------------

def parse_flags(args: Sequence[str], source: str) -> dict[str, list[str]]:
    """`--name v1 v2 --other=x --switch` → {name: [v1, v2], other: [x], switch: []}.
    A repeated flag keeps its last values (argparse). A word before any flag is an error."""
    flags: dict[str, list[str]] = {}
    current: str | None = None
    for word in args:
        if word.startswith("--") and len(word) > 2:
            name, sep, value = word[2:].partition("=")
            current = name.replace("-", "_")
            flags[current] = [value] if sep else []
            if sep:
                current = None
        elif current is None:
            raise InputError(source, f"unexpected argument {word!r} (expected --flag value)")
        else:
            flags[current].append(word)
    return flags


def single(name: str, values: Sequence[str]) -> str:
    if len(values) != 1:
        raise InputError(f"--{name}", f"expected one value, got {len(values)}: {' '.join(values) or '(none)'}")
    return values[0]


# --- shell -------------------------------------------------------------------------------

def parse_shell(text: str, source: str) -> list[ShellCommand]:
    """The simple commands of a POSIX shell script (see the module docstring for the subset)."""
    variables: dict[str, str] = {}
    exported: set[str] = set()
    commands: list[ShellCommand] = []
    for line_no, logical in _logical_lines(text, source):
        body = _strip_comment(logical)
        if not body.strip():
            continue
        words = _tokens(_expand(body, variables, f"{source}:{line_no}"), f"{source}:{line_no}")
        for simple, background in _split_commands(words):
            command = _simple_command(simple, variables, exported, background, line_no)
            if command is not None:
                commands.append(command)
    return commands


def _logical_lines(text: str, source: str) -> list[tuple[int, str]]:
    """Join backslash continuations and lines inside open quotes; keep the start line."""
    out: list[tuple[int, str]] = []
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        if not pending:
            start = number
        if raw.rstrip().endswith("\\") and not raw.rstrip().endswith("\\\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        pending += raw
        if _open_quote(_strip_comment(pending)):
            pending += "\n"
            continue
        out.append((start, pending))
        pending = ""
    if pending.strip():
        if _open_quote(_strip_comment(pending)):
            raise InputError(source, f"malformed shell at line {start}: no closing quotation")
        out.append((start, pending))
    return out


def _scan_quotes(text: str) -> Iterator[tuple[int, str, str | None]]:
    """Each character with the quote it stands in (after it is read), bash-style: a backslash
    escapes outside single quotes."""
    quote, escaped = None, False
    for i, char in enumerate(text):
        if escaped:
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote is None and char in "'\"":
            quote = char
        elif char == quote:
            quote = None
        yield i, char, quote


def _open_quote(text: str) -> bool:
    quote = None
    for _, _, quote in _scan_quotes(text):
        pass
    return quote is not None


def _strip_comment(line: str) -> str:
    """Cut at a `#` that starts a word outside quotes (bash: `a#b` is a word, `a #b` a comment)."""
    for i, char, quote in _scan_quotes(line):
        if char == "#" and quote is None and (i == 0 or line[i - 1] in " \t;&|"):
            return line[:i]
    return line


_EXPANSION = re.compile(
    r"\$\(\((?P<arith>.*?)\)\)|\$\((?P<cmd>[^()]*)\)|\$\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}"
    r"|\$(?P<plain>[A-Za-z_][A-Za-z0-9_]*)"
)


def _expand(line: str, variables: Mapping[str, str], where: str) -> str:
    """Expand variables and simple arithmetic outside single quotes."""
    parts = re.split(r"('[^']*')", line)
    return "".join(p if p.startswith("'") and p.endswith("'") and len(p) > 1 else _expand_part(p, variables, where)
                   for p in parts)


def _expand_part(text: str, variables: Mapping[str, str], where: str) -> str:
    def one(match: re.Match[str]) -> str:
        if match.group("arith") is not None:
            arith = _expand_part(match.group("arith"), variables, where)
            arith = re.sub(r"[A-Za-z_][A-Za-z0-9_]*", lambda m: variables.get(m.group(0), "0") or "0", arith)
            return str(_arithmetic(arith, where))
        if match.group("cmd") is not None:
            return _command_substitution(match.group(0), _expand_part(match.group("cmd"), variables, where), where)
        name = match.group("braced") or match.group("plain")
        value = variables.get(name, "")
        if match.group("default") is not None and not value:
            return match.group("default")
        return value

    return _EXPANSION.sub(one, text)


def _command_substitution(original: str, command: str, where: str) -> str:
    words = command.split()
    if words[:1] == ["expr"]:
        expression = " ".join(w.replace("\\*", "*") for w in words[1:])
        return str(_arithmetic(expression, where))
    if words[:1] == ["echo"]:
        return " ".join(words[1:])
    return shlex.quote(original)


_ARITH_OPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Div: operator.floordiv, ast.Mod: operator.mod,
}


def _arithmetic(expression: str, where: str) -> int:
    """Integer `+ - * / %` and parentheses, as shell arithmetic (`/` truncates)."""
    try:
        tree = ast.parse(expression.strip() or "0", mode="eval")
    except SyntaxError:
        raise InputError(where, f"cannot evaluate arithmetic {expression!r}") from None

    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Expression):
            return value(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITH_OPS:
            right = value(node.right)
            if right == 0 and isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)):
                raise InputError(where, f"division by zero in {expression!r}")
            return _ARITH_OPS[type(node.op)](value(node.left), right)
        raise InputError(where, f"cannot evaluate arithmetic {expression!r} (integers and + - * / % only)")

    return value(tree)


def _tokens(text: str, where: str) -> list[str]:
    text = re.sub(r"(^|\s)\d+(?=[<>])", r"\1", text)  # `2>&1`: drop the file-descriptor number
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|<>")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError as err:
        raise InputError(where, f"malformed shell: {err}") from None


def _is_redirection(word: str) -> bool:
    return bool(word) and set(word) <= set("<>&") and ("<" in word or ">" in word)


def _split_commands(words: list[str]) -> list[tuple[list[str], bool]]:
    """Split at separators and drop redirections; `&` marks the command before it as background."""
    out: list[tuple[list[str], bool]] = []
    current: list[str] = []
    skip_next = False
    for word in words:
        if skip_next:
            skip_next = False
        elif word in _SEPARATORS:
            if current:
                out.append((current, word == "&"))
            current = []
        elif _is_redirection(word):
            skip_next = True
        else:
            current.append(word)
    if current:
        out.append((current, False))
    return out


def _simple_command(words: list[str], variables: dict[str, str], exported: set[str], background: bool,
                    line: int) -> ShellCommand | None:
    if words[0] == "export":
        for word in words[1:]:
            match = _ASSIGNMENT.match(word)
            name = match.group(1) if match else word
            if match:
                variables[name] = match.group(2)
            exported.add(name)
        return None
    inline: dict[str, str] = {}
    rest = list(words)
    while rest and (_ASSIGNMENT.match(rest[0]) or rest[0] in _PREFIX_COMMANDS):
        match = _ASSIGNMENT.match(rest.pop(0))
        if match:
            inline[match.group(1)] = match.group(2)
    if not rest:
        variables.update(inline)
        return None
    env = {name: variables[name] for name in exported if name in variables}
    env.update(inline)
    return ShellCommand(tuple(rest), env, background, line)


def shell_words(text: str, where: str) -> list[str]:
    """The words of a launch script without expansion: comments dropped, `\\` continuations
    joined, each line ended by a `;` word."""
    joined = re.sub(r"\\\r?\n", " ", text)
    lines = [ln for ln in joined.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    try:
        return shlex.split("\n".join(lines).replace("\n", " ; "), comments=True)
    except ValueError as err:
        raise InputError(where, f"malformed command line: {err}") from None


def command_after(words: list[str], markers: tuple[str, ...]) -> list[str] | None:
    """The arguments of the first command whose word ends with one of ``markers`` (a module
    after `-m` or a script path), up to the next separator."""
    for i, word in enumerate(words):
        if any(word == m or word.endswith(m) for m in markers):
            args = []
            for w in words[i + 1:]:
                if w in _SEPARATORS:
                    break
                args.append(w)
            return args
    return None


def env_assignments(words: list[str]) -> dict[str, str]:
    """`NAME=value` words (exported or prefixed to a command) anywhere in the script."""
    out: dict[str, str] = {}
    for w in words:
        m = re.match(r"^([A-Z_][A-Z0-9_]*)=(.*)$", w)
        if m:
            out[m.group(1)] = m.group(2)
    return out
