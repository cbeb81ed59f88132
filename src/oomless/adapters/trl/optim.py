"""TRL's `optim` key → the spec's `optimizer` and `optimizer_implementation` (reader, ppo.py),
and back (writer). The implementation rules are `adapters.optim_impl`'s.

A file without `optim` gets transformers' default of the run's release: the `# oomless:
transformers==X` directive's, else the one every transformers a TRL release admits gives. TRL
0.21.0 requires transformers >= 4.55.0 (its setup.cfg; 1.16 pyproject.toml >= 4.56.2), whose
default is adamw_torch_fused (torch >= 2.8): fused. TRL 0.14-0.20 admitted transformers from
4.46-4.53.2 (their setup.cfg) and shipped before 4.54 (0.20.0: 2025-07-28, the same week as
4.54.0): adamw_torch, foreach.
"""

from __future__ import annotations

from typing import Any

from ..args import hf_optimizer
from ..common import cannot_express, version_text
from .. import optim_impl as OI

FUSED_DEFAULT_FROM = (0, 21)
"""The first TRL release whose minimum transformers (4.55.0) defaults `optim` to adamw_torch_fused."""


def default_optim(trl_version: tuple[int, ...], transformers_version: str | None) -> str:
    """The `optim` a TRL ``trl_version`` run gets when its file sets none."""
    unstated = "adamw_torch_fused" if trl_version >= FUSED_DEFAULT_FROM else "adamw_torch"
    return OI.hf_default_optim(transformers_version, unstated)


def optimizer_fields(keys: Any, ds_optimizer: str | None, distribution: dict[str, Any],
                     notes: list[str] | None = None) -> dict[str, Any]:
    """`optimizer` (unless AdamW) and `optimizer_implementation` (where it changes the plan) of a
    reader's ``keys`` (`reader.Keys`: the TRL release and the stated transformers release); a
    value taken from the release's assumed transformers is noted in ``notes``."""
    optim = keys.get("optim")
    default = default_optim(keys.version, keys.transformers)
    out: dict[str, Any] = {}
    optimizer = hf_optimizer("optim", ds_optimizer or optim or default)
    if optimizer != "adamw":
        out["optimizer"] = optimizer
    implementation = OI.from_hf_optim(None if optim is None else str(optim), default, ds_optimizer, distribution)
    if implementation is not None:
        out["optimizer_implementation"] = implementation
        if optim is None and keys.transformers is None and notes is not None:
            notes.append(f"optim unset: {default} ({implementation} AdamW), transformers' default in the releases TRL "
                         f"{version_text(keys.version)} admits; add `# oomless: transformers==X` for another")
    return out


def optim_value(spec: Any, named: str | None, trl_version: tuple[int, ...]) -> str | None:
    """The `optim` a writer gives: ``named`` (the name of a non-AdamW optimizer), else the AdamW
    implementation's where leaving the key to the release's default would read back otherwise."""
    if named is not None:
        return named
    try:
        return OI.optim_to_write(spec.optimizer_implementation, spec.distribution,
                                 default_optim(trl_version, spec.transformers_version))
    except KeyError:
        cannot_express("optimizer_implementation", f"{spec.optimizer_implementation.value!r} cannot be written for TRL: "
                       "transformers has no per-parameter AdamW `optim` (adamw_hf is gone); allowed: foreach, fused")
        return None
