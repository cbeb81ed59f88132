"""Real CPU training steps (random-weight Qwen2- and Llama-shaped models, bf16, two micro-batches)
measured with the tracer's `StorageTracker` agree with `oomless plan`'s train phase: within 3 %
for the plain GRPO step, 5 % for a real `trl.GRPOTrainer` step. A representative subset of
`scripts/validate_real.py`'s cases (each a few seconds); the full table is docs/validation.md."""

from __future__ import annotations

from dataclasses import replace

import pytest

from oomless.catalog.models import arch_from_config
from oomless.memory import logits as L
from oomless.spec.run import LogitsMode
from oomless.trace.real_compare import planned_train_phase, relative_difference
from oomless.trace.real_steps import RealSetup, validation_cases

TOLERANCES = {"plain": 0.03, "trl": 0.05}


def _cpu_has_native_bf16_gemm() -> bool:
    """These steps compute in bf16. Without AVX-512 (torch's CPU capability "AVX2" or
    "DEFAULT") torch falls back to a slow bf16 GEMM: measured 483 ms vs 17.6 ms in fp32 for a
    512×512 @ 512×1408 product on a 2-core AVX2 AMD EPYC (torch 2.13.0), 8 minutes per case."""
    torch = pytest.importorskip("torch")
    return torch.backends.cpu.get_cpu_capability() not in ("DEFAULT", "AVX2", "NO AVX")


pytestmark = pytest.mark.skipif(
    not _cpu_has_native_bf16_gemm(),
    reason="this CPU has no AVX-512: bf16 GEMMs take minutes; run scripts/validate_real.py on a capable machine",
)


def _case(kind: str, family: str, checkpointing: bool) -> RealSetup:
    return next(s for s in validation_cases() if (s.kind, s.family, s.checkpointing) == (kind, family, checkpointing))


@pytest.mark.parametrize(("kind", "family", "checkpointing"), [
    ("plain", "qwen2", True),   # tied embeddings: three vocabulary-sized gradients at the embedding's backward
    ("plain", "llama", False),  # untied head: its new gradient on top of every activation
    ("trl", "llama", True),
    ("trl", "qwen2", False),
])
def test_plan_agrees_with_a_real_step(kind: str, family: str, checkpointing: bool) -> None:
    pytest.importorskip("trl" if kind == "trl" else "transformers")
    from oomless.trace.real_steps import measure

    setup = _case(kind, family, checkpointing)
    if kind == "plain":  # shorter prompts keep the test fast; the agreement does not depend on it
        setup = replace(setup, prompt_len=64)
    measured = measure(setup)
    planned = planned_train_phase(setup)
    diff = relative_difference(planned.total_bytes, measured.peak_bytes)
    assert abs(diff) <= TOLERANCES[kind], (
        f"planned {planned.by_category} ({planned.components}) vs measured {measured.peak_by_category}: {diff:+.2%}"
    )


def test_chunked_head_work_buffer_is_as_wide_as_a_tile_whatever_the_vocabulary() -> None:
    # 128 positions × 32,768 columns × 2 B, for a 64-token vocabulary and for a 16,384-token one
    assert L.head_work_buffer_bytes(128) == 128 * 32768 * 2
    assert L.head_work_buffer_bytes(10_000) == 4096 * 32768 * 2


def test_chunked_head_training_bytes_by_hand() -> None:
    config = {"model_type": "llama", "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
              "num_attention_heads": 2, "num_key_value_heads": 2, "vocab_size": 10, "tie_word_embeddings": False,
              "max_position_embeddings": 64}
    arch = arch_from_config(config, "hand")
    b, c, s, h, v = 2, 3, 7, 8, 10
    n = b * c
    buffer = 2 * n * 32768
    # backward: saved bf16 hidden + buffer + fp32 and bf16 hidden gradients + fp32 weight gradient
    expected = 2 * n * h + buffer + (4 + 2) * n * h + 4 * v * h
    got = L.training_logits_bytes(arch, LogitsMode.chunked_head, b, c, chunk_rows=1, seq_len=s)
    assert got == expected
    frozen = L.training_logits_bytes(arch, LogitsMode.chunked_head, b, c, chunk_rows=1, seq_len=s, frozen_head=True)
    assert frozen == expected - 4 * v * h


def test_a_later_micro_batch_adds_the_vocabulary_sized_gradient() -> None:
    setup = _case("plain", "llama", False)
    planned = planned_train_phase(setup)
    g = 2 * setup.config["vocab_size"] * setup.config["hidden_size"]
    assert 0 < planned.components["policy.accumulating.grads"] <= g
