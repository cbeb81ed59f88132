"""`oomless stats` (issue 14): rows from JSONL/JSON/Parquet/folders, token counts by tokenizer or
characters, image areas after Qwen2-VL's resize, nearest-rank percentiles, spec keys that the
spec accepts, one-line errors."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from oomless.cli.main import app
from oomless.errors import InputError
from oomless.spec.load import parse_spec
from oomless.stats.measure import measure, percentile, spec_fragment
from oomless.stats.read import read_rows

RUNNER = CliRunner()


def _png(width: int, height: int) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height)).save(out, format="PNG")
    return out.getvalue()


def test_nearest_rank_percentile_by_hand() -> None:
    values = list(range(1, 101))
    assert (percentile(values, 50), percentile(values, 90), percentile(values, 99)) == (50, 90, 99)
    assert percentile([7], 99) == 7
    assert percentile([1, 2, 3, 100], 50) == 2


def test_jsonl_with_chat_prompts_counts_characters(tmp_path: Path) -> None:
    rows = [{"messages": [{"role": "user", "content": "a" * 40 * i}]} for i in range(1, 11)]
    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    got, truncated = read_rows(str(tmp_path / "d.jsonl"), 100)
    stats = measure(got, truncated)
    assert stats.prompt_field == "messages" and stats.prompt_tokens == [10 * i for i in range(1, 11)]
    fragment = spec_fragment(stats)
    assert fragment["lengths"] == {"typical_prompt_tokens": 50, "prompt_percentiles": {90: 90, 99: 100}, "mean_prompt_tokens": 55.0}


def test_limit_reads_the_first_rows(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps({"prompt": "x"}) for _ in range(10)))
    rows, truncated = read_rows(str(tmp_path / "d.jsonl"), 4)
    assert len(rows) == 4 and truncated


def test_tokenizer_counts_with_the_real_tokenizer(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from oomless.train.tiny import build_tokenizer

    build_tokenizer().save_pretrained(tmp_path / "tok")
    rows = [{"prompt": "1+2="}, {"prompt": "12+34="}]
    stats = measure(rows, False, tokenizer=str(tmp_path / "tok"))
    assert stats.prompt_tokens == [4, 6]  # one token per character


def test_images_from_bytes_and_paths_resized_like_qwen2_vl(tmp_path: Path) -> None:
    (tmp_path / "a.png").write_bytes(_png(640, 480))
    rows = [{"problem": "p", "images": [{"bytes": _png(100, 100)}, "a.png"]}, {"problem": "q", "images": []},
            {"problem": "r", "images": ["missing.png"]}]
    stats = measure(rows, False, base=tmp_path, min_pixels=3136, max_pixels=1003520)
    # 640×480 → 644×476 (nearest multiples of 28); 100×100 → 112×112 (nearest multiple of 28)
    assert sorted(stats.pixels) == [112 * 112, 476 * 644]
    assert stats.images_per_prompt == [2, 0, 1] and stats.unreadable_images == 1
    fragment = spec_fragment(stats)
    assert fragment["vision"]["typical_images_per_prompt"] == 1


def test_the_fragment_is_accepted_by_the_spec(tmp_path: Path) -> None:
    (tmp_path / "a.png").write_bytes(_png(640, 480))
    rows = [{"prompt": "x" * (4 * n), "image": "a.png"} for n in range(1, 200)]
    fragment = spec_fragment(measure(rows, False, base=tmp_path))
    spec = parse_spec({"model": "Qwen/Qwen2.5-VL-3B-Instruct", "hardware": {"gpu": "H100-80GB", "gpus_per_node": 1},
                       "lengths": {"max_prompt_tokens": 512, **fragment["lengths"]},
                       "vision": {"images_per_prompt": 1, "max_pixels": 1003520, **fragment["vision"]}})
    assert spec.lengths.typical_prompt_tokens == 100


def test_parquet_and_folder(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    data = datasets.Dataset.from_dict({"question": ["a" * 8, "b" * 16]})
    data.to_parquet(str(tmp_path / "d.parquet"))
    assert measure(*read_rows(str(tmp_path / "d.parquet"), 10)).prompt_tokens == [2, 4]
    data.save_to_disk(str(tmp_path / "saved"))
    assert measure(*read_rows(str(tmp_path / "saved"), 10)).prompt_tokens == [2, 4]


@pytest.mark.parametrize(("content", "name", "match"), [
    ('{"prompt": "a"}\n{broken\n', "d.jsonl", r"d.jsonl:2 is not a JSON object"),
    ("a,b\n", "d.csv", "unknown format"),
    ("", "d.jsonl", "has no rows"),
])
def test_bad_input_is_one_line(tmp_path: Path, content: str, name: str, match: str) -> None:
    (tmp_path / name).write_text(content)
    with pytest.raises(InputError, match=match):
        read_rows(str(tmp_path / name), 10)


def test_cli_json_and_errors(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text(json.dumps({"text": "hello world"}))
    done = RUNNER.invoke(app, ["stats", str(tmp_path / "d.jsonl"), "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["spec"]["lengths"]["typical_prompt_tokens"] == 3
    done = RUNNER.invoke(app, ["stats", str(tmp_path / "d.jsonl"), "--prompt-field", "nope"])
    assert done.exit_code == 2 and "no column 'nope'" in done.output
    done = RUNNER.invoke(app, ["stats", str(tmp_path / "missing.jsonl")])
    assert done.exit_code == 2 and "no such file" in done.output
