"""Launch scripts read with a real bash parser (bashlex), never run.

`parse_shell(text, source)` gives the simple commands of a script in the order bash would reach
them, each with its words after expansion (`frontends.words`) and the environment it sees:

- `VAR=value`, `export VAR=value`, `declare`/`local`/`readonly`, `unset`, inline `VAR=value cmd`;
- `;`, `&&`, `||`, pipes and `&` (background), redirections dropped, `\\` continuations,
  comments anywhere, `set -x` and other builtins passed through as commands;
- the prefixes `env`, `nohup`, `exec`, `time`, `command`, and the wrappers `sudo`, `docker|podman
  run`, `docker compose run`, `singularity|apptainer exec` (their `-e KEY=value` reach the command);
- `for v in a b c; do ...; done` is read once, with the first value (a loop over seeds
  runs the same training each time; `ShellCommand.context` says so);
- `if`/`while` bodies are read once; an assignment in an `if` branch only gives a variable that
  is still unset a value (the common `if [ -z "$X" ]; then X=...; fi` default);
- a function's body is read where the function is called, a `bash -c "..."` string and the
  remote command of `ssh host "..."` as scripts;
- arrays `A=(...)` with `${A[@]}`, `$0`/`${BASH_SOURCE[0]}` (the script), positional defaults.

Constructs bashlex cannot parse (`case`, `[[ ]]`, arrays) are masked or skipped statement by
statement; `ShellScript.skipped` names their lines. `pick_command` chooses the training command
among several and says which.
"""

from __future__ import annotations

import bisect
import dataclasses
import posixpath
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import bashlex
import bashlex.ast
import bashlex.errors

from ..errors import InputError
from .launchers import NOT_LAUNCHERS, described, ssh_remote_command, unwrap
from .words import Expansion, expand_string, expand_words, raw_words, substitution_end

_PREFIX_COMMANDS = ("env", "nohup", "exec", "time", "command")
_DECLARE = ("export", "declare", "typeset", "local", "readonly")
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\+?)=(.*)$", re.S)
_MAX_STATEMENT_LINES = 200
_MAX_CALL_DEPTH = 8


@dataclass(frozen=True)
class ShellCommand:
    """One simple command of a script: its words after expansion and assignments."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    """Exported variables plus the command's inline `VAR=value` prefixes."""
    background: bool = False
    line: int = 1
    """1-based line where the command starts."""
    context: str = ""
    """Where it runs when that matters: 'first pass of `for seed in 1 2 3` (seed=1)'."""
    unresolved: tuple[str, ...] = ()
    """Variables its words use that the script never sets (their `$NAME` stays in the words)."""
    cwd: str = ""
    """The folder earlier `cd` commands moved to, relative to where the script starts ("" if none)."""


@dataclass(frozen=True)
class ShellScript:
    commands: tuple[ShellCommand, ...]
    variables: Mapping[str, str]
    """Every variable's value at the end of the script."""
    skipped: tuple[int, ...] = ()
    """Lines of statements bashlex could not parse (not read)."""


def parse_shell(text: str, source: str) -> list[ShellCommand]:
    return list(read_script(text, source).commands)


def read_script(text: str, source: str) -> ShellScript:
    masked = _mask(text)
    skipped: list[int] = []
    walker = _Walker(text, source)
    for node in _parse(masked, source, skipped):
        try:
            walker.walk(node)
        except (AttributeError, IndexError):  # a node shape bashlex builds for constructs read no further
            skipped.append(walker.line(node.pos[0]))
    return ShellScript(tuple(walker.commands), dict(walker.variables), tuple(skipped))


def pick_command(script: ShellScript, is_training: Callable[[ShellCommand], bool], source: str,
                 allowed: str) -> tuple[ShellCommand, list[str]]:
    """The first training command, and notes when the script runs more than one or has lines
    that were not read; an InputError naming the file and what is allowed when it has none."""
    commands = list(script.commands)
    found = [c for c in commands if is_training(c)]
    if not found:
        shown = [c for c in commands if c.argv[0] not in NOT_LAUNCHERS] or commands
        seen = ", ".join(dict.fromkeys(described(c.line, c.argv) for c in shown[:6])) or "no commands"
        raise InputError(source, f"no training command found ({seen}); allowed: {allowed}")
    notes = []
    if script.skipped:
        lines = ", ".join(str(n) for n in script.skipped)
        notes.append(f"{source}: line(s) {lines} not read (bash constructs the parser does not support)")
    distinct = {c.argv: c for c in found}
    if len(distinct) > 1:
        lines = ", ".join(str(c.line) for c in distinct.values())
        notes.append(f"{source} runs {len(distinct)} training commands (lines {lines}); planned the first, line {found[0].line}")
    if found[0].context:
        notes.append(f"{source}:{found[0].line}: planned the {found[0].context}")
    return found[0], notes


# --- parsing -----------------------------------------------------------------------------

def _mask(text: str) -> str:
    """The same text, same length, with what bashlex cannot parse turned into plain words:
    `$((...))` and `$(...)` → `${xx...}`, arrays `A=(1 2)` → one word, `[[ ... ]]` → `[ ... ]`, README placeholders `<your_path>` → one word."""
    chars = list(text)
    for start in _find_all(text, "$("):  # arithmetic and command substitutions: expanded from the source text
        end = substitution_end(text, start)
        if end > start + 3 and chars[start] == "$":
            chars[start:end + 1] = ["$", "{"] + ["x"] * (end - start - 2) + ["}"]
    for match in re.finditer(r"(?m)(?:^|(?<=[\s;]))[A-Za-z_]\w*\+?=\(", text):
        end = _closing(text, match.end() - 1)
        if end > 0:
            for i in range(match.end() - 1, end + 1):
                chars[i] = "_" if chars[i] in "() \t\n" else chars[i]
    for match in re.finditer(r"\$\{[A-Za-z_]\w*\[[^\]{}]*\]", text):  # ${ARRAY[0]}
        for i in range(match.start() + 2, match.end()):
            chars[i] = "_" if chars[i] in "[]@* " else chars[i]
    for match in re.finditer(r"\\\n(?=[ \t]*(\n|$))", text):  # a continuation into a blank line ends the command
        chars[match.start()] = " "
    for match in re.finditer(r"(?<=[\s=])<[A-Za-z_][\w\-./]*>(?=\s|$)", text):  # README placeholders: <your_path>
        chars[match.start()], chars[match.end() - 1] = "_", "_"
    for match in re.finditer(r"\[\[(?=\s)|(?<=\s)\]\]", text):
        a, b = match.span()
        chars[a:b] = [" ", "["] if match.group(0) == "[[" else ["]", " "]
    return "".join(chars)


def _find_all(text: str, needle: str) -> list[int]:
    return [m.start() for m in re.finditer(re.escape(needle), text)]


def _closing(text: str, start: int) -> int:
    depth = 0
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i
    return -1


_BASHLEX_ERRORS = (bashlex.errors.ParsingError, NotImplementedError, AttributeError, IndexError, TypeError, ValueError,
                   AssertionError, KeyError)
"""What bashlex raises on input it cannot read (its own errors, and a few internal ones on odd input)."""


def _parse(masked: str, source: str, skipped: list[int]) -> list[Any]:
    if not any(line.strip() and not line.lstrip().startswith("#") for line in masked.splitlines()):
        return []
    try:
        return list(bashlex.parse(masked))
    except _BASHLEX_ERRORS:
        return _parse_statements(masked, source, skipped)
    except RecursionError:
        raise InputError(source, "shell script nested too deeply to read") from None


def _parse_statements(masked: str, source: str, skipped: list[int]) -> list[Any]:
    """Statement by statement: grow a chunk of lines until it parses; a line that starts no
    parseable statement is skipped and reported."""
    lines = masked.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    nodes: list[Any] = []
    i = 0
    while i < len(lines):
        if not lines[i].strip() or lines[i].lstrip().startswith("#"):
            i += 1
            continue
        end = _statement_end(lines, i, source)
        if end is None:
            skipped.append(i + 1)
            i += 1
            continue
        try:
            parsed = bashlex.parse("".join(lines[i:end]))
        except _BASHLEX_ERRORS:
            skipped.append(i + 1)
            i += 1
            continue
        for node in parsed:
            bashlex.ast.posshifter(offsets[i]).visit(node)
            nodes.append(node)
        i = end
    return nodes


def _statement_end(lines: list[str], start: int, source: str) -> int | None:
    """The line after the statement starting at ``start``; None when it cannot be parsed; an
    InputError when it never ends (an unclosed quote, a `do` without `done`)."""
    last = min(len(lines), start + _MAX_STATEMENT_LINES)
    for end in range(start + 1, last + 1):
        try:
            bashlex.parse("".join(lines[start:end]))
            return end
        except RecursionError:
            return None
        except _BASHLEX_ERRORS as err:
            if "unexpected EOF" not in str(err):
                return None
            if end == len(lines):
                what = "no closing quotation" if "matching" in str(err) else "the statement never ends"
                raise InputError(f"{source}:{start + 1}", f"malformed shell: {what}") from None
    return None


def _inline_script(argv: list[str]) -> str | None:
    """The script of a `bash -c "..."` / `sh -c` inside a command (`srun ... bash -c "..."`), or
    the remote command of `ssh [options] host command...` (`launchers.ssh_remote_command`)."""
    for i, word in enumerate(argv[:-2]):
        if word.rsplit("/", 1)[-1] in ("bash", "sh") and argv[i + 1] == "-c":
            return argv[i + 2]
    return ssh_remote_command(argv) if argv and argv[0].rsplit("/", 1)[-1] == "ssh" else None


# --- walking -----------------------------------------------------------------------------

class _Walker:
    def __init__(self, text: str, source: str) -> None:
        self.text, self.source = text, source
        self.variables: dict[str, str] = {}
        self.arrays: dict[str, list[str]] = {}
        self.exported: set[str] = set()
        self.functions: dict[str, Any] = {}
        self.commands: list[ShellCommand] = []
        self.context = ""
        self.cwd = ""
        self.in_branch = 0
        self.depth = 0
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def line(self, pos: int) -> int:
        return bisect.bisect_right(self._line_starts, pos)

    def walk(self, node: Any, background: bool = False) -> None:
        kind = node.kind
        if kind == "command":
            self.command(node, background)
        elif kind == "list":
            parts = node.parts
            for i, part in enumerate(parts):
                if part.kind != "operator":
                    nxt = parts[i + 1] if i + 1 < len(parts) else None
                    self.walk(part, background or (nxt is not None and nxt.kind == "operator" and nxt.op == "&"))
        elif kind == "pipeline":
            for part in node.parts:
                if part.kind != "pipe":
                    self.walk(part, background)
        elif kind == "compound":
            for part in node.list:
                if part.kind not in ("reservedword", "operator"):
                    self.walk(part, background)
        elif kind == "for":
            self.for_loop(node)
        elif kind == "if":
            self.if_branches(node)
        elif kind in ("while", "until"):
            for part in node.parts:
                if part.kind not in ("reservedword", "operator"):
                    self.walk(part)
        elif kind == "function":
            self.functions[node.name.word] = node.body

    def source_of(self, node: Any) -> str:
        return self.text[node.pos[0]:node.pos[1]]

    def expansion(self, node: Any) -> Expansion:
        return Expansion(self.variables, f"{self.source}:{self.line(node.pos[0])}", arrays=self.arrays,
                         script=self.source)

    def for_loop(self, node: Any) -> None:
        parts = node.parts
        name = parts[1].word
        words = [p for p in parts[2:] if p.kind == "word"]
        body = [p for p in parts if p.kind not in ("reservedword", "word", "operator")]
        has_in = any(p.kind == "reservedword" and p.word == "in" for p in parts)
        ex = self.expansion(node)
        items = [w for p in words for w in expand_words(self.source_of(p), ex)] if has_in else []
        saved = self.context
        if items:
            self.variables[name] = items[0]
            if len(items) > 1:
                self.context = f"first pass of `for {name} in {' '.join(items)}` ({name}={items[0]})"
        for part in body:
            self.walk(part)
        self.context = saved

    def if_branches(self, node: Any) -> None:
        after_then = False
        self.in_branch += 1
        for part in node.parts:
            if part.kind == "reservedword":
                after_then = part.word in ("then", "else")
            elif after_then:
                self.walk(part)
        self.in_branch -= 1

    def assign(self, name: str, value: str, append: bool = False) -> None:
        if self.in_branch and name in self.variables and not append:
            return
        self.variables[name] = self.variables.get(name, "") + value if append else value

    def command(self, node: Any, background: bool) -> None:
        ex = self.expansion(node)
        inline: dict[str, str] = {}
        texts = [self.source_of(p) for p in node.parts if p.kind in ("word", "assignment")]
        while texts and _ASSIGNMENT.match(texts[0]):
            match = _ASSIGNMENT.match(texts.pop(0))
            if match.group(3).startswith("(") and not texts:
                self.assign_array(match.group(1), match.group(3), bool(match.group(2)), ex)
                continue
            inline[match.group(1)] = expand_string(match.group(3), ex)
        if texts and texts[0] in _DECLARE:
            self.declare(texts, ex)
            return
        argv = [w for text in texts for w in expand_words(text, ex)]
        while argv:
            if argv[0] in _PREFIX_COMMANDS:
                argv.pop(0)
                while argv and (argv[0].startswith("-") or _ASSIGNMENT.match(argv[0])):
                    match = _ASSIGNMENT.match(argv.pop(0))
                    if match:
                        inline[match.group(1)] = match.group(3)
                continue
            wrapped = unwrap(argv)  # sudo, docker/podman/compose run, singularity/apptainer exec
            if wrapped is None:
                break
            argv, passed = wrapped
            inline.update(passed)
        if not argv:
            for name, value in inline.items():
                self.assign(name, value)
            return
        if argv[0] == "unset":
            for name in argv[1:]:
                self.variables.pop(name, None)
            return
        nested = _inline_script(argv)
        if nested is not None and self.depth < _MAX_CALL_DEPTH:
            self.depth += 1
            inner = _Walker(nested, self.source)
            inner.variables, inner.arrays, inner.exported, inner.functions = self.variables, self.arrays, self.exported, self.functions
            inner.depth, inner.context = self.depth, self.context
            for child in _parse(_mask(nested), self.source, []):
                inner.walk(child, background)
            self.commands.extend(dataclasses.replace(c, line=self.line(node.pos[0])) for c in inner.commands)
            self.depth -= 1
        if argv[0] in self.functions and self.depth < _MAX_CALL_DEPTH:
            self.depth += 1
            self.walk(self.functions[argv[0]])
            self.depth -= 1
            return
        if argv[0] == "cd" and len(argv) == 2 and "$" not in argv[1]:
            self.cwd = posixpath.normpath(posixpath.join(self.cwd, argv[1]))
        env = {name: self.variables[name] for name in self.exported if name in self.variables}
        env.update(inline)
        self.commands.append(ShellCommand(tuple(argv), env, background, self.line(node.pos[0]), self.context,
                                          tuple(sorted(ex.unresolved)), self.cwd))

    def assign_array(self, name: str, text: str, append: bool, ex: Expansion) -> None:
        """`A=(w1 w2 # comment ...)`: each word expanded, comments dropped."""
        body = text[1:-1] if text.endswith(")") else text[1:]
        items: list[str] = []
        for line in body.splitlines():
            for raw in raw_words(line):
                if raw.startswith("#"):
                    break
                items.extend(expand_words(raw, ex))
        if self.in_branch and name in self.arrays and not append:
            return
        self.arrays[name] = (self.arrays.get(name, []) if append else []) + items
        self.variables[name] = self.arrays[name][0] if self.arrays[name] else ""

    def declare(self, texts: list[str], ex: Expansion) -> None:
        """`export`/`declare`/`local`/`readonly`: values are not word-split (bash)."""
        exports = texts[0] == "export" or "-x" in texts[1:]
        for text in texts[1:]:
            if text.startswith("-"):
                continue
            match = _ASSIGNMENT.match(text)
            name = match.group(1) if match else expand_string(text, ex)
            if match:
                self.assign(name, expand_string(match.group(3), ex), bool(match.group(2)))
            if exports:
                self.exported.add(name)
