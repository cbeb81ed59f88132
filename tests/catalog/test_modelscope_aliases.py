"""ModelScope ids (what ms-swift scripts name by default) resolve through ms-swift's model
registry to Hugging Face ids (catalog/data/modelscope_aliases.json, scripts/modelscope_aliases.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from oomless.catalog.resolve import load_model, modelscope_alias
from oomless.errors import InputError

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "modelscope_aliases.py"


def test_a_modelscope_id_plans_as_its_hub_model_and_says_so() -> None:
    arch = load_model("LLM-Research/Meta-Llama-3.1-8B-Instruct")
    assert arch.name == "meta-llama/Llama-3.1-8B-Instruct"  # the Hub's rename of Meta-Llama-3.1 applied
    assert any("ModelScope's id of 'meta-llama/Llama-3.1-8B-Instruct'" in n for n in arch.checkpoint.notes)
    assert modelscope_alias("llm-research/meta-llama-3.1-8b-instruct") == "meta-llama/Llama-3.1-8B-Instruct"


def test_an_id_that_is_both_names_needs_no_alias() -> None:
    assert modelscope_alias("Qwen/Qwen2.5-7B-Instruct") is None  # ModelScope and the Hub spell it alike
    assert load_model("Qwen/Qwen2.5-7B-Instruct").checkpoint is None or not any(
        "ModelScope" in n for n in load_model("Qwen/Qwen2.5-7B-Instruct").checkpoint.notes)


def test_an_alias_whose_model_is_not_here_says_where_it_looked() -> None:
    with pytest.raises(InputError, match="ModelScope id of 'Skywork/Skywork-Reward-Llama-3.1-8B-v0.2'"):
        load_model("AI-ModelScope/Skywork-Reward-Llama-3.1-8B-v0.2")


def test_the_script_reads_model_pairs_as_data() -> None:
    spec = importlib.util.spec_from_file_location("modelscope_aliases", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    source = ("ModelGroup([Model('LLM-Research/X-7B', 'org/X-7B'), Model('Qwen/Y', 'Qwen/Y'),\n"
              "            Model(None, 'hf/only'), Model('ms/only'), Model(name, 'org/z')])")
    assert module.pairs(source) == {"LLM-Research/X-7B": "org/X-7B"}
