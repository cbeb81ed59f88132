"""vLLM engine and host-RAM terms: hand-derived cases and published rules."""

from __future__ import annotations

import math

import pytest

from oomless.catalog.resolve import load_model
from oomless.memory import constants as C
from oomless.memory import host as H
from oomless.memory import vllm as V
from oomless.units import GB, GiB

QWEN2_7B = load_model("Qwen/Qwen2-7B-Instruct")  # 28 layers, 4 KV heads of 128


@pytest.mark.parametrize(("tp", "expected"), [(1, 57_344), (2, 28_672), (4, 14_336), (8, 14_336)])
def test_kv_bytes_per_token(tp: int, expected: int) -> None:
    # 2 (K,V) · 28 layers · kv heads per rank · 128 · 2 B; TP 8 > 4 KV heads replicates one head.
    assert V.kv_bytes_per_token(QWEN2_7B, tp) == expected


def test_mla_kv_is_the_compressed_latent() -> None:
    ds = load_model("deepseek-ai/DeepSeek-V3")
    # (kv_lora_rank 512 + rope 64) · 2 B per layer, 61 layers: research §2 "576·2 B/token/layer".
    assert V.kv_bytes_per_token(ds, 8) == 61 * 576 * 2


def test_sequence_kv_rounds_to_blocks() -> None:
    assert V.kv_bytes_for_sequence(QWEN2_7B, 1, 17) == 32 * 57_344
    assert V.kv_bytes_for_sequence(QWEN2_7B, 1, 32_768) == 32_768 * 57_344


def test_budget_split_adds_up() -> None:
    cap = int(23.7 * GiB)
    b = V.engine_budget(QWEN2_7B, 15_231_233_024, cap, 0.8, 1, 8192, 256, False)
    assert b.requested_bytes == math.ceil(cap * 0.8)
    assert b.weight_bytes == 15_231_233_024
    assert b.cuda_graph_bytes == C.VLLM_CUDA_GRAPH_BYTES
    assert b.kv_cache_bytes == b.requested_bytes - b.weight_bytes - b.activation_bytes - b.non_torch_bytes - b.cuda_graph_bytes
    eager = V.engine_budget(QWEN2_7B, 15_231_233_024, cap, 0.8, 1, 8192, 256, True)
    assert eager.kv_cache_bytes - b.kv_cache_bytes == C.VLLM_CUDA_GRAPH_BYTES


def test_scheduler_defaults_follow_vllm_rule() -> None:
    # >= 70 GiB and not A100 -> large defaults; A100-80GB and 24 GB cards -> small.
    assert V.default_max_num_batched_tokens(int(79.1 * GiB), is_a100=False) == 16384
    assert V.default_max_num_batched_tokens(int(79.15 * GiB), is_a100=True) == 8192
    assert V.default_max_num_seqs(int(23.7 * GiB), is_a100=False) == 256


def test_per_tensor_offload_rounds_each_tensor() -> None:
    # Two 3-MiB tensors (bf16, 1.5M elements each) moved whole: 2 × 4 MiB pinned; sharded over
    # 3 ranks each shard is 1 MiB exactly.
    tensors = [(1_572_864, 2)]
    assert H.per_tensor_offload_pinned_bytes(tensors, 3, False, 2) == 2 * 4 * 2**20
    assert H.per_tensor_offload_pinned_bytes(tensors, 3, True, 2) == 2 * 2**20


def test_ray_object_store_cap() -> None:
    assert H.ray_object_store_cap_bytes(100 * GB, 0.3) == 30 * GB
    assert H.ray_object_store_cap_bytes(1000 * GB, 0.3) == 200 * GB


def test_ray_object_store_holds_the_steps_batch_twice_within_its_cap() -> None:
    """Pages count once objects fill them (no MAP_POPULATE by default): a call's arguments and
    results, not the store's size."""
    batch = H.ray_step_batch_bytes(sequences=2560, sequence_tokens=4096, response_tokens=2048, position_rows=3,
                                   prompts=512, pixel_bytes_per_prompt=6_000_000)
    assert batch == 2560 * (4096 * (24 + 16) + 2048 * 40) + 512 * 6_000_000
    assert H.ray_object_store_bytes(1000 * GB, 0.3, batch) == 2 * batch
    assert H.ray_object_store_bytes(10 * GB, 0.3, batch) == 3 * GB  # the cap still bounds it


def test_loading_with_sharded_init_streams_one_file() -> None:
    assert H.model_loading_bytes_per_process(15 * GB, True, 5 * GB) == 5 * GB
    assert H.model_loading_bytes_per_process(15 * GB, False, 5 * GB) == 15 * GB
