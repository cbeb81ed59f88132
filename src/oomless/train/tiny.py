"""A tiny policy built locally (no hub): random weights from a config.json and a
character-level tokenizer with a chat template, saved as a normal HF model folder.

The tokenizer is a `tokenizers` WordLevel model over single characters, wrapped as a
`PreTrainedTokenizerFast`. Only `<pad>` and `<eos>` are special: the chat markers are plain
tokens, so a completion that emits one shows it in its decoded text (and fails a format reward)
instead of having it silently stripped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..spec.train_section import BuildModel

SPECIAL_TOKENS = ("<pad>", "<eos>")
CHAT_MARKERS = ("<system>", "<user>", "<assistant>")
CHARACTERS = "0123456789+="
"""What the arithmetic prompts and answers are written with."""
CHAT_TEMPLATE = (
    "{% for m in messages %}"
    "{% if m['role'] == 'system' %}<system>{{ m['content'] }}"
    "{% elif m['role'] == 'user' %}<user>{{ m['content'] }}"
    "{% else %}<assistant>{{ m['content'] }}<eos>{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)


def vocabulary() -> dict[str, int]:
    tokens = [*SPECIAL_TOKENS, *CHAT_MARKERS, *CHARACTERS]
    return {t: i for i, t in enumerate(tokens)}


def build_tokenizer() -> Any:
    """The character-level tokenizer (a `PreTrainedTokenizerFast`)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = vocabulary()
    core = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    core.decoder = decoders.Fuse()
    core.add_special_tokens(list(SPECIAL_TOKENS))
    core.add_tokens(list(CHAT_MARKERS))
    return PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", eos_token="<eos>", chat_template=CHAT_TEMPLATE
    )


def read_config(path: Path) -> dict[str, Any]:
    config_file = path / "config.json" if path.is_dir() else path
    try:
        return json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise InputError("model", f"cannot read {config_file}: {err}") from None


def build_model(config_path: Path, options: BuildModel, out_dir: Path) -> Path:
    """Random-weight model + tokenizer saved in ``out_dir``; returns ``out_dir``. A folder
    that already holds a built model (a resumed run) is reused as it is."""
    if (out_dir / "config.json").exists() and (out_dir / "tokenizer.json").exists():
        return out_dir
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    raw = read_config(config_path)
    tokenizer = build_tokenizer()
    if raw.get("vocab_size") != len(tokenizer):
        raise InputError("model", f"the tiny tokenizer has {len(tokenizer)} tokens; set vocab_size: {len(tokenizer)} in {config_path}")
    fields = {k: v for k, v in raw.items() if k != "model_type"}
    fields.update(pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=None)
    if options.initializer_range is not None:
        fields["initializer_range"] = options.initializer_range
    config = AutoConfig.for_model(raw["model_type"], **fields)
    torch.manual_seed(options.seed)
    model = AutoModelForCausalLM.from_config(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir
