"""A local fake of the Hugging Face Hub's file layout, for tests without network.

- ``make_cache_entry``: the on-disk cache layout huggingface_hub writes
  (``models--org--name/{blobs,snapshots/<sha>,refs/<branch>}``), so ``try_to_load_from_cache``
  finds files in it exactly as it finds real downloads.
- ``FakeHub``: an HTTP server answering the endpoints ``hf_hub_download`` and
  ``get_safetensors_metadata`` use (HEAD/GET ``/{repo}/resolve/{revision}/{file}`` with the
  X-Repo-Commit / ETag headers, Range requests for safetensors headers, X-Error-Code on 404s),
  served on 127.0.0.1 and selected with ``HF_ENDPOINT``. Every request is logged so a test can
  check that weights were never fetched.
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

FAKE_COMMIT = "0123456789abcdef0123456789abcdef01234567"


def safetensors_bytes(tensors: dict[str, tuple[str, list[int]]], payload: bool = True) -> bytes:
    """A safetensors file: 8-byte header length, JSON header, then (zero) tensor data."""
    itemsize = {"BF16": 2, "F16": 2, "F32": 4, "I8": 1, "U8": 1, "I32": 4, "F8_E4M3": 1}
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        size = itemsize[dtype]
        for d in shape:
            size *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + (bytes(offset) if payload else b"")


def make_cache_entry(cache: Path, repo_id: str, files: dict[str, bytes], branch: str = "main",
                     commit: str = FAKE_COMMIT) -> Path:
    """Write ``files`` into an HF cache at ``cache`` as a download of ``repo_id`` would."""
    repo_dir = cache / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo_dir / "snapshots" / commit
    (repo_dir / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        blob = repo_dir / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        link = snapshot / name
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.exists():
            link.symlink_to(blob)
    (repo_dir / "refs").mkdir(exist_ok=True)
    (repo_dir / "refs" / branch).write_text(commit)
    return snapshot


class FakeHub:
    """Serve ``repos`` = {repo_id: {filename: bytes}} like the Hub's resolve endpoint."""

    def __init__(self, repos: dict[str, dict[str, bytes]], gated: frozenset[str] = frozenset()) -> None:
        self.repos, self.gated = repos, gated
        self.requests: list[tuple[str, str, str | None]] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_HEAD(self) -> None:  # noqa: N802 - http.server's naming
                hub._answer(self, body=False)

            def do_GET(self) -> None:  # noqa: N802
                hub._answer(self, body=True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FakeHub:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def fetched(self) -> list[str]:
        return [path for method, path, _ in self.requests if method == "GET"]

    def _answer(self, req: BaseHTTPRequestHandler, body: bool) -> None:
        self.requests.append((req.command, req.path, req.headers.get("Range")))
        match = re.fullmatch(r"/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)", req.path.split("?")[0])
        repo = self.repos.get(match["repo"]) if match else None
        if match is None or repo is None:
            return self._error(req, 404, "RepoNotFound")
        if match["repo"] in self.gated:
            return self._error(req, 403, "GatedRepo")
        if match["rev"] not in ("main", FAKE_COMMIT):
            return self._error(req, 404, "RevisionNotFound")
        data = repo.get(match["file"])
        if data is None:
            return self._error(req, 404, "EntryNotFound")
        status, chunk = 200, data
        ranged = re.fullmatch(r"bytes=(\d+)-(\d*)", req.headers.get("Range", ""))
        if ranged:
            start, end = int(ranged[1]), int(ranged[2] or len(data) - 1)
            status, chunk = 206, data[start:end + 1]
        req.send_response(status)
        req.send_header("X-Repo-Commit", FAKE_COMMIT)
        req.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
        req.send_header("Content-Length", str(len(chunk)))
        req.end_headers()
        if body:
            req.wfile.write(chunk)

    @staticmethod
    def _error(req: BaseHTTPRequestHandler, status: int, code: str) -> None:
        payload = json.dumps({"error": code}).encode()
        req.send_response(status)
        req.send_header("X-Error-Code", code)
        req.send_header("Content-Type", "application/json")
        req.send_header("Content-Length", str(len(payload)))
        req.end_headers()
        if req.command == "GET":
            req.wfile.write(payload)
