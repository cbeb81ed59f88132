"""The analytic parameter count of each catalog model is within 1% of its published count.

Reads tests/catalog/data/published_counts.json (a list of {"id", "params", "source", "note"},
kept by hand from model cards, papers and exact checkpoint counts); skips when absent.
Tolerance: 1% (cards round to 2-3 significant figures; exact counts match far closer).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from oomless.catalog.resolve import load_model
from oomless.memory.params import num_parameters

PUBLISHED_COUNTS = Path(__file__).parent / "data" / "published_counts.json"
RELATIVE_TOLERANCE = 0.01


def _entries() -> list[dict[str, Any]]:
    if not PUBLISHED_COUNTS.is_file():
        return []
    return json.loads(PUBLISHED_COUNTS.read_text("utf-8"))


ENTRIES = _entries()


@pytest.mark.skipif(not ENTRIES, reason=f"{PUBLISHED_COUNTS.name} absent or empty")
@pytest.mark.parametrize("entry", ENTRIES, ids=[e["id"] for e in ENTRIES])
def test_analytic_count_within_one_percent_of_published(entry: dict[str, Any]) -> None:
    arch = load_model(entry["id"])
    analytic = num_parameters(arch)
    published = int(entry["params"])
    assert analytic == pytest.approx(published, rel=RELATIVE_TOLERANCE), (
        f"{entry['id']}: analytic {analytic:,} vs published {published:,} "
        f"({analytic / published - 1:+.2%}); {entry['source']}")
