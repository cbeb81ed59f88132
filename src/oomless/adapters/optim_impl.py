"""How torch's AdamW steps (the spec's `optimizer_implementation`), as the frameworks' files decide it.

- transformers' Trainer (TRL, ms-swift): the `optim` name. `adamw_torch` builds torch AdamW with
  no flag (torch then picks foreach for CUDA tensors: torch/optim/optimizer.py
  `_default_to_fused_or_foreach`), `adamw_torch_fused` passes `fused=True`; transformers 4.54.0
  training_args.py L1286-1291 (PR huggingface/transformers#37358) made `adamw_torch_fused` the
  default when torch >= 2.8, `adamw_torch` before (4.53.3 training_args.py L1281).
- Under DeepSpeed the Trainer hands its own optimizer to DeepSpeed unless the DeepSpeed config
  has an `optimizer` section (transformers integrations/deepspeed.py `deepspeed_optim_sched`:
  `DummyOptim` then, and DeepSpeed builds FusedAdam / DeepSpeedCPUAdam).

A spec states the field only where it changes the plan (`planned`): foreach is what an unset
field plans under DDP/FSDP, fused (no temporaries) what it plans under ZeRO, and nothing matters
once the optimizer steps on the CPU (`offload_optimizer`). So files without these keys read as
before, and a written file reads back to the same spec.
"""

from __future__ import annotations

from typing import Any

from ..errors import InputError
from ..planner.roles import implementation_under
from ..spec.enums import Strategy
from .common import parse_version

FOREACH, FUSED, FOR_LOOP = "foreach", "fused", "for_loop"

HF_OPTIM_IMPLEMENTATION: dict[str, str] = {
    "adamw_torch": FOREACH, "adamw_torch_fused": FUSED, "adamw_apex_fused": FUSED, "adamw_hf": FOR_LOOP,
}
"""transformers `optim` → how the step runs. Source: transformers 4.54.0 trainer.py
`get_optimizer_cls_and_kwargs` (L1419-1442): adamw_torch / adamw_torch_fused are torch AdamW,
the latter with `fused=True`; adamw_apex_fused is apex FusedAdam (one multi-tensor kernel, no
temporaries of the parameters' size); adamw_hf (transformers' own AdamW, gone by 4.54) loops over
the parameters. Other names (xla, npu, 8-bit, Adafactor) are not torch's AdamW on CUDA: unset."""

HF_OPTIM_FOR: dict[str, str] = {FOREACH: "adamw_torch", FUSED: "adamw_torch_fused"}
"""The `optim` a writer gives for each implementation (for_loop has no current transformers name)."""

FUSED_DEFAULT_FROM = (4, 54)
"""The first transformers release whose `optim` default is adamw_torch_fused (with torch >= 2.8)."""


def hf_default_optim(transformers_version: str | None, unstated: str) -> str:
    """TrainingArguments' `optim` default under ``transformers_version`` (the `# oomless:
    transformers==X` directive), else ``unstated`` (what the framework release's documented
    environment gives). Assumes torch >= 2.8 with transformers >= 4.54 (the releases of that time
    pin it: vLLM 0.10.2+ requires torch 2.8)."""
    if transformers_version is None:
        return unstated
    try:
        version = parse_version("transformers_version", transformers_version)
    except InputError:  # the spec refuses it, naming the field (spec.run `transformers_version`)
        return unstated
    return "adamw_torch_fused" if version >= FUSED_DEFAULT_FROM else "adamw_torch"


def planned(implementation: str | None, distribution: dict[str, Any]) -> str | None:
    """``implementation`` as the spec states it: None where an unset field plans the same (foreach
    under DDP/FSDP; fused under ZeRO, where DeepSpeed's own optimizer has no temporaries either;
    anything when the optimizer steps on the CPU). ``distribution``: the spec's section (dict)."""
    if implementation is None or distribution.get("offload_optimizer"):
        return None
    default = implementation_under(None, Strategy(distribution.get("strategy", "zero3")))
    unset_plans = default.value if default is not None else FUSED  # DeepSpeed's own: no temporaries, as fused
    return None if implementation == unset_plans else implementation


def from_hf_optim(optim: str | None, default: str, ds_optimizer: str | None, distribution: dict[str, Any]) -> str | None:
    """The spec's value for a Trainer run: ``optim`` (None: ``default``, the release's default
    name) unless the DeepSpeed config builds its own optimizer (``ds_optimizer``; then None)."""
    if ds_optimizer is not None:
        return None
    return planned(HF_OPTIM_IMPLEMENTATION.get((optim or default).lower()), distribution)


def optim_to_write(implementation: Any, distribution: Any, default: str) -> str | None:
    """The `optim` a Trainer file gives for ``implementation`` (a spec value, enum or None) under
    ``distribution`` (the spec's section): a value that changes the plan is written out, whatever
    the release's ``default`` (so the file says it under any transformers); an unset one only where
    the default would read back otherwise. Raises KeyError for for_loop (no transformers name)."""
    dist = distribution if isinstance(distribution, dict) else distribution.model_dump(mode="json")
    wanted = planned(getattr(implementation, "value", implementation), dist)
    if wanted is not None:
        return HF_OPTIM_FOR[wanted]
    if planned(HF_OPTIM_IMPLEMENTATION.get(default), dist) is None:
        return None
    return HF_OPTIM_FOR[FOREACH if dist.get("strategy", "zero3") in ("ddp", "fsdp") else FUSED]
