"""`oomless trace` says what it traced: one unsharded replica (and which categories a ZeRO/FSDP
rank would hold a shard of), the spec's algorithm, and every logits mode the planner has."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from oomless.cli.main import app
from oomless.spec.load import parse_spec
from oomless.spec.run import LogitsMode
from oomless.trace.compare import ALGORITHM_STEPS, trace_scope
from oomless.trace.logprobs import check_traceable
from tests.helpers import BASE_SPEC, merged

TINY = {
    "model_type": "qwen2", "hidden_size": 64, "intermediate_size": 192, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 2048, "tie_word_embeddings": False,
    "max_position_embeddings": 512,
}


@pytest.mark.parametrize(("strategy", "gpus", "rollout", "sharded", "num_gpus"), [
    ("ddp", 4, {"engine": "vllm_colocate"}, (), 4),
    ("zero1", 4, {"engine": "vllm_colocate"}, ("OPT",), 4),
    ("zero2", 4, {"engine": "vllm_colocate"}, ("GRAD", "OPT"), 4),
    ("zero3", 4, {"engine": "vllm_colocate"}, ("PARAM", "GRAD", "OPT"), 4),
    ("fsdp", 8, {"engine": "vllm_separate", "num_gpus": 2}, ("PARAM", "GRAD", "OPT"), 6),
    ("zero3", 1, {"engine": "hf"}, (), 1),  # one GPU: nothing to shard over
])
def test_scope_names_what_a_rank_would_hold_a_shard_of(strategy: str, gpus: int, rollout: dict, sharded: tuple, num_gpus: int) -> None:
    spec = parse_spec(merged(BASE_SPEC, **{"distribution.strategy": strategy, "hardware.gpus_per_node": gpus, "rollout": rollout}))
    scope = trace_scope(spec)
    assert scope.sharded_categories == sharded and scope.num_training_gpus == num_gpus
    doc = scope.to_dict()
    assert doc["replica"] == "unsharded" and doc["num_processes"] == 1
    if sharded:
        assert "one unsharded replica" in scope.statement and f"1/{num_gpus}" in scope.statement
    else:
        assert "nothing sharded" in scope.statement


UNTRACED = {LogitsMode.fused, LogitsMode.bf16_flash_ce_entropy}
"""Liger's Triton loss and verl's torch.compile'd entropy: kernels with no fake-tensor form."""
NOT_YET = {LogitsMode.fused_token_chunks}
"""verl's chunked LM head is plain torch, not traced yet (read from verl's code)."""


def test_every_logits_mode_but_compiled_kernels_is_traced() -> None:
    traced = []
    for mode in LogitsMode:
        try:
            check_traceable(mode)
            traced.append(mode)
        except ValueError as err:
            assert (mode in UNTRACED and "no fake-tensor form" in str(err)) or (mode in NOT_YET and "not traced yet" in str(err))
    assert set(LogitsMode) - set(traced) == UNTRACED | NOT_YET


def test_ppo_on_zero3_with_the_tiled_head_says_what_it_traced(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(TINY), encoding="utf-8")
    spec = merged(BASE_SPEC, model=str(tmp_path / "config.json"), algorithm="ppo", logits="chunked_head",
                  **{"batch.micro_batch_size": 2, "lengths.max_prompt_tokens": 48, "lengths.max_completion_tokens": 16,
                     "hardware": {"gpu_capacity_gib": 80, "gpus_per_node": 4}})
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    text = CliRunner().invoke(app, ["trace", str(path)])
    assert text.exit_code == 0, text.output
    header = text.output.splitlines()
    assert header[0].count(ALGORITHM_STEPS["ppo"]) == 1 and "GRPO step" not in header[0] and "logits chunked_head" in header[0]
    assert header[1].startswith("Traced: one unsharded replica") and "zero3 over 4 GPUs" in header[1]
    done = CliRunner().invoke(app, ["trace", str(path), "--json"])
    assert done.exit_code == 0, done.output
    doc = json.loads(done.stdout)
    assert doc["setup"]["algorithm"] == "ppo" and doc["setup"]["logits"] == "chunked_head"
    assert doc["scope"]["sharded_categories"] == ["PARAM", "GRAD", "OPT"] and doc["scope"]["num_training_gpus"] == 4
    assert doc["training_activation_peak"]["module"].startswith("backward:TiledHeadLogProbs")
    assert abs(doc["plan"]["relative_difference"]) <= 0.02
