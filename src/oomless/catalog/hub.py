"""The one place oomless touches the Hugging Face Hub: the local cache, small files, metadata.

Only ``config.json``, ``preprocessor_config.json`` and ``adapter_config.json`` are ever
downloaded, and safetensors *headers* read by ``get_safetensors_metadata`` (a ranged request
of the first bytes); weights never. Everything goes through ``huggingface_hub``, imported
lazily so ``oomless plan`` on a catalog id stays fast.

Environment, read at every call (not at import), with huggingface_hub's meaning:
``HF_HUB_OFFLINE`` (no network at all), ``HF_HUB_CACHE`` / ``HF_HOME`` (where the cache is),
``HF_ENDPOINT`` (a mirror), ``HF_TOKEN`` (gated repos, read by huggingface_hub itself).
Source: huggingface_hub docs, "Environment variables" (package_reference/environment_variables).

A host that cannot be reached is noticed once per process by a plain TCP connect with a short
timeout (``REACHABILITY_TIMEOUT_S``), because huggingface_hub retries a failing request with
back-off for ~20 s (measured here: 23.4 s for one ``hf_hub_download`` without DNS, hub 2.4.0).
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

ALLOWED_FILES = frozenset({"config.json", "preprocessor_config.json", "adapter_config.json"})
DEFAULT_ENDPOINT = "https://huggingface.co"
REACHABILITY_TIMEOUT_S = 3.0
ETAG_TIMEOUT_S = 5.0
METADATA_TIMEOUT_S = 10.0
_TRUE = {"1", "on", "yes", "true"}


class HubUnavailable(Exception):
    """The Hub could not answer (offline, unreachable, not found, gated); ``str`` says which."""


def offline() -> bool:
    """HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) now, or as huggingface_hub read it at import."""
    if any(os.environ.get(k, "").strip().lower() in _TRUE for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")):
        return True
    from huggingface_hub import constants

    return bool(constants.is_offline_mode())


def endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", "").strip().rstrip("/") or DEFAULT_ENDPOINT


def cache_dir() -> Path:
    """HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
    ~/.cache/huggingface/hub (huggingface_hub's rule)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "huggingface" / "hub"


_PLAIN_REPO_ID = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9])?/)?[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9])?")
"""A subset of huggingface_hub's ``REPO_ID_REGEX`` (utils/_validators.py, hub 2.4.0): ASCII
parts of 1-96 characters that start and end with a letter or digit, at most one ``/``."""


def repo_cache_folder(repo_id: str) -> Path:
    """The cache folder of a model repo, ``models--{org}--{name}`` (huggingface_hub's cache
    layout, ``file_download.repo_folder_name``; docs "Understand caching")."""
    return cache_dir() / ("models--" + repo_id.replace("/", "--"))


def looks_like_repo_id(ref: str) -> bool:
    """``org/name`` or ``name`` with the Hub's allowed characters (huggingface_hub's
    ``validate_repo_id``), so a mistyped local path is not sent to the Hub. A plain ASCII name
    (`_PLAIN_REPO_ID`, which that rule always accepts) is answered without importing
    huggingface_hub (its errors module pulls in its HTTP client: most of a plan's start-up)."""
    if _PLAIN_REPO_ID.fullmatch(ref) and "--" not in ref and ".." not in ref and not ref.endswith(".git"):
        return True
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(ref)
    except HFValidationError:
        return False
    return True


def cached_file(repo_id: str, filename: str, revision: str | None) -> Path | None:
    """A file of a model repo in the local cache, or None. Never touches the network; does not
    import huggingface_hub when the cache holds nothing of the repo."""
    if not repo_cache_folder(repo_id).is_dir():
        return None
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(repo_id, filename, cache_dir=cache_dir(), revision=revision)
    return Path(found) if isinstance(found, str) else None


def cached_snapshot_files(config_path: Path, suffix: str) -> list[Path]:
    """Files ending in ``suffix`` beside a cached or local config.json (weights the user has)."""
    return sorted(p for p in config_path.parent.iterdir() if p.name.endswith(suffix) and p.is_file())


@functools.lru_cache(maxsize=8)
def _reachable(url: str) -> bool:
    import socket  # only when the Hub is asked (a plan of a catalog model never is)

    parsed = urlparse(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        with socket.create_connection((parsed.hostname or "", port), timeout=REACHABILITY_TIMEOUT_S):
            return True
    except OSError:
        return False


def _check_online() -> str:
    if offline():
        raise HubUnavailable("HF_HUB_OFFLINE is set")
    url = endpoint()
    if not _reachable(url):
        raise HubUnavailable(f"{url} is not reachable")
    return url


def _explain(err: Exception, repo_id: str, what: str) -> HubUnavailable:
    from huggingface_hub import errors

    if isinstance(err, (errors.OfflineModeIsEnabled, errors.LocalEntryNotFoundError)):
        return HubUnavailable(f"the Hub could not be reached for {repo_id} (offline mode or no connection)")
    if isinstance(err, errors.GatedRepoError):
        return HubUnavailable(f"{repo_id} is gated: accept its licence on the Hub and set HF_TOKEN")
    if isinstance(err, errors.RepositoryNotFoundError):
        return HubUnavailable(f"no model repo {repo_id!r} on the Hub (or it is private: set HF_TOKEN)")
    if isinstance(err, errors.RevisionNotFoundError):
        return HubUnavailable(f"{repo_id} has no such revision")
    if isinstance(err, errors.EntryNotFoundError):
        return HubUnavailable(f"{repo_id} has no {what}")
    return HubUnavailable(f"the Hub did not answer for {repo_id} ({type(err).__name__})")


def download(repo_id: str, filename: str, revision: str | None) -> Path:
    """``filename`` (config-sized files only) into the cache; raises ``HubUnavailable``."""
    if filename not in ALLOWED_FILES:
        raise ValueError(f"oomless downloads only {sorted(ALLOWED_FILES)}, not {filename!r}")
    url = _check_online()
    from huggingface_hub import hf_hub_download

    try:
        return Path(hf_hub_download(repo_id, filename, revision=revision, cache_dir=cache_dir(),
                                    endpoint=url, etag_timeout=ETAG_TIMEOUT_S))
    except Exception as err:  # huggingface_hub raises many kinds; each becomes one line
        raise _explain(err, repo_id, filename) from err


def safetensors_tensors(repo_id: str, revision: str | None) -> dict[str, dict[str, Any]]:
    """Every tensor's dtype and shape from the repo's safetensors headers, as one
    header-shaped dict (``{name: {"dtype", "shape"}}``); no weights are fetched.

    Source: huggingface_hub ``HfApi.get_safetensors_metadata`` (ranged reads of each file's
    header; ``files_metadata[file].tensors``)."""
    url = _check_online()
    from huggingface_hub import HfApi

    try:
        meta: Any = HfApi(endpoint=url).get_safetensors_metadata(repo_id, revision=revision,
                                                                 timeout=METADATA_TIMEOUT_S)
    except Exception as err:
        raise _explain(err, repo_id, "safetensors weights") from err
    return {name: {"dtype": str(info.dtype), "shape": list(info.shape)}
            for file in meta.files_metadata.values() for name, info in file.tensors.items()}
