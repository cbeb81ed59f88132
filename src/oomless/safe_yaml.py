"""YAML read with bounds: the one loader for specs and framework configs.

PyYAML's safe loader already refuses tags that construct objects, but three inputs still
break it or the code after it: a document nested deeper than Python's recursion limit
(RecursionError while composing), aliases that expand exponentially (nine levels of nine
references to the level below make 9^9 nodes: a "billion laughs" document), and very large
files. Here the document is composed into PyYAML's node graph first, its depth and its size
*with aliases expanded* are counted without recursion, and only a document within the bounds
is constructed into Python objects.
"""

from __future__ import annotations

from typing import Any

import yaml

from .errors import InputError

MAX_YAML_BYTES = 8 * 1024**2
"""Largest YAML text read (8 MiB). Specs are a few KiB; the largest framework config files
(verl's generated full configs) are tens of KiB."""
MAX_YAML_DEPTH = 100
"""Deepest nesting of mappings/lists. Real configs nest under ten levels (verl's
`actor_rollout_ref.actor.fsdp_config.…` is five)."""
MAX_YAML_NODES = 200_000
"""Most scalars, lists and mappings after expanding aliases: a bound on the work and memory
that constructing and then walking the document can cost."""


def load_yaml(text: str, where: str) -> Any:
    """The document in ``text`` (None when empty); an ``InputError`` naming ``where`` when
    it is malformed, nested deeper than `MAX_YAML_DEPTH`, larger than `MAX_YAML_BYTES`, or
    expands to more than `MAX_YAML_NODES` nodes."""
    try:
        return load_yaml_wording_errors(text, where)
    except yaml.YAMLError as err:
        raise InputError(where, _describe(err)) from None


def load_yaml_wording_errors(text: str, where: str) -> Any:
    """As `load_yaml`, but a malformed document raises PyYAML's own ``YAMLError`` for a
    caller that words it itself (Hydra's `file:line`); the bounds are still ``InputError``."""
    if len(text) > MAX_YAML_BYTES:
        raise InputError(where, f"{len(text):,} characters of YAML; at most {MAX_YAML_BYTES:,} are read")
    loader = yaml.SafeLoader(text)  # the reader checks for unprintable characters here
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_shape(node, where)
        return loader.construct_document(node)
    except RecursionError:
        raise InputError(where, f"YAML nested too deeply; at most {MAX_YAML_DEPTH} levels are read") from None
    finally:
        loader.dispose()


def load_yaml_scalar(raw: str) -> Any:
    """A command-line value read as YAML (`8`, `true`, `[1, 2]`), as Hydra's grammar reads
    it; the text itself when it is not YAML within the bounds of `load_yaml`."""
    if not raw.strip():
        return ""
    try:
        return load_yaml(raw, "value")
    except InputError:
        return raw

def _describe(err: yaml.YAMLError) -> str:
    if isinstance(err, yaml.reader.ReaderError):
        return f"malformed YAML at character {err.position}: {err.reason} ({err.character!r})"
    mark = getattr(err, "problem_mark", None)
    at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = getattr(err, "problem", None) or "invalid YAML"
    return f"malformed YAML{at}: {problem}"


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_shape(root: yaml.Node, where: str) -> None:
    """Depth and expanded size of the node graph, iteratively. An alias is the same node
    object reached again, so the expanded size is counted once per distinct node (post-order,
    memoised by identity); a cycle (a recursive alias) is refused."""
    expanded: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            total = 1 + sum(expanded[id(child)] for child in _children(node))
            if total > MAX_YAML_NODES:
                raise InputError(where, f"YAML expands to more than {MAX_YAML_NODES:,} values (aliases "
                                 "referring to aliases?); at most that many are read")
            expanded[key] = total
            continue
        if key in expanded:
            continue
        if depth > MAX_YAML_DEPTH and not isinstance(node, yaml.ScalarNode):
            raise InputError(where, f"YAML nested deeper than {MAX_YAML_DEPTH} levels; at most that many are read")
        if key in on_path:
            raise InputError(where, "YAML alias refers to itself; recursive documents are not read")
        on_path.add(key)
        stack.append((node, depth, True))
        stack.extend((child, depth + 1, False) for child in _children(node) if id(child) not in expanded)
