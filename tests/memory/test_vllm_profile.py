"""vLLM's start-up profile peak (`memory.vllm.profile_activation_bytes`, `memory.vllm_sampler`):
the dummy sampler run's bytes per logit by vLLM version, hand-counted from the source, and how
the peak responds to its inputs."""

from __future__ import annotations

import dataclasses

import pytest

from oomless.catalog.arch import ModelArch
from oomless.catalog.resolve import load_model
from oomless.memory import constants as C
from oomless.memory import vllm as V
from oomless.memory import vllm_sampler as VS

VOCAB = 151_936  # Qwen2 / Qwen3


def per_logit(version: str | None, rows: int, vocab: int = VOCAB) -> float:
    return VS.sampler_peak_bytes(version, rows, vocab) / (rows * vocab)


@pytest.mark.parametrize("version", ["0.8.5", "0.9.0", "0.10.2", "0.11", "0.16.0"])
def test_sort_releases_hold_38_bytes_per_logit_from_128_rows(version: str) -> None:
    # bf16 logits 2 + fp32 copy 4 + sorted values 4 + int64 indices 8 (vLLM's locals)
    # + torch's segmented sort: int64 iota 8 + CUB's alternate keys 4 and values 8.
    assert per_logit(version, 128) == 2 + 4 + 4 + 8 + 8 + 4 + 8 == 38
    assert per_logit(version, 1024) == 38


def test_sort_releases_below_128_rows_take_the_full_sort_workspace() -> None:
    # full-sort path: two int2 buffers 16 + keys output 4 + CUB alternate keys 4 and int2 values 8
    assert per_logit("0.10.2", 64) == 18 + 8 + 8 + 4 + 4 + 8 == 50
    assert per_logit("0.10.2", 127) == 50
    assert per_logit("0.10.2", 1) == 38


@pytest.mark.parametrize("version", ["0.17.0", "0.21", "0.28.0"])
def test_triton_releases_hold_14_bytes_per_logit_plus_the_cached_buffer(version: str) -> None:
    # bf16 logits 2 + fp32 copy 4 + softmax probs 4 + exponential noise 4 (top-k/top-p in place)
    rows = 128
    buffer = rows * VOCAB * C.FP32_BYTES  # 128 rows: next power of two, under the SM bound
    assert VS.sampler_peak_bytes(version, rows, VOCAB) == rows * VOCAB * (2 + 4 + 4 + 4) + buffer
    assert VS.sampler_state_bytes(version, 1024, VOCAB) == 0


@pytest.mark.parametrize("version", ["0.29.0", "0.31.0", "0.32.0"])
def test_model_runner_v2_default_pass_holds_the_bf16_logits_only(version: str) -> None:
    assert per_logit(version, 128) == 2


@pytest.mark.parametrize("version", ["0.33.0", "1.0"])
def test_model_runner_v2_warmup_pass_holds_14_bytes_per_logit(version: str) -> None:
    # bf16 logits 2 + fp32 copy 4 + FlashInfer's top-k-masked logits 4 + probs 4, no Triton buffer
    assert per_logit(version, 128) == 2 + 4 + 4 + 4
    assert per_logit(version, 1024) == 14


@pytest.mark.parametrize("version", ["0.29.0", "0.33.0", None])
def test_model_runner_v2_keeps_penalty_counts_per_request_slot(version: str | None) -> None:
    # output_bin_counts [max_num_seqs, V] int32 + prompt_bin_mask [max_num_seqs, ceil(V / 32)] int32
    assert VS.sampler_state_bytes(version, 1024, VOCAB) == 1024 * (VOCAB + 4748) * 4
    assert VS.sampler_state_bytes(version, 256, VOCAB) == VS.sampler_state_bytes(version, 1024, VOCAB) // 4


def test_triton_buffer_rows_are_a_power_of_two_capped_at_the_sm_bound() -> None:
    assert VS.triton_top_k_top_p_buffer_bytes(100, VOCAB) == 128 * VOCAB * 4
    assert VS.triton_top_k_top_p_buffer_bytes(1, VOCAB) == 1 * VOCAB * 4
    assert VS.triton_top_k_top_p_buffer_bytes(1024, VOCAB) == C.CUDA_MAX_SM_COUNT * VOCAB * 4


def test_unknown_version_gets_the_newest_rule() -> None:
    for rows in (1, 64, 128, 1024):
        assert VS.sampler_peak_bytes(None, rows, VOCAB) == VS.sampler_peak_bytes("0.33.0", rows, VOCAB)
        assert VS.sampler_state_bytes(None, rows, VOCAB) == VS.sampler_state_bytes("0.33.0", rows, VOCAB)
    assert VS.retained_forward_output_bytes(None, 4096, 896) == VS.retained_forward_output_bytes("0.33.0", 4096, 896)
    assert VS.vllm_release("0.10.2rc1") == (0, 10, 2)
    assert VS.vllm_release(None) is None


def test_forward_output_is_kept_through_the_sampler_from_0_9_2() -> None:
    assert VS.retained_forward_output_bytes("0.9.0", 4096, 896) == 0
    assert VS.retained_forward_output_bytes("0.9.1", 4096, 896) == 0
    assert VS.retained_forward_output_bytes("0.9.2", 4096, 896) == 4096 * 896 * 2
    assert VS.retained_forward_output_bytes("0.10.2", 4096, 896) == 4096 * 896 * 2


def _arch(**changes: int) -> ModelArch:
    """Qwen2-0.5B-Instruct from the catalog (hidden 896, vocab 151,936), optionally changed."""
    return dataclasses.replace(load_model("Qwen/Qwen2-0.5B-Instruct"), **changes)


@pytest.mark.parametrize("version", ["0.8.5", "0.10.2", None])
def test_profile_peak_grows_with_max_num_seqs_and_vocab(version: str | None) -> None:
    arch = _arch()
    small = V.profile_activation_bytes(arch, 1, 4096, 64, version)
    assert V.profile_activation_bytes(arch, 1, 4096, 256, version) > small
    assert V.profile_activation_bytes(_arch(vocab_size=2 * VOCAB), 1, 4096, 64, version) > small


def test_profile_peak_of_the_cookbook_engine_is_the_0_10_2_sampler() -> None:
    # vLLM 0.10.2, max_num_batched_tokens 4096, max_num_seqs 128, Qwen2-0.5B's shapes: the sampler
    # (38 B per logit over 128 × 151,936) plus the kept forward output [4096, 896] bf16.
    expected = 128 * VOCAB * 38 + 4096 * 896 * 2
    assert V.profile_activation_bytes(_arch(), 1, 4096, 128, "0.10.2") == expected
    # model runner V2 (>= 0.29) adds its penalty counts for every max_num_seqs slot on top of the peak
    newest = V.profile_activation_bytes(_arch(), 1, 4096, 128, None)
    assert newest == 128 * VOCAB * 14 + 4096 * 896 * 2 + 128 * (VOCAB + 4748) * 4
