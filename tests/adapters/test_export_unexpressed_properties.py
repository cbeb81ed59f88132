"""What a framework cannot say (issue 13, item 6): a spec the framework can express, with one to
three values its writer refuses (`common.require`'s allowed values in adapters/<fw>/writer.py),
is refused by a plain export naming one of them, and `fit --export` (adapters/patch/export.py)
still writes the files and names every such field in one line.

The specs come from the round-trip strategies (round_trip_strategies.py); CI examples and
OOMLESS_FUZZ_EXAMPLES as there.
"""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from oomless.adapters import common as C
from oomless.adapters.patch.export import export_fitted
from oomless.errors import InputError
from oomless.spec.load import parse_spec, resolve
from oomless.spec.run import RunSpec
from tests.adapters import round_trip_strategies as RT

UNEXPRESSIBLE: dict[str, list[tuple[str, Any]]] = {
    "verl": [("distribution.strategy", "zero3"), ("precision", "fp16_mixed"), ("optimizer", "adamw_8bit"),
             ("finetune.method", "qlora"), ("algorithm", "dapo"), ("placement.process_per_role", True),
             ("rollout.engine_in_trainer_process", True), ("distribution.offload_params", True), ("logits", "full_fp32"),
             ("logits", "chunked_head"), ("distribution.offload_reference_params", True),
             ("distribution.offload_reference_params", False),  # verl: exactly for full fine-tuning
             ("rollout.lora_sync", "merge")],  # verl never merges LoRA adapters
    "easyr1": [("distribution.strategy", "zero3"), ("rollout.sleep_level", 2), ("rollout.engine_in_trainer_process", False),
               ("attention", "sdpa"), ("precision", "fp16_mixed"), ("optimizer", "sgd"), ("algorithm", "dapo"),
               ("rollout.max_num_seqs", 64), ("logits", "chunked"), ("rollout.samples_per_request", 1),
               ("distribution.sequence_parallel_size", 2), ("batch.max_tokens_per_gpu", 4096)],
    "openrlhf": [("precision", "bf16"), ("optimizer", "adamw_8bit"), ("placement.process_per_role", False),
                 ("rollout.max_num_batched_tokens", 4096), ("rollout.max_num_seqs", 64), ("algorithm", "dapo"),
                 ("rollout.max_model_len", 99999), ("logits", "fused"), ("batch.gradient_accumulation_steps", 2),
                 ("distribution.offload_reference_params", True)],
    "orz": [("finetune.method", "lora"), ("precision", "bf16"), ("attention", "sdpa"), ("algorithm", "rloo"),
            ("placement.process_per_role", False), ("rollout.max_num_seqs", 64), ("logits", "full_fp32"),
            ("batch.gradient_accumulation_steps", 2), ("rollout.offload_model", True), ("batch.padding_free", True)],
    "vlmr1": [("rollout.engine", "vllm_colocate"), ("ray.enabled", True), ("precision", "bf16"), ("finetune.method", "qlora"),
              ("distribution.strategy", "fsdp"), ("logits", "chunked_head"), ("batch.padding_free", True)],
}
"""Per framework: a spec field and a value its writer's `require` / `cannot_express` refuses."""

SPECS = {"verl": RT.verl_specs, "easyr1": RT.easyr1_specs, "openrlhf": RT.openrlhf_specs, "orz": RT.orz_specs,
         "vlmr1": RT.vlmr1_specs}


def _with(spec: RunSpec, changes: list[tuple[str, Any]]) -> RunSpec:
    data = copy.deepcopy(spec.model_dump(mode="json"))
    for dotted, value in changes:
        *parents, leaf = dotted.split(".")
        node = data
        for key in parents:
            node = node[key]
        node[leaf] = value
    try:
        return parse_spec(data)
    except InputError:  # the change breaks a cross-field rule of the spec itself
        assume(False)
        raise


def _value(spec: RunSpec, dotted: str) -> Any:
    node: Any = spec.model_dump(mode="json")
    for key in dotted.split("."):
        node = node[key]
    return node


@pytest.mark.parametrize("framework", sorted(UNEXPRESSIBLE))
@RT.SETTINGS
@given(data=st.data())
def test_export_names_every_field_it_cannot_express_in_one_message(framework: str, data: st.DataObject) -> None:
    spec = data.draw(SPECS[framework](), label="expressible spec")
    changes = data.draw(st.lists(st.sampled_from(UNEXPRESSIBLE[framework]), min_size=1, max_size=3,
                                 unique_by=lambda change: change[0]), label="values it cannot say")
    bad = _with(spec, changes)
    changed = [field for field, _ in changes if _value(bad, field) != _value(spec, field)]
    assume(changed)
    with pytest.raises(InputError):
        RT.writer(framework).render_files(bad)
    with tempfile.TemporaryDirectory() as folder:
        paths, message = export_fitted(framework, bad, resolve(bad).arch, Path(folder))
        assert paths and all(p.exists() for p in paths)
    assert message is not None and "\n" not in message
    assert [field for field in changed if f"{field} (" not in message] == [], message


@pytest.mark.parametrize("framework", ["openrlhf", "orz"])
@RT.SETTINGS
@given(data=st.data())
def test_a_model_the_run_loads_but_no_group_places_is_named(framework: str, data: st.DataObject) -> None:
    """A reward model added to a run whose explicit groups do not place it: the reader would give
    it GPUs of its own, so the writer names `placement.groups` instead of writing other GPUs."""
    spec = data.draw(SPECS[framework](), label="expressible spec")
    assume(spec.reward_model.model is None)
    bad = _with(spec, [("reward_model.model", "Qwen/Qwen2.5-0.5B-Instruct")])
    with C.collect_unexpressed() as found:
        RT.writer(framework).render_files(bad)
    assert "placement.groups" in {field for field, _ in found}
