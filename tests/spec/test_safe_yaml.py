"""Bounded YAML (issue 15): deep nesting, alias bombs, self-reference and huge files end in
one-line errors, quickly; ordinary documents (anchors and merge keys included) load as PyYAML
loads them."""

from __future__ import annotations

import pytest
import yaml

from oomless.errors import InputError
from oomless.safe_yaml import MAX_YAML_DEPTH, MAX_YAML_NODES, load_yaml
from oomless.spec.load import read_yaml


def _bomb(levels: int, width: int) -> str:
    lines = ["a0: &a0 [x]"]
    for i in range(1, levels + 1):
        refs = ", ".join([f"*a{i - 1}"] * width)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(lines) + f"\nbatch: *a{levels}\n"


def test_ordinary_documents_load_as_pyyaml_loads_them() -> None:
    text = "base: &b {micro_batch_size: 2, num_generations: 8}\nbatch: {<<: *b, micro_batch_size: 4}\nlist: [1, 2.5, null, true]\n"
    assert load_yaml(text, "x") == yaml.safe_load(text)
    assert load_yaml("", "x") is None


def test_an_alias_bomb_is_refused_by_its_expanded_size() -> None:
    with pytest.raises(InputError, match="expands to more than"):
        load_yaml(_bomb(9, 9), "spec.yaml")


def test_a_small_alias_tree_is_read() -> None:
    data = load_yaml(_bomb(3, 3), "x")
    assert len(data["batch"]) == 3 and 3**3 < MAX_YAML_NODES


@pytest.mark.parametrize("depth", [MAX_YAML_DEPTH + 1, 1000, 3000])
def test_deep_nesting_is_refused_in_one_line(depth: int) -> None:
    with pytest.raises(InputError) as err:
        load_yaml("[" * depth + "]" * depth, "deep.yaml")
    assert "nested" in str(err.value) and "\n" not in str(err.value)


def test_block_nesting_at_the_limit_is_read() -> None:
    text = "".join(f"{'  ' * i}k{i}:\n" for i in range(MAX_YAML_DEPTH - 1)) + "  " * (MAX_YAML_DEPTH - 1) + "v: 1\n"
    data = load_yaml(text, "x")
    for i in range(MAX_YAML_DEPTH - 1):
        data = data[f"k{i}"]
    assert data == {"v": 1}


def test_a_self_referring_alias_is_refused() -> None:
    with pytest.raises(InputError, match="refers to itself"):
        load_yaml("a: &a [1, *a]\n", "x")


def test_read_yaml_names_the_file(tmp_path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(_bomb(9, 9), encoding="utf-8")
    with pytest.raises(InputError) as err:
        read_yaml(path)
    assert err.value.field == "spec" and str(path) in err.value.message
    path.write_text("model: [unclosed\n", encoding="utf-8")
    with pytest.raises(InputError, match="malformed YAML at line"):
        read_yaml(path)


@pytest.mark.parametrize("field, value", [
    ("hardware", {"gpu": "H100", "host_ram_gib": float("inf")}),
    ("hardware", {"gpu_capacity_gib": float("inf")}),
    ("kl_beta", float("nan")),
    ("batch", {"oversample_factor": float("inf")}),
    ("finetune", {"method": "lora", "lora_alpha": float("inf")}),
])
def test_infinite_and_nan_numbers_are_refused_naming_the_field(field: str, value: object) -> None:
    from oomless.spec.load import parse_spec

    with pytest.raises(InputError) as err:
        parse_spec({"model": "Qwen/Qwen2.5-1.5B-Instruct", "hardware": {"gpu": "H100"}, field: value})
    assert err.value.field.startswith(field) and "finite" in err.value.message


def test_unprintable_characters_are_one_line() -> None:
    with pytest.raises(InputError, match="malformed YAML at character 0"):
        load_yaml("\x1f\nmodel: x\n", "x")
