"""verl `use_fused_kernels` (logits: fused_token_chunks): the LM head in 512-token chunks
(verl/utils/experimental/torch_functional.py `FusedLinearForPPO`), by hand."""

from __future__ import annotations

from pathlib import Path

from oomless.catalog.resolve import load_model
from oomless.memory import logits as L
from oomless.spec.run import LogitsMode
from tests.adapters.native_helpers import imported
from tests.adapters.test_verl_tuning import PER_GPU, script


def test_training_holds_one_chunk_of_fp32_work_beside_full_gradients() -> None:
    arch = load_model("Qwen/Qwen2.5-7B-Instruct")
    v, h = arch.vocab_size, arch.hidden_size
    n = 30720  # ten packed sequences of 3,072 tokens
    got = L.training_logits_bytes(arch, LogitsMode.fused_token_chunks, 1, n - 1, 2048, n)
    # hidden states kept + their gradient (bf16, n·h each) + the head's weight gradient (bf16, V·h)
    # + one 512-token chunk at 2 + 5·4 (log-prob gradient) + 2·4 (entropy) = 30 bytes a logit
    assert got == 2 * 2 * n * h + 2 * v * h + 512 * v * 30
    frozen = L.training_logits_bytes(arch, LogitsMode.fused_token_chunks, 1, n - 1, 2048, n, frozen_head=True)
    assert got - frozen == 2 * v * h
    # a whole packed row's logits are never held: far below one bf16 copy of them
    assert got < 2 * n * v
    # the no-grad pass: one chunk's bf16 logits, fp32 copy, softmax and log-softmax
    assert L.logprob_logits_bytes(arch, LogitsMode.fused_token_chunks, 1, n - 1, 2048, n) == 512 * v * 14
    assert L.logprob_logits_bytes(arch, LogitsMode.fused_token_chunks, 1, 99, 2048, 100) == 100 * v * 14


def test_verl_reads_use_fused_kernels_as_its_chunked_head(tmp_path: Path) -> None:
    spec = imported("verl", script(tmp_path, PER_GPU, "actor_rollout_ref.model.use_fused_kernels=True"), gpu="H100-80GB")
    assert spec.logits == LogitsMode.fused_token_chunks and spec.batch.padding_free
