"""`oomless explain SPEC [COMPONENT]`, `oomless plan --explain` and the HTML report's
"Where the numbers come from": the same explanation, of the same plan as `oomless plan`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from oomless.cli.main import app
from oomless.errors import EXIT_BAD_INPUT, EXIT_DOES_NOT_FIT, EXIT_FITS
from tests.helpers import EXAMPLES, ROOT

S1_BEFORE = EXAMPLES / "seeds" / "s1-before.yaml"
S1_AFTER = EXAMPLES / "seeds" / "s1-after.yaml"
NATIVE = EXAMPLES / "seeds" / "native" / "s1-before.sh"


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, result.stdout


def planned_components(spec: Path, *extra: str) -> list[tuple[str, str, str, int]]:
    code, out = invoke("plan", spec, "--json", *extra)
    assert code in (EXIT_FITS, EXIT_DOES_NOT_FIT), out
    doc = json.loads(out)
    rows = [(d["role"], p["name"], n, b) for d in doc["gpu"]["devices"] for p in d["phases"] for n, b in p["components"].items()]
    return rows + [("node", p["name"], n, b) for p in doc["host"]["phases"] for n, b in p["components"].items()]


def test_explain_json_lists_every_component_of_the_plan_with_its_bytes() -> None:
    code, out = invoke("explain", S1_BEFORE, "--json")
    assert code == 0, out
    doc = json.loads(out)
    explained = [(e["group"], e["phase"], e["name"], e["num_bytes"]) for e in doc["components"]]
    assert sorted(explained) == sorted(planned_components(S1_BEFORE))
    for e in doc["components"]:
        f = e["formula"]
        assert f["value"] == e["num_bytes"] and f["source"] and f["code"], e["name"]
    assert doc["verdict"] == "does_not_fit"
    for c in doc["checks"]:
        assert c["required"]["value"] == c["required_bytes"] and c["available"]["value"] == c["available_bytes"], c["message"]
    assert any(c["required_bytes"] > c["available_bytes"] for c in doc["checks"])


def test_explain_one_component_shows_formula_inputs_result_and_source() -> None:
    code, out = invoke("explain", S1_BEFORE, "logits")
    assert code == 0, out
    names = {line.split(" = ")[0].strip() for line in out.splitlines() if line.startswith("  ") and not line.startswith("    ")}
    assert names == {"logits"}
    assert "= B * (E1 + E)" in out and "source: TRL" in out and "code: oomless/memory/logits.py:" in out
    e = next(x for x in json.loads(invoke("explain", S1_BEFORE, "logits", "--json")[1])["components"] if x["phase"] == "logprob")
    symbols = {i["symbol"]: i["value"] for i in e["formula"]["inputs"]}
    assert 2 * (symbols["E1"] + symbols["E"]) == e["num_bytes"]


def test_a_prefix_selects_every_component_it_starts() -> None:
    doc = json.loads(invoke("explain", S1_BEFORE, "vllm.", "--json")[1])
    names = {e["name"] for e in doc["components"]}
    assert "vllm.kv_cache" in names and all(n.startswith("vllm.") for n in names)


def test_an_unknown_component_is_one_line_naming_the_choices() -> None:
    result = subprocess.run([sys.executable, "-m", "oomless", "explain", str(S1_BEFORE), "no_such_thing"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == EXIT_BAD_INPUT
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "no_such_thing" in lines[0] and "policy.weights" in lines[0]


def test_explain_reads_a_framework_config_like_plan() -> None:
    code, out = invoke("explain", "--from", "swift", NATIVE, "--gpu", "RTX-3090", "--json")
    assert code == 0, out
    doc = json.loads(out)
    explained = sorted((e["group"], e["phase"], e["name"], e["num_bytes"]) for e in doc["components"])
    assert explained == sorted(planned_components(NATIVE, "--from", "swift", "--gpu", "RTX-3090"))


def test_plan_explain_prints_the_explanation_after_the_plan_and_keeps_the_verdict() -> None:
    code, out = invoke("plan", S1_BEFORE, "--explain")
    assert code == EXIT_DOES_NOT_FIT
    plan_part, _, explain_part = out.partition("Where the numbers come from")
    assert "DOES NOT FIT" in plan_part.upper() and "policy.weights = " in explain_part and "BREAKS" in explain_part
    assert explain_part == invoke("explain", S1_BEFORE)[1].partition("Where the numbers come from")[2]


def test_plan_json_has_the_explanation_only_when_asked() -> None:
    assert "explain" not in json.loads(invoke("plan", S1_AFTER, "--json")[1])
    doc = json.loads(invoke("plan", S1_AFTER, "--json", "--explain")[1])
    assert len(doc["explain"]["components"]) == len(planned_components(S1_AFTER))
    assert [(c["phase"], c["required_bytes"], c["available_bytes"]) for c in doc["explain"]["checks"]] == [
        (c["phase"], c["required_bytes"], c["available_bytes"]) for c in doc["constraints"]]


def test_the_html_report_has_where_the_numbers_come_from(tmp_path: Path) -> None:
    page = tmp_path / "plan.html"
    code, out = invoke("plan", S1_AFTER, "--html", page)
    assert code == EXIT_FITS, out
    html = page.read_text(encoding="utf-8")
    section = html.split("<h2>Where the numbers come from</h2>")[1]
    assert "policy.weights" in section and "ceil(W / N)" in section and "source:" in section
    assert section.count("<details>") == len({(g, n, b) for g, _, n, b in planned_components(S1_AFTER)})
    assert "checks: what each needs and what it has" in section and "ceil(capacity * utilization)" in section


def test_plan_without_explain_does_not_import_the_explanation() -> None:
    probe = ("import sys; from oomless.cli.main import main\n"
             "try:\n    main(['plan', %r])\nexcept SystemExit:\n    pass\n"
             "print('oomless.explain' in sys.modules)") % str(S1_AFTER)
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert result.stdout.strip().splitlines()[-1] == "False", result.stderr


def test_explain_fits_an_80_column_terminal() -> None:
    result = CliRunner().invoke(app, ["explain", str(S1_BEFORE)], env={"COLUMNS": "80"})
    assert result.exit_code == 0
    assert max(len(line) for line in result.stdout.splitlines()) <= 80
