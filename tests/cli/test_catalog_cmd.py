"""`oomless models`, `oomless gpus`, `oomless schema`: run, exit 0, and show the catalogs/spec."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel
from typer.testing import CliRunner

from oomless.catalog.gpus import gpu_ids
from oomless.catalog.resolve import catalog_ids
from oomless.cli.main import app
from oomless.spec.run import RunSpec


def test_models_lists_every_catalog_id(runner: CliRunner) -> None:
    result = runner.invoke(app, ["models"])
    assert result.exit_code == 0, result.output
    rows, _, footer = result.stdout.rstrip().rpartition("\n\n")
    listed = [line.split()[0] for line in rows.splitlines() if line.strip()]
    assert listed == list(catalog_ids())
    assert footer.startswith(f"{len(listed)} shipped")
    assert "Qwen/Qwen2.5-1.5B-Instruct" in listed


def test_models_id_shows_one_model_as_json(runner: CliRunner) -> None:
    result = runner.invoke(app, ["models", "Qwen/Qwen2.5-VL-7B-Instruct", "--json"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert shown["num_layers"] == 28 and shown["num_kv_heads"] == 4
    assert shown["kv_cache_bytes_per_token"] == 2 * 28 * 4 * 128 * 2  # K and V, layers, KV heads, head dim, bf16
    assert shown["vision_tokens_per_image"] > 0 and shown["found"].startswith("catalog:")


def test_models_unknown_id_offline_is_one_line(runner: CliRunner) -> None:
    result = runner.invoke(app, ["models", "acme/no-such-model"])
    assert result.exit_code == 2
    assert "not found" in result.output and len(result.output.strip().splitlines()) == 1


def test_models_list_as_json(runner: CliRunner) -> None:
    result = runner.invoke(app, ["models", "--json"])
    assert result.exit_code == 0
    rows = json.loads(result.stdout)
    assert len(rows) >= 150 and {"id", "num_parameters", "num_layers", "model_type", "vision"} <= set(rows[0])


def test_gpus_lists_every_catalog_id(runner: CliRunner) -> None:
    result = runner.invoke(app, ["gpus"])
    assert result.exit_code == 0, result.output
    rows, _, rule = result.stdout.rstrip().rpartition("\n\n")
    listed = [line.split()[0] for line in rows.splitlines()]
    assert listed == list(gpu_ids())
    assert rule.startswith("derived: ")


def _descriptions(node: Any) -> set[str]:
    if isinstance(node, dict):
        own = {node["description"]} if isinstance(node.get("description"), str) else set()
        return own.union(*(_descriptions(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(_descriptions(v) for v in node))
    return set()


def _field_descriptions(model: type[BaseModel]) -> set[str]:
    out = set()
    for field in model.model_fields.values():
        if field.description:
            out.add(field.description)
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            out |= _field_descriptions(field.annotation)
    return out


def test_schema_is_json_with_every_field_description(runner: CliRunner) -> None:
    result = runner.invoke(app, ["schema"])
    assert result.exit_code == 0, result.output
    schema = json.loads(result.stdout)
    assert schema["title"] == "RunSpec"
    assert set(RunSpec.model_fields) <= set(schema["properties"])
    expected = _field_descriptions(RunSpec)
    assert expected and expected <= _descriptions(schema)
