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
    from ruamel.yaml.error import YAMLError

    try:
        data = _yaml().load(text)
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
