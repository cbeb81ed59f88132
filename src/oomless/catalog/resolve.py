"""Find a model's config.json from whatever the user named, and read it into a ``ModelArch``.

Order (the same for ``model``, ``critic.model``, ``reward_model.model`` and every adapter):

1. a local directory (a checkpoint as frameworks save it) or a config.json path; a PEFT adapter
   folder (``adapter_config.json``) resolves to its ``base_model_name_or_path``;
2. the Hugging Face cache (``HF_HUB_CACHE``/``HF_HOME``, at ``revision``);
3. the Hub, config.json only (plus preprocessor_config.json for VLMs), when online: cached;
4. the shipped catalog (``catalog/data/models``, the Hub's config.json files with sources).

A path that does not exist here (a cluster path in a launch script) is tried by its last
component against 2-4, with a note. Exact parameter counts come from safetensors headers:
local files the user has (headers only), or the Hub's metadata when online. Offline with
nothing found, one ``InputError`` says where it looked and how to pass a config.json.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from importlib import resources
from pathlib import Path
from typing import Any

from .. import safe_paths as SP
from ..errors import InputError, closest_names
from ..safe_json import load_json
from . import hub
from .checkpoint import (MAX_SAFETENSORS_HEADER_BYTES, SAFETENSORS_HEADER_LENGTH_BYTES, CheckpointInfo,
                         merge_counts, parameter_counts_from_header, quantization_from_config)
from .hf_config import FIELD
from .models import ModelArch, arch_from_config

CONFIG_FILE_NAME = "config.json"
ADAPTER_FILE_NAME = "adapter_config.json"
PREPROCESSOR_FILE_NAME = "preprocessor_config.json"
ADAPTER_BASE_KEY = "base_model_name_or_path"
CATALOG_ID_SEPARATOR = "/"
CATALOG_STEM_SEPARATOR = "--"
CATALOG_META_KEYS = ("_sources",)
MAX_ADAPTER_DEPTH = 4


# --- the shipped catalog --------------------------------------------------------------------


def _catalog_dir() -> Any:
    return resources.files("oomless.catalog") / "data" / "models"


@functools.lru_cache(maxsize=1)
def _catalog_stems() -> tuple[str, ...]:
    return tuple(sorted(p.name[: -len(".json")] for p in _catalog_dir().iterdir() if p.name.endswith(".json")))


def _stem_to_id(stem: str) -> str:
    return stem.replace(CATALOG_STEM_SEPARATOR, CATALOG_ID_SEPARATOR, 1)


def catalog_ids() -> list[str]:
    """Ids of the shipped models, e.g. ``Qwen/Qwen2.5-7B-Instruct``."""
    return [_stem_to_id(s) for s in _catalog_stems()]


def catalog_config(model_id: str) -> dict[str, Any]:
    """The shipped config.json of a catalog id (with its ``_sources``)."""
    stem = _catalog_stem(model_id)
    if stem is None:
        raise InputError(FIELD, f"{model_id!r} is not in the shipped catalog")
    return _parse_json((_catalog_dir() / f"{stem}.json").read_text(encoding="utf-8"), f"catalog:{stem}.json")


def _catalog_stem(ref: str) -> str | None:
    """Stem matching an id, a stem, or an unambiguous bare name (case-insensitive)."""
    key = ref.strip().lower().replace(CATALOG_ID_SEPARATOR, CATALOG_STEM_SEPARATOR, 1)
    by_lower = {s.lower(): s for s in _catalog_stems()}
    if key in by_lower:
        return by_lower[key]
    bare = [s for s in _catalog_stems() if s.lower().split(CATALOG_STEM_SEPARATOR, 1)[-1] == ref.strip().lower()]
    return bare[0] if len(bare) == 1 else None


def load_catalog_model(model_id: str) -> ModelArch:
    """A shipped model only (no cache, no Hub): ``oomless models`` lists the catalog with it."""
    stem = _catalog_stem(model_id)
    if stem is None:
        raise InputError(FIELD, f"{model_id!r} is not in the shipped catalog")
    return _load_catalog(stem)


@functools.cache
def _load_catalog(stem: str) -> ModelArch:
    source = f"catalog:{stem}.json"
    config = _parse_json((_catalog_dir() / f"{stem}.json").read_text(encoding="utf-8"), source)
    return _with_checkpoint(arch_from_config(config, _stem_to_id(stem), source), config, CheckpointInfo(where=source))


# --- reading files --------------------------------------------------------------------------


def _parse_json(text: str, where: str) -> Any:
    try:
        return load_json(text, where)
    except InputError as err:
        raise InputError(FIELD, f"{where} is {err.message}"
                         if err.message.startswith("not valid JSON") else f"{where}: {err.message}") from None


def _read_json(file: Path) -> Any:
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(FIELD, f"cannot read {str(file)!r}: {getattr(err, 'strerror', None) or err}") from err
    return _parse_json(text, str(file))


def _safetensors_counts(folder: Path, num_layers: int) -> tuple[tuple[tuple[str, int], ...], str]:
    """Exact parameters per dtype from the headers of the ``*.safetensors`` files in
    ``folder`` (the first 8 + N bytes of each; tensors are never read)."""
    files = hub.cached_snapshot_files(folder / CONFIG_FILE_NAME, ".safetensors")
    parts = []
    for file in files:
        try:
            with file.open("rb") as handle:
                length = int.from_bytes(handle.read(SAFETENSORS_HEADER_LENGTH_BYTES), "little")
                if not 0 < length <= MAX_SAFETENSORS_HEADER_BYTES:
                    return (), ""
                parts.append(parameter_counts_from_header(json.loads(handle.read(length)), num_layers))
        except (OSError, ValueError, UnicodeDecodeError, RecursionError):
            return (), ""
    return (merge_counts(parts), f"safetensors headers of {len(files)} file(s) in {folder}") if parts else ((), "")


def _with_checkpoint(arch: ModelArch, config: dict[str, Any], info: CheckpointInfo) -> ModelArch:
    quant = quantization_from_config(config)
    notes = info.notes
    if quant is not None:
        notes += (f"{arch.name}: pre-quantized checkpoint ({quant.describe()}); frozen weights planned at "
                  f"{quant.bits_per_weight:.3g} bits per quantized weight",)
    return dataclasses.replace(arch, checkpoint=dataclasses.replace(info, quantization=quant, notes=notes))


# --- the resolution order -------------------------------------------------------------------


def _load_config_file(file: Path, name: str, where: str, revision: str | None, depth: int) -> ModelArch:
    config = _read_json(file)
    if file.name == ADAPTER_FILE_NAME or (isinstance(config, dict) and ADAPTER_BASE_KEY in config and "model_type" not in config):
        return _load_adapter(config, file, where, revision, depth)
    arch = arch_from_config(config, name, str(file))
    counts, counted_from = _safetensors_counts(file.parent, arch.num_layers) if file.name == CONFIG_FILE_NAME else ((), "")
    return _with_checkpoint(arch, config, CheckpointInfo(where=where, parameter_counts=counts, parameter_count_source=counted_from))


def _load_adapter(config: Any, file: Path, where: str, revision: str | None, depth: int) -> ModelArch:
    base = config.get(ADAPTER_BASE_KEY) if isinstance(config, dict) else None
    if not isinstance(base, str) or not base.strip():
        raise InputError(FIELD, f"{file} is a PEFT adapter without {ADAPTER_BASE_KEY!r}; name the base model instead")
    if depth >= MAX_ADAPTER_DEPTH:
        raise InputError(FIELD, f"{file}: adapters name each other more than {MAX_ADAPTER_DEPTH} deep")
    arch = _resolve(base, revision if where.startswith(("hub:", "hf-cache:")) else None, depth + 1)
    info = arch.checkpoint or CheckpointInfo(where=arch.source)
    note = f"{where} is a PEFT adapter: planned on its base model {base}"
    return dataclasses.replace(arch, checkpoint=dataclasses.replace(info, adapter_of=where, notes=info.notes + (note,)))


def _load_local(path: Path, ref: str, revision: str | None, depth: int) -> ModelArch:
    if path.is_dir():
        for name in (CONFIG_FILE_NAME, ADAPTER_FILE_NAME):
            if (path / name).is_file():
                return _load_config_file(path / name, ref, f"local:{path}", revision, depth)
        raise InputError(FIELD, f"directory {ref!r} has neither {CONFIG_FILE_NAME} nor {ADAPTER_FILE_NAME}")
    return _load_config_file(path, ref, f"local:{path}", revision, depth)


def _from_cache(repo_id: str, revision: str | None, depth: int) -> ModelArch | None:
    rev = revision or "main"
    for name in (CONFIG_FILE_NAME, ADAPTER_FILE_NAME):
        found = hub.cached_file(repo_id, name, revision)
        if found is not None:
            return _load_config_file(found, repo_id, f"hf-cache:{repo_id}@{rev}", revision, depth)
    return None


def _from_hub(repo_id: str, revision: str | None, depth: int, tried: list[str]) -> ModelArch | None:
    rev = revision or "main"
    try:
        file = hub.download(repo_id, CONFIG_FILE_NAME, revision)
    except hub.HubUnavailable as err:
        if "has no config.json" not in str(err):
            tried.append(f"Hub not asked: {err}" if "HF_HUB_OFFLINE" in str(err) or "reachable" in str(err) else f"Hub: {err}")
            return None
        try:
            file = hub.download(repo_id, ADAPTER_FILE_NAME, revision)
        except hub.HubUnavailable as err2:
            tried.append(f"Hub: {err2}")
            return None
    arch = _load_config_file(file, repo_id, f"hub:{repo_id}@{rev}", revision, depth)
    if arch.vision is not None:
        try:
            hub.download(repo_id, PREPROCESSOR_FILE_NAME, revision)
        except hub.HubUnavailable:
            pass  # image limits then come from the spec's vision section alone
    return _with_hub_counts(arch, repo_id, revision)


def _with_hub_counts(arch: ModelArch, repo_id: str, revision: str | None) -> ModelArch:
    info = arch.checkpoint
    if info is None or info.parameter_counts or info.adapter_of:
        return arch
    try:
        counts = parameter_counts_from_header(hub.safetensors_tensors(repo_id, revision), arch.num_layers)
    except (hub.HubUnavailable, ValueError):
        return arch
    if not counts:
        return arch
    source = f"safetensors metadata of {repo_id}@{revision or 'main'} on the Hub"
    return dataclasses.replace(arch, checkpoint=dataclasses.replace(
        info, parameter_counts=tuple(sorted(counts.items())), parameter_count_source=source))


def _not_found(ref: str, tried: list[str]) -> InputError:
    near = closest_names(ref, catalog_ids())
    hint = f" (closest catalog ids: {', '.join(near)})" if near else ""
    return InputError(FIELD, f"{SP.shown(ref)} not found: {'; '.join(tried)}; not in the shipped catalog"
                      f"{hint}; pass a local folder or a config.json path (model: ./my-model/config.json)")


def _resolve(ref: str, revision: str | None, depth: int) -> ModelArch:
    ref = ref.strip()
    if not ref:
        raise InputError(FIELD, "empty model name; give a Hub id, a local folder or a config.json path")
    problem = SP.path_problem(ref)
    if problem is not None:
        raise InputError(FIELD, f"{SP.shown(ref)} {problem}; give a Hub id, a local folder or a config.json path")
    path = SP.expand_user(ref)
    if SP.exists(path):
        return _load_local(path, ref, revision, depth)
    tried = ["no such local path"]
    names = [ref]
    if len(path.parts) > 2 or path.is_absolute() or ref.startswith((".", "~")):
        names = [path.name]  # a cluster path: the folder's name is what can be looked up here
    for name in names:
        if hub.looks_like_repo_id(name):
            arch = _from_cache(name, revision, depth)
            if arch is None:
                tried.append(f"not in the HF cache {hub.cache_dir()}")
            if arch is None and CATALOG_ID_SEPARATOR in name:
                arch = _from_hub(name, revision, depth, tried)
            if arch is not None:
                return _noted(arch, ref, name)
        stem = _catalog_stem(name)
        if stem is not None:
            return _noted(_load_catalog(stem), ref, name)
    alias = modelscope_alias(ref)
    if alias is not None and depth < MAX_ADAPTER_DEPTH:
        try:
            arch = _resolve(alias, revision, depth + 1)
        except InputError:
            raise _not_found(ref, [*tried, f"ModelScope id of {alias!r} (ms-swift's model registry), not found either"]) from None
        return _with_note(arch, f"{ref!r} is ModelScope's id of {alias!r} (ms-swift's model registry): planned as that model")
    raise _not_found(ref, tried)


@functools.cache
def _modelscope_aliases() -> dict[str, str]:
    data = _parse_json((resources.files(__package__) / "data" / "modelscope_aliases.json").read_text(encoding="utf-8"),
                       "catalog:modelscope_aliases.json")
    return {k.lower(): v for k, v in data["aliases"].items()}


def modelscope_alias(ref: str) -> str | None:
    """The Hugging Face id ms-swift's model registry pairs with ModelScope id ``ref`` (ms-swift
    downloads from ModelScope by default, so its scripts name those ids), or None.
    Source: `catalog/data/modelscope_aliases.json`, written by scripts/modelscope_aliases.py."""
    return _modelscope_aliases().get(ref.strip().lower())


def _with_note(arch: ModelArch, note: str) -> ModelArch:
    info = arch.checkpoint or CheckpointInfo(where=arch.source)
    return dataclasses.replace(arch, checkpoint=dataclasses.replace(info, notes=info.notes + (note,)))


def _noted(arch: ModelArch, ref: str, name: str) -> ModelArch:
    if name == ref:
        return arch
    info = arch.checkpoint or CheckpointInfo(where=arch.source)
    return _with_note(arch, f"model path {ref!r} does not exist here; planned as {arch.name} ({info.where}) by its folder name")


def load_model(ref: str, revision: str | None = None) -> ModelArch:
    """A model by local folder or config.json path, Hub id (cache, then Hub), catalog id, file
    stem or bare catalog name. A local path that exists wins over an id of the same spelling
    (as in ``from_pretrained``). Nothing found: ``InputError`` naming where it looked."""
    return _resolve(ref, revision, 0)
