"""Adapters to the configs of other frameworks: read them into a run spec, write a spec back.

One module per framework (`swift`, `trl`, `verl`, `easyr1`, `openrlhf`, `orz`, `vlmr1`), each a set of
pure functions with golden-file tests and version notes. Core code never branches on a
framework's name; the CLI reaches a framework only through `import_native` / `export_native`.

A framework module provides:
    SUPPORTED_VERSIONS: str                          # the version range its defaults follow
    def import_config(path: Path, hardware: HardwareFlags) -> ImportResult
    def export_spec(spec: RunSpec, out_dir: Path, force: bool) -> list[Path]
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError

FRAMEWORKS = ("swift", "trl", "verl", "easyr1", "openrlhf", "orz", "vlmr1")


@dataclass(frozen=True)
class HardwareFlags:
    """Hardware the framework's config does not say, from CLI flags (`--gpu`, ...)."""

    gpu: str | None = None
    gpus_per_node: int | None = None
    num_nodes: int | None = None
    host_ram_gib: float | None = None


@dataclass(frozen=True)
class ImportResult:
    """A spec as a plain dict (validated later like any YAML spec) and what was not used."""

    spec: dict[str, Any]
    ignored: tuple[str, ...] = field(default_factory=tuple)
    """Flags/keys not understood, or understood but without effect on memory, one line each."""
    notes: tuple[str, ...] = field(default_factory=tuple)
    """Defaults applied and assumptions made, one line each."""


def _module(framework: str) -> Any:
    if framework not in FRAMEWORKS:
        raise InputError("--from", f"unknown framework {framework!r}; allowed: {', '.join(FRAMEWORKS)}")
    try:
        return importlib.import_module(f"{__name__}.{framework}")
    except ModuleNotFoundError as err:
        if err.name == f"{__name__}.{framework}":
            raise InputError("--from", f"framework {framework!r} has no adapter yet") from None
        raise


def import_native(framework: str, path: Path, hardware: HardwareFlags) -> ImportResult:
    if not path.exists():
        raise InputError(str(path), "no such file")
    return _module(framework).import_config(path, hardware)


def export_native(framework: str, spec: Any, out_dir: Path, force: bool) -> list[Path]:
    return _module(framework).export_spec(spec, out_dir, force)
