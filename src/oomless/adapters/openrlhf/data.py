"""The training data an OpenRLHF command names (`oomless plan --from openrlhf --data auto`).

`--prompt_data` (`--data.prompt_dataset` in the dotted layout): datasets separated by commas,
each a local file/folder or a Hub id, read at `--prompt_split`; prompts from `--input_key`,
through the chat template with `--apply_chat_template`, else formatted by `--input_template`
(`"User: {}\\nAssistant: "`, whose text then lengthens every prompt). Source: openrlhf/datasets/
prompts_dataset.py `preprocess_data` and openrlhf/utils/utils.py `blending_datasets`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...spec.dataset import DataRef
from .. import _native as N


def _value(given: Mapping[str, Any], table: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        if name in given:
            return given[name]
    return next((table[n].get("default") for n in names if n in table), None)


def data_ref(given: Mapping[str, Any], table: Mapping[str, Any]) -> DataRef | None:
    names = ("--prompt_data", "--data.prompt_dataset")
    source = _value(given, table, *names)
    if not isinstance(source, str):
        return None
    key = next((n for n in names if n in given), names[0]).removeprefix("--")
    chat = bool(_value(given, table, "--apply_chat_template", "--data.apply_chat_template"))
    template = _value(given, table, "--input_template", "--data.input_template")
    added = template.replace("{}", "") if isinstance(template, str) and not chat else ""
    split = _value(given, table, "--prompt_split", "--data.prompt_split") or "train"
    return N.data_ref(key, [s for s in source.split(",") if s.strip()], split=str(split),
                      prompt_field=_value(given, table, "--input_key", "--data.input_key"),
                      image_field=_value(given, table, "--image_key", "--data.image_key"), chat=chat, added_text=added)
