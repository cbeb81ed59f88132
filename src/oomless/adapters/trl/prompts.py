"""TRL GRPO prompt and completion lengths under the stated release: max_prompt_length (its
default 512 up to 0.25, None from 0.26, gone in 0.28: key table), the `max_prompt_tokens`
directive, else the engine's or model's context less the completion and image tokens."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from ...catalog.models import ModelArch
from ...errors import InputError
from ...memory import vision as VZ
from ...spec.dataset import DataRef
from .. import _native as N
from ..common import version_text

if TYPE_CHECKING:
    from .reader import Keys


def lengths(keys: Keys, arch: ModelArch, rollout: Mapping[str, Any], prompt_directive: int | None,
             spec: dict[str, Any], notes: list[str]) -> dict[str, int]:
    completion = completion_length(keys)
    if prompt_directive is not None:
        keys.ignore("legacy.max_prompt_length", "the max_prompt_tokens directive bounds prompts instead")
        return {"max_prompt_tokens": prompt_directive, "max_completion_tokens": completion}
    legacy = prompt_truncation(keys)
    if legacy is not None:
        if keys.values.get("legacy.max_prompt_length") is None:
            notes.append(f"max_prompt_length unset: TRL {version_text(keys.version)} truncates prompts to its "
                         f"default {legacy} tokens")
        return {"max_prompt_tokens": legacy, "max_completion_tokens": completion}
    images = VZ.max_image_tokens(arch.vision) if arch.vision is not None else 0
    bound = rollout.get("max_model_len") or arch.max_position_embeddings
    notes.append(f"no `max_prompt_tokens=` directive: prompts up to {bound} - {completion} - {images} tokens "
                 f"(TRL {version_text(keys.version)} does not truncate prompts)")
    prompt = bound - completion - images
    if prompt < 1:
        raise InputError("max_completion_length", f"{completion} leaves no prompt within {bound} tokens")
    return {"max_prompt_tokens": prompt, "max_completion_tokens": completion}


def completion_length(keys: Keys) -> int:
    return keys.int("max_completion_length", keys.default("max_completion_length", 512))


def prompt_truncation(keys: Keys) -> int | None:
    """The length TRL truncates prompts to: max_prompt_length as given, else its default in the
    release (512 up to 0.25, None from 0.26: no truncation; none in 0.28+), from the key table."""
    return keys.int("legacy.max_prompt_length", keys.default("max_prompt_length"))


EXAMPLE_IMAGE_FILTER = {"grpo_vlm.py": 511 * 511, "rloo_vlm.py": 511 * 511}
"""Largest image area TRL's VLM example scripts keep: `filter_big_images` drops every image of
512 px or more on either side (`image.size[0] < 512 and image.size[1] < 512`): examples/scripts/
grpo_vlm.py from TRL PR #3072 (2025-07-23), rloo_vlm.py from PR #4067 (2025-09-18), to HEAD."""


def example_vision(script: str, arch: ModelArch, notes: list[str]) -> dict[str, Any]:
    """The vision section an example script's own image filter gives (`EXAMPLE_IMAGE_FILTER`):
    the training batches' largest image; the processor's limit still sizes vLLM's profile."""
    name = PurePosixPath(script).name
    kept = EXAMPLE_IMAGE_FILTER.get(name)
    if kept is None or arch.vision is None:
        return {}
    notes.append(f"{name} keeps images under 512 px a side (filter_big_images): training images up to "
                 f"{kept:,} px; vLLM's profile sizes them by the processor's max_pixels")
    return {"data_max_pixels": kept}


def data_ref(config: Mapping[str, Any], script: str) -> DataRef | None:
    """ScriptArguments' `dataset_name` at `dataset_train_split` (trl/scripts/utils.py), its
    `prompt` column. open-r1's scripts read `dataset_prompt_column` and make every row a chat
    with `system_prompt` first (src/open_r1/grpo.py `make_conversation`), so plain prompts go
    through the chat template with the system prompt's tokens on each."""
    open_r1 = "open_r1" in script or "dataset_prompt_column" in config or "system_prompt" in config
    system = config.get("system_prompt")
    if config.get("datasets"):  # a dataset mixture (TRL's DatasetMixtureConfig) wins over dataset_name: not read
        return None
    return N.data_ref("dataset_name", config.get("dataset_name"), split=str(config.get("dataset_train_split") or "train"),
                      subset=config.get("dataset_config"), chat_template=config.get("chat_template"),
                      prompt_field=config.get("dataset_prompt_column") or "prompt",  # open-r1 configs.py default too
                      chat=open_r1, added_text=system if isinstance(system, str) else "")
