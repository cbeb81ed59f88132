"""ms-swift GRPO prompts: the vision section and the prompt/completion lengths of a script.

Lengths: in GRPO `--max_length` bounds the encoded prompt, image tokens included, and the
completion is `--max_completion_length` beside it: ms-swift's docs "In PPO, GRPO, GKD and
inference scenarios, `max_length` refers to `max_prompt_length`" (docs/source_en/Instruction/
Command-line-parameters.md, v3.2.2 L64 to HEAD), and the trainer sizes vLLM as
`max_prompt_length = template.max_length`, `max_model_len = max_prompt_length + max_tokens`
(swift/trainers/rlhf_trainer/grpo_trainer.py v3.2.2 L1127-1128). Unset, prompt + completion stay
within the vLLM engine's `max_model_len` (`--vllm_max_model_len` of the trainer or of its
`swift rollout` server), else the model's `max_position_embeddings`.

Images: ms-swift encodes only the images a dataset row carries, so a vision-language model plans
one image per prompt at MAX_PIXELS only where the script names images (MAX_PIXELS/MIN_PIXELS,
`--max_pixels`, an image limit in `--vllm_limit_mm_per_prompt`); otherwise 0 images, noted.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ...errors import InputError
from ...spec.dataset import DataRef
from .. import _native as N
from ...memory import constants as MC
from ...memory import vision as VZ
from ..args import FlagReader
from ..common import to_int
from .layout import Run


def vision(run: Run, method: str) -> dict[str, Any]:
    f, env, out = run.flags, run.env, {}
    if run.arch.vision is None:
        for name in ("freeze_vit", "vit_gradient_checkpointing", "vllm_limit_mm_per_prompt"):
            f.ignore(name, f"no effect: {run.arch.name} has no vision tower")
        return out
    pixels = f.str("max_pixels") or env.get("MAX_PIXELS")
    if pixels:
        out["max_pixels"] = to_int("MAX_PIXELS", pixels, minimum=1)
    if env.get("MIN_PIXELS"):
        out["min_pixels"] = to_int("MIN_PIXELS", env["MIN_PIXELS"], minimum=1)
    if not (pixels or env.get("MIN_PIXELS") or _limit_names_images(f)):
        out["images_per_prompt"] = 0
        run.notes.append(f"{run.arch.name} has a vision tower but nothing in the script names images (MAX_PIXELS, "
                         "--max_pixels, --vllm_limit_mm_per_prompt): planned text-only, as ms-swift takes images "
                         "only from the dataset's rows; set MAX_PIXELS to plan image prompts")
    out["freeze_tower"] = f.bool("freeze_vit", True)
    vit_gc = f.raw("vit_gradient_checkpointing")
    if vit_gc is not None:
        out["tower_gradient_checkpointing"] = f.bool("vit_gradient_checkpointing", True)
    return out


def _limit_names_images(f: FlagReader) -> bool:
    """Whether a --vllm_limit_mm_per_prompt (or its pre-3.8 alias) allows images per prompt."""
    values = [" ".join(f.raw(name) or []) for name in ("vllm_limit_mm_per_prompt", "limit_mm_per_prompt") if f.has(name)]
    return any(re.search(r"[\'\"]image[\'\"]\s*:\s*[1-9]", value) for value in values)


def _image_tokens(run: Run, vision: Mapping[str, Any]) -> int:
    if run.arch.vision is None or vision.get("images_per_prompt") == 0:
        return 0
    return VZ.max_image_tokens(run.arch.vision, max_pixels=vision.get("max_pixels") or MC.QWEN_VL_MAX_PIXELS,
                               min_pixels=vision.get("min_pixels") or MC.QWEN_VL_MIN_PIXELS)


def lengths(run: Run, vision: Mapping[str, Any], engine_len: int | None = None) -> dict[str, int]:
    """Prompt and completion bounds. With `--max_length` unset the sequence is bounded by what
    generates it: a vLLM engine's `max_model_len` (``engine_len``; vLLM refuses a longer prompt and
    ends a request at that length: vllm/v1/engine/processor.py `_validate_model_len`,
    vllm/v1/core/sched/utils.py `check_stop` FINISHED_LENGTH_CAPPED), else the model's
    `max_position_embeddings`."""
    f = run.flags
    completion = f.int("response_length") or f.int("max_new_tokens") or f.int("max_completion_length", 512, minimum=1)
    images = _image_tokens(run, vision)
    max_length = f.int("max_length", minimum=1)
    if max_length is None:
        context = run.arch.max_position_embeddings
        bound = min(engine_len or context, context)
        where = f"the vLLM engine's max_model_len {bound}" if bound < context else f"the model's {context} tokens"
        run.notes.append(f"--max_length unset: prompt + completion bounded only by {where}; "
                         "set --max_length to plan the prompts you use")
        prompt = bound - completion - images
        if prompt < 1:
            raise InputError("--max_completion_length", f"{completion} leaves no prompt within {where}"
                             + (f" beside {images} image tokens" if images else ""))
        return {"max_prompt_tokens": prompt, "max_completion_tokens": completion}
    prompt = max_length - images  # in GRPO --max_length is the prompt's bound (module docstring)
    if prompt < 1:
        raise InputError("--max_length", f"{max_length} leaves no prompt text beside {images} image tokens "
                         "(in GRPO --max_length bounds the encoded prompt, images included)")
    return {"max_prompt_tokens": prompt, "max_completion_tokens": completion}


def data_ref(f: FlagReader, read: Callable[[str], str]) -> DataRef | None:
    """`--dataset` (each `id`, `id:subset` or a path, with an optional `#N` sample count) and the
    `--system` prompt ms-swift puts before every prompt (text, or a file it reads:
    swift/llm/argument/base_args/template_args.py `system`, which `__post_init__` reads when it
    is a file). ms-swift always encodes prompts through the model's template."""
    values = f.peek("dataset")
    if not values:
        return None
    sources = [re.sub(r"#\d+$", "", v) for v in values]
    local = [s.startswith((".", "/", "~")) or "." in Path(s).name for s in sources]
    subsets = {s.split(":", 1)[1] for s, is_path in zip(sources, local) if not is_path and ":" in s}
    sources = [s if is_path else s.split(":", 1)[0] for s, is_path in zip(sources, local)]
    system, missing = " ".join(f.peek("system") or []), ""
    if system and system.endswith(".txt"):
        try:
            system = read(system)
        except InputError:
            system, missing = "", f"--system {system}"
    return N.data_ref("--dataset", sources, chat=True, added_text=system, missing=missing,
                      subset=subsets.pop() if len(subsets) == 1 else None)
