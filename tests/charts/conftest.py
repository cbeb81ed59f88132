"""Plan documents of the shipped examples, and a PNG reader for chart tests."""

from __future__ import annotations

import io
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from oomless.planner.plan import make_plan
from oomless.planner.report import plan_to_dict
from oomless.spec.load import load_run
from tests.helpers import EXAMPLES

SEEDS = EXAMPLES / "seeds"
EXAMPLE_SPECS = sorted(SEEDS.glob("*.yaml")) + [EXAMPLES / "quickstart.yaml"]


def plan_document(path: Path) -> dict[str, Any]:
    run = load_run(path)
    return plan_to_dict(make_plan(run.spec, run.arch, run.gpu, run.archs), run.warnings)


@pytest.fixture(scope="session")
def documents() -> dict[str, dict[str, Any]]:
    """Plan document of every shipped example, by file stem."""
    return {p.stem: plan_document(p) for p in EXAMPLE_SPECS}


def png_pixels(data: bytes) -> tuple[tuple[int, int], list[tuple[int, int, int]]]:
    """(width, height) and RGB pixels of a PNG."""
    from PIL import Image

    image = Image.open(io.BytesIO(data)).convert("RGB")
    raw = image.tobytes()
    return image.size, list(zip(raw[0::3], raw[1::3], raw[2::3]))


def assert_not_blank(data: bytes, min_colours: int = 40, min_inked: float = 0.05) -> None:
    """Many distinct colours, and a real share of pixels that are not the white background."""
    _, pixels = png_pixels(data)
    colours = set(pixels)
    inked = sum(1 for p in pixels if p != (255, 255, 255)) / len(pixels)
    assert len(colours) >= min_colours, f"only {len(colours)} colours"
    assert inked >= min_inked, f"only {inked:.1%} of pixels drawn"


def hex_rgb(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: dict[str, str] = {}
        self._script: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))
        if tag == "script":
            self._script = dict(attrs).get("id") or f"inline-{len(self.scripts)}"
            self.scripts[self._script] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._script = None

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            self.scripts[self._script] += data


def parse_html(text: str) -> _Collector:
    parser = _Collector()
    parser.feed(text)
    return parser


EXTERNAL = re.compile(r"""(?:src|href|url)\s*[=(]\s*["']?\s*(?:https?:)?//""", re.IGNORECASE)
"""An attribute or CSS url() that would fetch something from the network."""
