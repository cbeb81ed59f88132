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


FILLER_TOKEN = "<unused{}>"
"""Filler entries that widen the vocabulary to a real model's ``vocab_size`` (embedding, LM head
and logits as large as the real model's). Several characters long, so the one-character
pre-tokenizer never produces them from text; a random-weight model may generate them."""


def vocabulary(size: int | None = None) -> dict[str, int]:
    """The character vocabulary, padded with fillers to ``size`` tokens when given."""
    tokens = [*SPECIAL_TOKENS, *CHAT_MARKERS, *CHARACTERS]
    vocab = {t: i for i, t in enumerate(tokens)}
    for i in range((size or 0) - len(vocab)):
        vocab[FILLER_TOKEN.format(i)] = len(vocab)
    return vocab


def build_tokenizer(vocab_size: int | None = None) -> Any:
    """The character-level tokenizer (a `PreTrainedTokenizerFast`), ``vocab_size`` tokens long
    when given (at least the 17 it needs)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = vocabulary(vocab_size)
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
    """Random-weight model saved in ``out_dir`` and its tokenizer in ``tokenizer_dir(out_dir)``;
    returns ``out_dir``. A folder that already holds a built model (a resumed run) is reused as
    it is."""
    if (out_dir / "config.json").exists() and (tokenizer_dir(out_dir) / "tokenizer.json").exists():
        return out_dir
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    raw = read_config(config_path)
    needed = len(vocabulary())
    vocab_size = raw.get("vocab_size")
    if not isinstance(vocab_size, int) or isinstance(vocab_size, bool) or vocab_size < needed:
        raise InputError("model", f"vocab_size is {vocab_size!r} in {config_path}; the character tokenizer needs at least {needed}")
    tokenizer = build_tokenizer(vocab_size)
    fields = {k: v for k, v in raw.items() if k != "model_type" and not k.startswith("_")}
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
    tokenizer.save_pretrained(tokenizer_dir(out_dir))
    return out_dir


def tokenizer_dir(model_dir: Path) -> Path:
    """Where `build_model` saves the character tokenizer: a folder of its own. Saved beside a
    config.json whose model_type has a tokenizer of its own (qwen2 → Qwen2Tokenizer),
    transformers 5.x's AutoTokenizer loads that model type's class instead of the saved one
    and splits text differently (measured with transformers 5.24: "ab+1" → ["+", "1"]).
    Runs built before this change keep theirs beside the model; that folder is returned then."""
    own = model_dir / "tokenizer"
    return own if own.is_dir() or not (model_dir / "tokenizer.json").exists() else model_dir
