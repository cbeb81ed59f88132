"""Set or remove dotted keys in a YAML file, comments and layout kept (ruamel.yaml round trip).

Source: ruamel.yaml 0.18 `YAML(typ="rt")` keeps comments, key order and quoting of the keys it
does not touch; `preserve_quotes` keeps quoted scalars quoted.
"""

from __future__ import annotations

import io
from typing import Any

from ...errors import InputError

MISSING = object()


def _yaml() -> Any:
    from ruamel.yaml import YAML

    y = YAML(typ="rt")
    y.preserve_quotes = True
    y.width = 4096
    return y


def load(text: str, where: str) -> Any:
    from ruamel.yaml.constructor import DuplicateKeyError
    from ruamel.yaml.error import YAMLError

    try:
        data = _yaml().load(text)
    except DuplicateKeyError:
        data = _last_wins(text, where)
    except YAMLError as err:
        raise InputError(where, f"cannot read YAML: {str(err).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise InputError(where, "expected a mapping of keys at the top level")
    return data


def get(data: Any, dotted: str) -> Any:
    node = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return MISSING
        node = node[part]
    return node


def patch_yaml(text: str, values: dict[str, Any], where: str) -> str:
    """``text`` with each dotted key set to its value (None: the key removed, the default applies)."""
    from ruamel.yaml.comments import CommentedMap
    from ruamel.yaml.constructor import DuplicateKeyError

    try:
        _yaml().load(text)
    except DuplicateKeyError:
        return _patch_lines(text, values, where)
    except Exception:  # noqa: BLE001 - `load` names the error
        pass
    data = load(text, where)
    for dotted, value in values.items():
        *parents, leaf = dotted.split(".")
        node = data
        for part in parents:
            if not isinstance(node.get(part), dict):
                if value is None:
                    node = None
                    break
                node[part] = CommentedMap()
            node = node[part]
        if node is None:
            continue
        if value is None:
            node.pop(leaf, None)
        else:
            node[leaf] = value
    out = io.StringIO()
    _yaml().dump(data, out)
    return out.getvalue()


def _last_wins(text: str, where: str) -> Any:
    """A mapping with a key given twice (open-r1's `do_eval`), read as the frameworks read it
    (PyYAML: the last one wins); ruamel's round trip refuses it."""
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise InputError(where, f"cannot read YAML: {str(err).splitlines()[0]}") from None


def _patch_lines(text: str, values: dict[str, Any], where: str) -> str:
    """A YAML with a duplicate key, patched line by line: each top-level `key: value` line of a
    changed key is rewritten (every copy, so whichever one the reader takes says it), a new key
    is appended, a removed one deleted; comments after a value are kept. Nested keys or a value
    written over several lines are refused (the round trip would drop the duplicate)."""
    import re

    lines = text.splitlines(keepends=True)
    for key, value in values.items():
        if "." in key:
            raise InputError(where, f"{key}: a YAML with a duplicate key is patched only at its top level")
        pattern = re.compile(rf"^{re.escape(key)}\s*:[ \t]*(?P<value>[^#\n]*?)(?P<tail>[ \t]+#.*)?(?P<end>\n?)$")
        found = [i for i, line in enumerate(lines) if pattern.match(line)]
        new = None if value is None else _scalar_line(key, value, where)
        for i in reversed(found):
            match = pattern.match(lines[i])
            assert match is not None
            if not match.group("value"):
                raise InputError(where, f"{key}: its value spans lines in a YAML with a duplicate key; edit it by hand")
            if new is None:
                del lines[i]
            else:
                lines[i] = new + (match.group("tail") or "") + match.group("end")
        if not found and new is not None:
            if lines and not lines[-1].endswith("\n"):
                lines[-1] += "\n"
            lines.append(new + "\n")
    return "".join(lines)


def _scalar_line(key: str, value: Any, where: str) -> str:
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    mapping = CommentedMap()
    if isinstance(value, list):
        value = CommentedSeq(value)
        value.fa.set_flow_style()  # a list on the key's own line
    mapping[key] = value
    mapping.fa.set_block_style()
    out = io.StringIO()
    _yaml().dump(mapping, out)
    line = out.getvalue().rstrip("\n")
    if "\n" in line:
        raise InputError(where, f"{key}: {value!r} does not fit on one line of a YAML with a duplicate key")
    return line
