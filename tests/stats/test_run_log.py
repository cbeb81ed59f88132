"""Issue 14: completion lengths from an earlier run's log (`plan --run-log`) and from a rollout
dump (`stats --completion-field`), read as data in each framework's own format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from oomless.cli.main import app
from oomless.errors import InputError
from oomless.stats.measure import completion_fragment
from oomless.stats.run_log import read_run_log, run_log_lengths
from tests.helpers import BASE_SPEC, merged

ROOT = Path(__file__).resolve().parents[2]
# verl's console format (docs/start/quickstart.rst: "step:0 - ... - response_length/mean:239.133 - ...")
VERL = ("(TaskRunner pid=7) step:1 - timing/gen:21.4 - response_length/mean:239.1 - response_length/max:1024.0 - "
        "response_length/min:77.0 - response_length/clip_ratio:0.01 - prompt_length/mean:104.9 - prompt_length/max:175.0\n"
        "(TaskRunner pid=7) step:2 - response_length/mean:262.2 - response_length/max:1024.0 - "
        "response_length/clip_ratio:0.004 - prompt_length/mean:102.4\n")
# TRL / ms-swift print each logging step as a Python dict
TRL = ("{'loss': 0.01, 'completions/mean_length': 310.5, 'completions/min_length': 40.0, "
       "'completions/max_length': 512.0, 'completions/clipped_ratio': 0.0625, 'epoch': 0.1}\n"
       "  5%|▌         | 10/200 [01:00<19:00,  6.00s/it]\n"
       "{'loss': 0.02, 'completions/mean_length': 355.0, 'completions/max_length': 512.0, 'completions/clipped_ratio': 0.125}\n")


def _log(tmp_path: Path, text: str, name: str = "run.log") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_verl_console_steps_give_the_largest_step_figures(tmp_path: Path) -> None:
    stats = read_run_log(_log(tmp_path, VERL))
    assert (stats.steps, stats.completion_mean, stats.completion_max, stats.clip, stats.prompt_mean) == (2, 262.2, 1024.0, 0.01, 104.9)
    notes: list[str] = []
    fields = run_log_lengths(stats, 512, 1024, notes)
    assert fields == {"mean_completion_tokens": 262.2, "completion_clip_fraction": 0.01, "mean_prompt_tokens": 104.9}
    assert notes and "2 logged step(s)" in notes[0]


def test_trl_dicts_and_jsonl_logs(tmp_path: Path) -> None:
    stats = read_run_log(_log(tmp_path, TRL))
    assert (stats.steps, stats.completion_mean, stats.clip) == (2, 355.0, 0.125)
    lines = "".join(json.dumps({"completions/mean_length": m, "completions/clipped_ratio": 0.0}) + "\n" for m in (100, 120.5))
    assert read_run_log(_log(tmp_path, lines, "logging.jsonl")).completion_mean == 120.5


def test_a_log_cut_below_this_plans_limit_is_refused(tmp_path: Path) -> None:
    stats = read_run_log(_log(tmp_path, TRL))  # cut at 512
    with pytest.raises(InputError, match="below this plan's max_completion_tokens 1024"):
        run_log_lengths(stats, 512, 1024, [])
    notes: list[str] = []
    fields = run_log_lengths(stats, 512, 256, notes)  # a longer run: its clipped share is not this limit's
    assert fields == {"mean_completion_tokens": 256}
    assert any("not used" in n for n in notes)


@pytest.mark.parametrize("text", ["", "hello world\n", "{'loss': 1.0}\n", "step:1 - actor/pg_loss:0.1\n",
                                  "{'completions/mean_length': 10, 'completions/clipped_ratio': 3}\n"])
def test_logs_without_completion_lengths_give_one_line(tmp_path: Path, text: str) -> None:
    result = CliRunner().invoke(app, ["plan", str(ROOT / "examples/seeds/s1-after.yaml"), "--run-log", _log(tmp_path, text)])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and "--run-log" in result.output and "Traceback" not in result.output


def test_plan_takes_the_logged_means(tmp_path: Path) -> None:
    spec = tmp_path / "packed.yaml"
    spec.write_text(yaml.safe_dump(merged(BASE_SPEC, **{"batch.padding_free": True, "attention": "flash_attention_2"})))
    log = _log(tmp_path, "{'completions/mean_length': 100.0, 'completions/max_length': 512, 'completions/clipped_ratio': 0.0}\n")
    plain = CliRunner().invoke(app, ["plan", str(spec), "--json"])
    assert json.loads(plain.stdout)["typical"] is None
    result = CliRunner().invoke(app, ["plan", str(spec), "--json", "--run-log", log])
    assert result.exit_code in (0, 1), result.output
    document = json.loads(result.stdout)
    # packed rows add up: the logged mean gives a typical batch of 512 + 100 tokens a sequence
    assert document["typical"]["lengths"]["completion_tokens"] == 100


def test_completion_fragment_from_a_dump() -> None:
    counts = [10 * i for i in range(1, 101)]  # 10 .. 1000
    fragment = completion_fragment(counts, None)
    assert fragment == {"typical_completion_tokens": 500, "completion_percentiles": {90: 900, 99: 990},
                        "mean_completion_tokens": 505.0}
    cut = completion_fragment(counts, 900)  # 11 of 100 reach the limit
    assert cut["completion_clip_fraction"] == 0.11
    assert cut["mean_completion_tokens"] == pytest.approx((sum(counts[:89]) + 11 * 900) / 100, abs=0.05)
    assert all(v < 900 for v in cut.get("completion_percentiles", {}).values())


def test_stats_reads_a_rollout_dump(tmp_path: Path) -> None:
    rows = [{"input": "q" * 40, "output": "a" * (40 * i), "score": 1.0} for i in range(1, 21)]
    path = tmp_path / "120.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = CliRunner().invoke(app, ["stats", str(path), "--completion-field", "output", "--max-completion-tokens", "150",
                                      "--json"])
    assert result.exit_code == 0, result.output
    lengths = json.loads(result.stdout)["spec"]["lengths"]
    assert lengths["typical_completion_tokens"] == 100 and lengths["completion_clip_fraction"] == 0.3
    bad = CliRunner().invoke(app, ["stats", str(path), "--completion-field", "nope"])
    assert bad.exit_code == 2 and "--completion-field" in bad.output


def test_a_huge_line_is_skipped_not_parsed(tmp_path: Path) -> None:
    """A literal of megabytes would cost gigabytes to parse (review finding): skipped unread."""
    huge = "{'completions/mean_length': 10.0, 'x': [" + "1, " * 600_000 + "]}\n"
    path = _log(tmp_path, huge + TRL)
    assert read_run_log(path).steps == 2


def test_a_mean_alone_says_its_limit_is_unknown_and_means_round_up(tmp_path: Path) -> None:
    stats = read_run_log(_log(tmp_path, "{'response_length': 230.04}\n"))  # OpenRLHF: the batch's mean only
    notes: list[str] = []
    assert run_log_lengths(stats, 512, 1024, notes) == {"mean_completion_tokens": 230.1}  # up, never down
    assert any("limit is unknown" in n for n in notes)
