"""ms-swift's `--optim` → the spec's `optimizer` and `optimizer_implementation` (reader), and
back (writer). ms-swift's trainers are transformers' Trainer and keep its `optim` default
(no ms-swift argument class overrides it); the implementation rules are `adapters.optim_impl`'s.

A script without `--optim` gets transformers' default of the run's release: the `# oomless:
transformers==X` directive's, else the release ms-swift documents for its version. The pinned
ranges (requirements/framework.txt) do not decide it: `transformers>=4.33` in every release,
capped below 4.53 up to 3.6 (foreach for certain) and up to 4.58 / 5.x after. ms-swift's README
install table recommends transformers 4.54.1-4.56.2 with torch 2.7.1 in 3.7-3.9 (torch < 2.8
keeps adamw_torch: foreach) and transformers 4.57.1+ with torch 2.8.0+ from 3.10 (v3.10.0
README; v4.0.0: 4.57.6/5.2.0 with torch 2.8.0/2.9.1): adamw_torch_fused, fused.
"""

from __future__ import annotations

from typing import Any

from ..args import FlagReader, hf_optimizer
from ..common import cannot_express, version_text
from .. import optim_impl as OI

PINNED_BEFORE = (3, 7)
"""ms-swift releases before it cap transformers below 4.53 (requirements/framework.txt): adamw_torch for certain, not noted."""
FUSED_DEFAULT_FROM = (3, 10)
"""The first ms-swift release whose documented environment (torch 2.8, transformers 4.57.1) defaults `optim` to adamw_torch_fused."""

OPTIM_FLAG = {"adamw_8bit": "adamw_bnb_8bit", "adafactor": "adafactor", "sgd": "sgd"}
"""The `--optim` the writer gives for a non-AdamW spec optimizer."""


def default_optim(swift_version: tuple[int, ...], transformers_version: str | None) -> str:
    """The `--optim` an ms-swift ``swift_version`` run gets when its script sets none."""
    unstated = "adamw_torch_fused" if swift_version >= FUSED_DEFAULT_FROM else "adamw_torch"
    return OI.hf_default_optim(transformers_version, unstated)


def optimizer_fields(flags: FlagReader, swift_version: tuple[int, ...], transformers_version: str | None,
                     ds_optimizer: str | None, distribution: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """`optimizer` (unless AdamW) and `optimizer_implementation` (where it changes the plan); a
    value taken from the release's documented transformers is noted in ``notes``."""
    optim = flags.str("optim")
    out: dict[str, Any] = {}
    optimizer = hf_optimizer("--optim", optim) if optim else hf_optimizer("deepspeed optimizer", ds_optimizer or "adamw")
    if optimizer != "adamw":
        out["optimizer"] = optimizer
    default = default_optim(swift_version, transformers_version)
    implementation = OI.from_hf_optim(optim, default, ds_optimizer, distribution)
    if implementation is not None:
        out["optimizer_implementation"] = implementation
        if optim is None and transformers_version is None and swift_version >= PINNED_BEFORE:
            notes.append(f"--optim unset: {default} ({implementation} AdamW), transformers' default in the environment "
                         f"ms-swift {version_text(swift_version)} documents; add `# oomless: transformers==X` for another")
    return out


def optim_flags(spec: Any, swift_version: tuple[int, ...]) -> list[tuple[str, Any]]:
    """`--optim` for the writer: a non-AdamW optimizer's name, else the AdamW implementation's
    where leaving the flag to the release's default would read back otherwise."""
    if spec.optimizer.value != "adamw":
        return [("optim", OPTIM_FLAG[spec.optimizer.value])]
    try:
        optim = OI.optim_to_write(spec.optimizer_implementation, spec.distribution,
                                  default_optim(swift_version, spec.transformers_version))
    except KeyError:
        cannot_express("optimizer_implementation", f"{spec.optimizer_implementation.value!r} cannot be written for "
                       "ms-swift: transformers has no per-parameter AdamW `--optim` (adamw_hf is gone); allowed: foreach, fused")
        return []
    return [] if optim is None else [("optim", optim)]
