"""Adapters to the configs of other frameworks: read them into a run spec, write a spec back.

One package per framework (`swift`, `trl`, `verl`, `easyr1`, `openrlhf`, `orz`, `vlmr1`), each
holding its `reader` (config → spec), `writer` (spec → config) and `keys` (the framework's key or
flag table with defaults and sources); pure functions with golden-file tests and version notes.
The reader never imports the writer. Scripts, flags, Hydra configs and versions are read by the
shared `oomless.frontends`; `common`, `_native`, `args`, `deepspeed_json` and `round_trip` are
what several adapters share. Core code never branches on a framework's name and the planner
never imports an adapter; the CLI reaches a framework only through `import_native` /
`export_native`. Names accepted for `--from`: the package names and the aliases in `ALIASES`.

A framework package provides:
    SUPPORTED_VERSIONS: str                          # the version range its defaults follow
    SPEC_SOURCES: dict[str, str]                     # spec field → native key(s)
    def import_config(path: Path, hardware: HardwareFlags) -> ImportResult
    def export_spec(spec: RunSpec, out_dir: Path, force: bool) -> list[Path]
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError
from .. import safe_paths as SP
from ..spec.dataset import DataRef

FRAMEWORKS = ("swift", "trl", "verl", "easyr1", "openrlhf", "orz", "vlmr1")
ALIASES = {"ms-swift": "swift", "ms_swift": "swift", "open-reasoner-zero": "orz", "open_reasoner_zero": "orz",
           "vlm-r1": "vlmr1", "vlm_r1": "vlmr1"}
"""Other spellings of a framework's name (its PyPI or repository name)."""


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
    idle_engine: dict[str, Any] = field(default_factory=dict)
    """For a run that generates with HF: the rollout fields of the vLLM engine the framework
    would build were vLLM turned on (its release's vLLM, weight sync, engine size). They have no
    effect on the run's plan; `fit --from` starts from them when it moves generation to vLLM."""
    data: DataRef | None = None
    """The training data the config names, when it names one (`plan --data auto`)."""


def canonical(framework: str) -> str:
    """The adapter name of ``framework`` (case-insensitive; `ms-swift` → `swift`, `open-reasoner-zero` → `orz`)."""
    name = framework.strip().lower()
    name = ALIASES.get(name, name)
    if name not in FRAMEWORKS:
        allowed = ", ".join([*FRAMEWORKS, *ALIASES])
        raise InputError("--from", f"unknown framework {framework!r}; allowed: {allowed}")
    return name


def _module(framework: str) -> Any:
    framework = canonical(framework)
    try:
        return importlib.import_module(f"{__name__}.{framework}")
    except ModuleNotFoundError as err:
        if err.name == f"{__name__}.{framework}":
            raise InputError("--from", f"framework {framework!r} has no adapter yet") from None
        raise


def spec_sources(framework: str) -> dict[str, str]:
    """Spec field → the framework's native key(s) it is read from (see `oomless import`)."""
    return dict(getattr(_module(framework), "SPEC_SOURCES", {}))


def import_native(framework: str, path: Path, hardware: HardwareFlags) -> ImportResult:
    if not SP.exists(SP.checked_path(str(path), "file")):
        raise InputError(str(path), "no such file")
    result = _module(framework).import_config(path, hardware)
    _transformers_directive(path, result.spec)
    return result


def _transformers_directive(path: Path, spec: dict[str, Any]) -> None:
    """`# oomless: transformers==X` in any framework's file gives the spec's
    `transformers_version` (no framework config names the release it runs)."""
    from .common import read_directives, read_text

    version = read_directives(read_text(path), str(path)).get("transformers")
    if version is not None and "transformers_version" not in spec:
        spec["transformers_version"] = version


def export_native(framework: str, spec: Any, out_dir: Path, force: bool) -> list[Path]:
    """Write the framework's files; a spec with fields the framework cannot say is refused
    with one message naming every such field (rendered first, nothing written)."""
    from . import common

    module = _module(framework)
    render = getattr(importlib.import_module(f"{module.__name__}.writer"), "render_files", None)
    if render is not None:
        with common.collect_unexpressed() as found:
            render(spec)
        if found:
            named = dict(found)
            first, why = next(iter(named.items()))
            more = "".join(f"; {field}: {reason}" for field, reason in list(named.items())[1:])
            raise InputError(first, why + (f" (and {len(named) - 1} more field(s) {framework} cannot express{more})" if more else ""))
    return module.export_spec(spec, out_dir, force)
