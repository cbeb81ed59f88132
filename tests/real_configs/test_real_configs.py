"""Every file of the real-config corpus (tests/real_configs/manifest.yaml) is planned in-process
the way `scripts/real_configs_table.py` plans it: no crash or traceback, a refusal is one line
naming what was refused, and the planned share (exit 0 or 1) does not fall below the floor."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from oomless.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import real_configs_table as table  # noqa: E402  (scripts/ is not a package)

PLANNED_SHARE_FLOOR = 0.93
"""The planned share measured when the corpus was collected (docs/real-configs.md); raise it as
fixes land, never lower it to make a change pass. The goal (issue 13) is 0.90. Set from 0.94 to
0.935 once, when the corpus grew by open-r1's four `sbatch` README commands (232 of 247 planned,
93.9 %): one of them, ca8664d's line 184, names a recipe that does not exist and is refused for
it, which is right; no file that planned before is refused now. Set to 0.93 when it grew by
verl's twelve examples/tuning scripts (242 of 259, 93.4 %): two are refused rightly (the 32B
Megatron script, a backend oomless does not plan; the 70B H20 script passes the literal string
`model_path` as the model), and no file that planned before is refused."""

MANIFEST = table.load_manifest()
REFUSAL = re.compile(r"^error: \S.*\S$")
_outcomes: dict[str, table.Outcome] = {}


def plan_in_process(entry: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> table.Outcome:
    """The entry planned through the CLI's typer app, from its version folder (as a user at that
    repository root), classified like the table script's subprocess runs."""
    if entry["id"] in _outcomes:
        return _outcomes[entry["id"]]
    args, source = table.plan_args(entry)
    monkeypatch.chdir(table.CORPUS / entry["root"])
    result = CliRunner().invoke(app, args, catch_exceptions=True)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "\nTraceback (most recent call last): " + repr(result.exception)
    outcome = table.classify(entry, args, source, result.exit_code, result.stdout, stderr)
    _outcomes[entry["id"]] = outcome
    return outcome


@pytest.mark.parametrize("entry", MANIFEST, ids=[e["id"] for e in MANIFEST])
def test_file_plans_or_is_refused_in_one_line(entry: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    outcome = plan_in_process(entry, monkeypatch)
    assert outcome.outcome in ("fits", "does-not-fit", "refused"), f"{outcome.outcome}: {outcome.reason}"
    if outcome.outcome == "refused":
        errors = [line for line in outcome.stderr_lines if not line.startswith(("warning:", "note:"))]
        assert len(errors) == 1 and REFUSAL.match(errors[0]), outcome.stderr_lines


def test_manifest_entries_are_complete() -> None:
    for entry in MANIFEST:
        assert {"framework", "repo", "path", "commit", "version", "file", "root"} <= entry.keys(), entry["id"]
        assert re.fullmatch(r"[0-9a-f]{40}", entry["commit"]), entry["id"]
        assert (table.CORPUS / entry["file"]).is_file(), entry["id"]
        for companion in entry.get("companions", []):
            assert (table.CORPUS / entry["root"] / companion).is_file(), (entry["id"], companion)
        if "hardware" in entry:
            assert entry["hardware"]["quote"] and entry["hardware"]["where"], entry["id"]
            if entry["hardware"].get("launch"):
                assert (table.CORPUS / entry["root"] / entry["hardware"]["launch"]).is_file(), entry["id"]


def test_planned_share_is_reported_and_holds_the_floor(monkeypatch: pytest.MonkeyPatch) -> None:
    outcomes = [plan_in_process(entry, monkeypatch) for entry in MANIFEST]
    share = table.planned_share(outcomes)
    document = table.results_document(outcomes)
    planned = sum(o.outcome in table.PLANNED for o in outcomes)
    assert document["planned_share"] == round(planned / len(outcomes), 4)
    assert sum(document["counts"].values()) == len(MANIFEST)
    assert f"planned share {share:.1%}" in table.render_doc(outcomes, MANIFEST)
    assert share >= PLANNED_SHARE_FLOOR, f"planned share {share:.1%} fell below the floor {PLANNED_SHARE_FLOOR:.0%}"
