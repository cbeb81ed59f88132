"""`oomless compare`: exit codes, the JSON document, the human summary."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.cli.conftest import run_oomless
from tests.helpers import EXAMPLES

S0_BEFORE, S0_AFTER = EXAMPLES / "seeds" / "s0-before.yaml", EXAMPLES / "seeds" / "s0-after.yaml"


def test_exit_code_is_the_after_plans_verdict() -> None:
    assert run_oomless("compare", str(S0_BEFORE), str(S0_AFTER)).returncode == 0
    assert run_oomless("compare", str(S0_AFTER), str(S0_BEFORE)).returncode == 1


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, write_spec: Callable[..., Path]) -> None:
    missing = run_oomless("compare", str(S0_BEFORE), str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines() == [f"error: spec: no such file: {tmp_path / 'nope.yaml'}"]
    typo = run_oomless("compare", str(write_spec(kl_bta=0.1)), str(S0_AFTER))
    assert typo.returncode == 2 and "kl_bta: unknown key" in typo.stderr and "Traceback" not in typo.stderr


def test_json_names_the_differences() -> None:
    done = run_oomless("compare", str(S0_BEFORE), str(S0_AFTER), "--json")
    assert done.returncode == 0, done.stderr
    c = json.loads(done.stdout)
    assert (c["before"]["spec"], c["after"]["spec"]) == (str(S0_BEFORE), str(S0_AFTER))
    d = c["differences"]
    assert d["verdict"] == {"before": False, "after": True}
    fields = {r["field"]: (r["before"], r["after"]) for r in d["spec_fields"]}
    assert fields["batch.micro_batch_size"] == (8, 2)
    assert fields["rollout.gpu_memory_utilization"] == (0.9, 0.5)
    assert fields["rollout.sleep_level"] == (0, 1)  # a default (before) against a set value (after)
    assert "model" not in fields and "hardware.gpu" not in fields
    assert d["binding"]["before"]["margin_bytes"] < 0 <= d["binding"]["after"]["margin_bytes"]
    assert d["components"][0]["name"] == "vllm.kv_cache"
    assert c["before"]["plan"]["fits"] is False and c["after"]["plan"]["fits"] is True


def test_human_summary() -> None:
    done = run_oomless("compare", str(S0_BEFORE), str(S0_AFTER))
    text = " ".join(done.stdout.split())  # the headlines wrap at the terminal's width
    assert text.startswith(f"before: {S0_BEFORE} — DOES NOT FIT; breaks first at load on the train GPU")
    assert f"after: {S0_AFTER} — FITS; tightest" in text
    assert text.index("after: ") < text.index("Spec fields that differ")
    for needle in ("Spec fields that differ", "rollout.gpu_memory_utilization", "Peak per phase", "−", "vllm.kv_cache"):
        assert needle in done.stdout
