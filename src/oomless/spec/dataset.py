"""What a framework config says its training data is (`oomless plan --from FW --data auto`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DataRef:
    """The training data a framework config names, as the framework reads it."""

    key: str
    """The config key that names it (`data.train_files`, `--dataset`, ...), for messages."""
    sources: tuple[str, ...]
    """Files, folders or Hub dataset ids, as written (relative paths from the config's folder)."""
    split: str = "train"
    subset: str | None = None
    """The dataset's configuration name (TRL `dataset_config`, ms-swift `id:subset`)."""
    prompt_field: str | None = None
    """The column the framework takes prompts from, when the config says (verl/EasyR1 `prompt_key`)."""
    image_field: str | None = None
    chat: bool = False
    """The framework sends a plain-text prompt as one user message through the chat template
    (EasyR1, ms-swift, OpenRLHF `--apply_chat_template`); chat-message prompts always go through it."""
    added_text: str = ""
    """Text the framework adds to every prompt (a system prompt, EasyR1's `format_prompt` template
    without its placeholders): its tokens are added to each prompt's count."""
    chat_template: str | None = None
    """The chat template the config sets in place of the tokenizer's (open-r1 `chat_template`, verl
    `actor_rollout_ref.model.custom_chat_template`)."""
    drops_answer: bool = False
    """The framework leaves a row's trailing assistant turn out of the prompt (VLM-R1 asks the
    first `conversations` turn only)."""
    image_roots: tuple[str, ...] = ()
    """Per source, the folder its rows' relative image paths are joined to (VLM-R1 `--image_folders`)."""
    missing: str = ""
    """A file the framework reads to build every prompt that is not readable here (EasyR1
    `data.format_prompt`, ms-swift `--system FILE`): the data then gives no bound."""
