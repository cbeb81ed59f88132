"""Liger in TRL's GRPO and RLOO configs: which of the spec's `logits: fused` (Liger's fused
GRPO loss) and `liger_kernels` (its RMSNorm/SwiGLU/RoPE model kernels) a release's keys switch
on, and the keys that say a spec's pair back.

Per release, from the PyPI wheels' `trl/trainer/grpo_trainer.py`, `grpo_config.py`,
`rloo_trainer.py`:
- The model kernels come from transformers' `Trainer.__init__` whenever the
  TrainingArguments key `use_liger_kernel` is true: it calls liger's
  `_apply_liger_kernel_to_instance(model, **liger_kernel_config)` (transformers 4.53.0 and
  5.24.0 trainer / integrations/liger.py; 4.52.4 passes no config).
- 0.14–0.16: GRPOTrainer has no Liger loss: `use_liger_kernel` is the model kernels alone.
- 0.17–0.24: `use_liger_loss` (GRPOConfig) is the loss alone (`LigerFusedLinearGRPOLoss`,
  0.17.0 and 0.24.0 `self.use_liger_loss`); `use_liger_kernel` the model kernels alone.
- 0.25–1.14: `use_liger_kernel` switches both (the loss: 0.25.1, 0.29.0, 1.0.0 `self.use_liger_kernel`;
  1.13-1.14 its chunked log-prob path); `use_liger_loss` (deprecated, gone after 0.27) is copied
  into it (0.25.1 grpo_config.py `__post_init__`, so it wins over `use_liger_kernel`).
- 1.15–1.16: `use_liger_kernel` is the model kernels alone again: GRPOTrainer and RLOOTrainer
  set `liger_kernel_config["fused_linear_cross_entropy"] = False`, refuse True, and the log-probs
  go through the tiled LM head as without it (1.15.0, 1.16.0 "only its layer kernels are applied").
- RLOOTrainer (GRPO's design, 0.22–1.16) never has a Liger loss (no `liger` in the 0.23.1, 0.25.1,
  0.29.0, 1.0.0 and 1.14.0 rloo_trainer.py; 1.15–1.16 only the block above).

Which model kernels: `_apply_liger_kernel_to_instance` passes on the config keys the model
type's `apply_liger_kernel_to_<type>` takes; `rms_norm` and `swiglu` default true (liger-kernel
0.8.5 monkey_patch.py `apply_liger_kernel_to_llama|mistral|qwen2|qwen3`). The spec's one
`liger_kernels` switch is both: with only one of them on, the run is planned without (more
memory than it holds, noted). `rope` plans nothing either way (`memory/activation_liger.py`);
`cross_entropy` patches the loss module and `fused_linear_cross_entropy` the model's forward,
which computes logits as before when called without labels (0.8.5 `lce_forward`: `skip_logits`
only in training with labels), as GRPO's log-prob passes call it: no planned change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...errors import InputError
from ..common import cannot_express, parse_version, to_bool, version_text
from . import trainers as TT
from . import versions as TV

LOSS_KEY_FROM = (0, 17)
"""`use_liger_loss` (the Liger GRPO loss alone) from 0.17.0."""
LOSS_WITH_KERNELS_FROM = (0, 25)
"""`use_liger_kernel` switches the loss too, and `use_liger_loss` is copied into it, from 0.25.1."""
KERNELS_ONLY_FROM = TV.CHUNKED_HEAD_FROM
"""1.15: `use_liger_kernel` applies only the model kernels; the tiled LM head computes log-probs."""
CONFIG_FROM_TRANSFORMERS = (4, 53)
"""transformers 4.53.0 added TrainingArguments.liger_kernel_config (absent in 4.52.4)."""
MODEL_KERNELS = ("rms_norm", "swiglu")
"""The `liger_kernel_config` keys the spec's `liger_kernels` stands for (each default true)."""
NO_PLANNED_EFFECT = ("rope", "cross_entropy", "fused_linear_cross_entropy")
"""Keys that change nothing planned (see the module docstring)."""


def _loss_of_kernel_key(trainer: str, version: tuple[int, ...]) -> bool:
    """Whether `use_liger_kernel` also switches Liger's GRPO loss in this release."""
    return trainer == TT.GRPO and LOSS_WITH_KERNELS_FROM <= version < KERNELS_ONLY_FROM


def liger_fields(keys: Any, notes: list[str]) -> dict[str, Any]:
    """The spec fields the Liger keys of a GRPO/RLOO config set: ``liger_kernels`` true, and
    ``logits`` "fused" where the release's GRPO loss is Liger's; {} when none is on."""
    version, trainer = keys.version, keys.trainer
    kernel = keys.bool("use_liger_kernel", False)
    raw = keys.get("legacy.use_liger_loss")  # read_legacy keeps the old key under this name
    loss_key = None if raw is None else to_bool("use_liger_loss", raw)
    loss = False
    grpo = trainer == TT.GRPO
    if loss_key is not None and grpo and version >= LOSS_WITH_KERNELS_FROM:
        kernel = loss_key  # 0.25-0.27 __post_init__: use_liger_kernel = use_liger_loss
    elif loss_key is not None and grpo and version >= LOSS_KEY_FROM:
        loss = loss_key
    elif loss_key is not None:
        keys.ignored.append(f"use_liger_loss: no Liger loss in TRL {version_text(version)}'s {TT.CONFIG_CLASS[trainer]}")
    config = _config(keys, kernel)
    out: dict[str, Any] = {}
    if kernel and model_kernels(config, version, notes):
        out["liger_kernels"] = True
    if loss or (kernel and _loss_of_kernel_key(trainer, version)):
        out["logits"] = "fused"
    return out


def _config(keys: Any, kernel: bool) -> dict[str, bool]:
    """``liger_kernel_config`` as a mapping of booleans ({} when unset); a value the run would
    not accept is refused, one it ignores (use_liger_kernel off) is noted."""
    raw = keys.get("liger_kernel_config")
    if raw is None:
        return {}
    if not kernel:
        keys.ignored.append("liger_kernel_config: no effect without use_liger_kernel")
        return {}
    if keys.transformers is not None and parse_version("transformers version", keys.transformers) < CONFIG_FROM_TRANSFORMERS:
        raise InputError("liger_kernel_config", f"transformers {keys.transformers} has no such TrainingArguments key "
                         f"(added in {version_text(CONFIG_FROM_TRANSFORMERS)})")
    if not isinstance(raw, Mapping):
        raise InputError("liger_kernel_config", f"{raw!r} is not a mapping; allowed: a YAML mapping of Liger kernel "
                         "names to true/false (transformers passes it as keyword arguments)")
    config = {str(name): to_bool(f"liger_kernel_config.{name}", value) for name, value in raw.items()}
    for name in sorted(set(config) - set(MODEL_KERNELS) - set(NO_PLANNED_EFFECT)):
        keys.ignored.append(f"liger_kernel_config.{name}: not planned (a kernel other than Liger's RMSNorm/SwiGLU)")
    return config


def model_kernels(config: Mapping[str, bool], version: tuple[int, ...], notes: list[str]) -> bool:
    """Whether Liger's RMSNorm and SwiGLU both replace the model's under ``config``."""
    if config.get("fused_linear_cross_entropy") and version >= KERNELS_ONLY_FROM:
        raise InputError("liger_kernel_config.fused_linear_cross_entropy", f"true is refused by TRL "
                         f"{version_text(version)} (it would replace the forward its fused LM head patches); allowed: false")
    on = [name for name in MODEL_KERNELS if config.get(name, True)]
    if len(on) == 1:
        notes.append(f"liger_kernel_config applies Liger's {on[0]} but not the other of rms_norm/swiglu: the spec's "
                     "liger_kernels is both, so the run is planned without Liger's model kernels (above what it holds)")
    return len(on) == len(MODEL_KERNELS)


def liger_settings(spec: Any, dialect: tuple[int, ...]) -> dict[str, Any]:
    """The keys that say the spec's ``logits: fused`` and ``liger_kernels`` in TRL ``dialect``
    (GRPO, or RLOO on GRPO's design); a pair the release cannot switch is refused, naming the field."""
    fused, kernels = spec.logits.value == "fused", spec.liger_kernels
    trainer = TT.RLOO if spec.algorithm.value == "rloo" else TT.GRPO
    release = f"TRL {version_text(dialect)}{' RLOO' if trainer == TT.RLOO else ''}"
    out: dict[str, Any] = {"use_liger_kernel": True} if kernels else {}
    if not fused:
        if kernels and _loss_of_kernel_key(trainer, dialect):
            cannot_express("liger_kernels", f"True cannot be written with logits {spec.logits.value!r} for {release}: its "
                           "use_liger_kernel applies Liger's model kernels and its fused loss together (set logits: fused)")
        return out
    if trainer == TT.RLOO or not LOSS_KEY_FROM <= dialect < KERNELS_ONLY_FROM:
        cannot_express("logits", f"'fused' cannot be written for {release}: it has no Liger loss (Liger's loss is in "
                       f"GRPOTrainer {version_text(LOSS_KEY_FROM)}-1.14; from 1.15 use_liger_kernel applies only the model "
                       "kernels and the tiled LM head computes the log-probs: chunked_head)")
    if dialect < LOSS_WITH_KERNELS_FROM:
        return {**out, "use_liger_loss": True}
    if not kernels:
        cannot_express("liger_kernels", f"False cannot be written with logits: fused for {release}: its use_liger_kernel "
                       "applies Liger's model kernels with its fused loss (set liger_kernels: true)")
    return out
