"""Open a page in headless Chromium and report what a user's browser would: console errors,
uncaught exceptions, network requests, values of expressions, a screenshot.

Speaks the DevTools protocol over `--remote-debugging-pipe` (Chromium reads commands on fd 3
and writes replies on fd 4, each a JSON message ended by NUL), so it needs neither Playwright,
a websocket library nor a network port. Chromium is Debian's `chromium` package.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--remote-debugging-pipe",
)
TIMEOUT_S = 30.0


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class PageReport:
    errors: list[str] = field(default_factory=list)
    """Uncaught exceptions, console.error/console.assert, and error log entries (failed loads)."""
    requests: list[str] = field(default_factory=list)
    """Every URL the page requested (the page itself included)."""
    values: dict[str, Any] = field(default_factory=dict)
    screenshot_png: bytes = b""


class _Pipe:
    def __init__(self, command: list[str]) -> None:
        to_child, self._to_chromium = os.pipe()
        self._from_chromium, from_child = os.pipe()

        def fds_3_and_4() -> None:  # runs in the child, before exec
            a, b = os.dup(to_child), os.dup(from_child)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.process = subprocess.Popen(
            command, pass_fds=(3, 4), preexec_fn=fds_3_and_4, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        os.close(to_child)
        os.close(from_child)
        self._buffer, self._next_id, self.events = b"", 0, []

    def _receive(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._from_chromium], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self._from_chromium, 1 << 16)
            if not chunk:
                raise EOFError("chromium closed the DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_chromium, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            reply = self._receive(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while not any(e.get("method") == method for e in self.events):
            self.events.append(self._receive(deadline))

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (OSError, EOFError, TimeoutError, RuntimeError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._to_chromium)
        os.close(self._from_chromium)


def _errors(events: list[dict[str, Any]]) -> list[str]:
    out = []
    for e in events:
        method, params = e.get("method"), e.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            out.append(f"exception: {details.get('exception', {}).get('description') or details.get('text')}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert", "warning"):
            out.append(f"console.{params['type']}: " + " ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
        elif method == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
            out.append(f"log {params['entry']['level']}: {params['entry']['text']} {params['entry'].get('url', '')}")
    return out


def open_page(page: Path, expressions: dict[str, str], width: int = 1400, height: int = 1000) -> PageReport:
    """Load ``page`` (a local file) offline, evaluate ``expressions`` (name → JavaScript whose
    value is returned as JSON) and take a screenshot."""
    binary = chromium_path()
    assert binary, "chromium is not installed"
    with tempfile.TemporaryDirectory(prefix="oomless-chromium-") as profile:
        pipe = _Pipe([binary, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}", "about:blank"])
        try:
            target = pipe.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = pipe.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Runtime", "Log", "Page", "Network"):
                pipe.call(f"{domain}.enable", session=session)
            pipe.call("Emulation.setDeviceMetricsOverride",
                      {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session=session)
            pipe.call("Page.navigate", {"url": page.resolve().as_uri()}, session=session)
            pipe.wait_for("Page.loadEventFired")
            report = PageReport()
            for name, expression in expressions.items():
                result = pipe.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=session)
                if "exceptionDetails" in result:
                    report.errors.append(f"evaluating {name}: {result['exceptionDetails'].get('text')}")
                report.values[name] = result.get("result", {}).get("value")
            shot = pipe.call("Page.captureScreenshot", {"format": "png"}, session=session)
            report.screenshot_png = base64.b64decode(shot["data"])
            report.errors += _errors(pipe.events)
            report.requests = [e["params"]["request"]["url"] for e in pipe.events if e.get("method") == "Network.requestWillBeSent"]
            return report
        finally:
            pipe.close()
