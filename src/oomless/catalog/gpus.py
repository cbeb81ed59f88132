"""GPU catalog: usable memory per device, from the shipped ``data/gpus.json``.

Capacity is what ``torch.cuda.get_device_properties(i).total_memory`` reports (the figure
in a CUDA OOM message's "total capacity of X GiB"), which is less than nvidia-smi's total.
Each entry says where its number comes from:

- ``measured``: ``_verified`` entry with a torch total quoted from a real OOM message;
- ``reported``: a torch total quoted but the GPU model not confirmed;
- ``derived``: no torch total; see ``capacity_rule``.
"""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

from .. import units
from ..errors import InputError, unknown_name_error

FIELD = "hardware.gpu"
CapacitySource = Literal["measured", "reported", "derived"]

VENDOR_WORDS = frozenset({"nvidia", "tesla", "geforce", "amd", "huawei"})
"""Dropped when matching names: ``NVIDIA GeForce RTX 3090`` matches ``RTX-3090``."""
FORM_FACTOR_WORDS = frozenset({"sxm", "sxm2", "sxm4", "sxm5", "pcie", "hbm3", "hbm3e", "nvl"})
"""Dropped when matching names: nvidia-smi's ``A100-SXM4-80GB`` matches ``A100-80GB``."""
CONSUMER_PREFIX = "RTX-"
"""``RTX-3090`` is also reachable as ``3090``."""
EXTRA_ALIASES = {"910b": "Ascend-910B", "mi300": "MI300X", "b200-192gb": "B200"}
"""Names the rules above do not derive."""


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model's memory as the planner sees it."""

    name: str
    """The catalog's descriptive name, e.g. ``A100-SXM4-80GB / A100-PCIE-80GB``."""
    id: str
    """Short canonical id, e.g. ``A100-80GB``."""
    capacity_bytes: int
    capacity_source: CapacitySource
    bf16: bool
    nvidia_smi_bytes: int | None
    notes: str


def _tokens(text: str) -> list[str]:
    return [t for t in re.split(r"[^0-9a-z]+", text.lower()) if t]


def _match_key(text: str) -> str:
    """Case/space/dash-insensitive key without vendor and form-factor words."""
    return "".join(t for t in _tokens(text) if t not in VENDOR_WORDS | FORM_FACTOR_WORDS)


def _without_parentheses(name: str) -> str:
    return re.sub(r"\(.*?\)", "", name)


def _canonical_id(name: str) -> str:
    """``Tesla V100-32GB`` → ``V100-32GB``; ``H20 (96GB)`` → ``H20``; first of ``a / b``."""
    head = _without_parentheses(name).split("/")[0]
    words = [w for w in re.split(r"[\s\-]+", head.strip()) if w]
    words = [w for w in words if w.lower() not in VENDOR_WORDS | FORM_FACTOR_WORDS]
    return "-".join(words)


@functools.lru_cache(maxsize=1)
def _entries() -> tuple[dict[str, Any], ...]:
    text = (resources.files("oomless.catalog") / "data" / "gpus.json").read_text("utf-8")
    return tuple(json.loads(text))


@functools.lru_cache(maxsize=1)
def _torch_to_smi_ratio() -> tuple[float, str]:
    """(R, id of the GPU giving it): min over verified entries of torch total / nvidia-smi."""
    ratios = [
        (e["torch_total_capacity_GiB"] * units.GiB / (e["nvidia_smi_MiB"] * units.MiB),
         _canonical_id(e["name"]))
        for e in _entries()
        if e.get("_verified") and e.get("torch_total_capacity_GiB") and e.get("nvidia_smi_MiB")
    ]
    assert ratios, "gpus.json has no verified entry with both torch and nvidia-smi totals"
    return min(ratios)


def capacity_rule() -> str:
    """The rule for ``derived`` capacities, with the ratio computed from the catalog."""
    ratio, gpu = _torch_to_smi_ratio()
    return (f"capacity = nvidia-smi total x {ratio:.5f} (the smallest torch/nvidia-smi ratio "
            f"among verified GPUs, {gpu}); without an nvidia-smi figure, the marketed GB read "
            f"as GiB x {ratio:.5f}")


def _capacity(entry: dict[str, Any]) -> tuple[int, CapacitySource]:
    """Torch-visible bytes and where they come from.

    Source: ``gpus.json`` (torch totals quoted from CUDA OOM messages).
    Assumes for ``derived``: torch sees the same fraction of nvidia-smi's total as the
    least favourable verified GPU (conservative; ``capacity_rule``).
    """
    torch_gib = entry.get("torch_total_capacity_GiB")
    if torch_gib is not None:
        source: CapacitySource = "measured" if entry.get("_verified") else "reported"
        return math.floor(torch_gib * units.GiB), source
    ratio, _ = _torch_to_smi_ratio()
    smi_mib = entry.get("nvidia_smi_MiB")
    total = smi_mib * units.MiB if smi_mib is not None else entry["marketing_GB"] * units.GiB
    return math.floor(total * ratio), "derived"


def _spec(entry: dict[str, Any]) -> GpuSpec:
    capacity, source = _capacity(entry)
    smi = entry.get("nvidia_smi_MiB")
    return GpuSpec(
        name=entry["name"],
        id=_canonical_id(entry["name"]),
        capacity_bytes=capacity,
        capacity_source=source,
        bf16=bool(entry["bf16"]),
        nvidia_smi_bytes=None if smi is None else smi * units.MiB,
        notes=str(entry.get("notes", "")),
    )


@functools.lru_cache(maxsize=1)
def _specs() -> dict[str, GpuSpec]:
    return {s.id: s for s in map(_spec, _entries())}


def _aliases_of(spec: GpuSpec, marketing_gb: int) -> set[str]:
    names = {spec.id, *_without_parentheses(spec.name).split("/")}
    names.add(spec.id.rsplit("-", 1)[0] if spec.id.upper().endswith("GB") else spec.id)  # bare "H100"; dropped if ambiguous (A100)
    if not spec.id.upper().endswith("GB"):
        names.add(f"{spec.id}-{marketing_gb}GB")
    if spec.id.startswith(CONSUMER_PREFIX):
        names.add(spec.id[len(CONSUMER_PREFIX):])
    return {_match_key(n) for n in names}


@functools.lru_cache(maxsize=1)
def _alias_table() -> dict[str, str]:
    """match key → id; keys claimed by two GPUs are dropped as ambiguous."""
    claims: dict[str, set[str]] = {}
    for entry in _entries():
        spec = _specs()[_canonical_id(entry["name"])]
        for key in _aliases_of(spec, int(entry["marketing_GB"])):
            claims.setdefault(key, set()).add(spec.id)
    for alias, gpu in EXTRA_ALIASES.items():
        claims.setdefault(_match_key(alias), set()).add(gpu)
    return {k: next(iter(v)) for k, v in claims.items() if len(v) == 1}


def gpu_ids() -> list[str]:
    """Canonical ids of the catalog's GPUs, in catalog order."""
    return list(_specs())


def load_gpu(name: str) -> GpuSpec:
    """A GPU by id or alias (``A100-80GB``, ``a100 80gb``, ``rtx3090``, ``3090``, ``h20-96gb``).

    Unknown names raise ``InputError("hardware.gpu", ...)`` listing the closest ids.
    """
    gpu = _alias_table().get(_match_key(name))
    if gpu is None:
        several = [g for g in gpu_ids() if _match_key(g).startswith(_match_key(name)) and _match_key(name)]
        if len(several) > 1:
            raise InputError(FIELD, f"{name!r} is ambiguous; say which: {', '.join(several)}")
        raise unknown_name_error(FIELD, name, gpu_ids())
    return _specs()[gpu]
