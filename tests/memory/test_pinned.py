"""Pinned host memory: power-of-two rounding (vLLM reports), the CUDA caching allocator's
segment rules, FSDP units, vLLM sleep backups and DeepSpeed flat partitions, by hand."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oomless.catalog.models import arch_from_config
from oomless.catalog.resolve import catalog_ids, load_model
from oomless.memory import params as P
from oomless.memory import pinned as Pn
from oomless.units import GiB, KiB, MiB

TINY_QWEN2 = {
    "model_type": "qwen2", "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 2,
    "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 32,
    "tie_word_embeddings": False, "max_position_embeddings": 64,
}
"""h=8, I=16, L=2, a=2, k=1, d=4, V=32: 1736 params (hand count in test_params.py)."""
TINY = arch_from_config(TINY_QWEN2, "tiny")
QWEN2_5_VL_7B = load_model("Qwen/Qwen2.5-VL-7B-Instruct")

# --- power-of-two rounding ---------------------------------------------------------------------


@pytest.mark.parametrize(("size", "pinned"), [
    (6 * GiB, 8 * GiB), (10 * GiB, 16 * GiB), (12 * GiB, 16 * GiB),  # vLLM PR #50094 (VmRSS)
    (int(2.08 * GiB), 4 * GiB),  # vLLM issue #53042 (Shmem)
    (0, 0), (1, 1), (3, 4), (4096, 4096), (4097, 8192),
])
def test_pinned_allocation_is_next_power_of_two(size: int, pinned: int) -> None:
    assert Pn.pinned_allocation_bytes(size) == pinned


def test_pinned_total_rounds_each_allocation() -> None:
    # 3 + 5 would be 8 if pooled; rounded one by one they are 4 + 8.
    assert Pn.pinned_total_bytes([3, 5, 0]) == 12


@given(st.integers(min_value=1, max_value=2**50))
def test_pinned_allocation_is_within_a_factor_of_two(size: int) -> None:
    pinned = Pn.pinned_allocation_bytes(size)
    assert size <= pinned < 2 * size
    assert pinned & (pinned - 1) == 0


# --- CUDA caching allocator segments -------------------------------------------------------------


@pytest.mark.parametrize(("requests", "segments"), [
    # small (<= 1 MiB, rounded to 512 B): packed into 2 MiB segments.
    ([1], [2 * MiB]),
    ([512] * 4096, [2 * MiB]),  # 4096 x 512 B = exactly 2 MiB
    ([512] * 4097, [2 * MiB, 2 * MiB]),
    ([1000] * 2048, [2 * MiB]),  # 1000 -> 1024 B blocks, 2048 of them fill 2 MiB
    ([1 * MiB, 1 * MiB], [2 * MiB]),
    # medium (1-10 MiB): 20 MiB segments, shared best-fit.
    ([1 * MiB + 1], [20 * MiB]),
    ([6 * MiB] * 3, [20 * MiB]),  # 6 + 6 + 6 = 18 <= 20
    ([6 * MiB] * 4, [20 * MiB, 20 * MiB]),
    # large (>= 10 MiB): own segment rounded up to 2 MiB.
    ([10 * MiB], [10 * MiB]),
    ([11 * MiB], [12 * MiB]),
    ([int(129.5 * MiB)], [130 * MiB]),
    # a large request fits the 18 MiB remainder of a medium segment, but not the reverse order.
    ([2 * MiB, 12 * MiB], [20 * MiB]),
    ([12 * MiB, 2 * MiB], [12 * MiB, 20 * MiB]),
    # pools are separate: a small request never uses a large-pool remainder.
    ([5 * MiB, 1 * KiB], [20 * MiB, 2 * MiB]),
    ([0, 0], []),
])
def test_segment_rules(requests: list[int], segments: list[int]) -> None:
    assert list(Pn.caching_allocator_segments(requests)) == segments


@given(st.lists(st.integers(min_value=0, max_value=64 * MiB), max_size=60))
def test_segments_hold_every_block(requests: list[int]) -> None:
    blocks = sum(Pn.cuda_block_bytes(r) for r in requests if r)
    segments = Pn.caching_allocator_segments(requests)
    assert sum(segments) >= blocks
    assert all(s % (2 * MiB) == 0 for s in segments)


# --- FSDP units and offload ----------------------------------------------------------------------


def test_tiny_fsdp_units_by_hand() -> None:
    # two decoder layers of 608; root = embedding 256 + final norm 8 + lm_head 256 = 520.
    assert Pn.fsdp_unit_parameters(TINY) == (608, 608, 520)
    # N=2: shards 304, 304, 260 fp32 = 1216, 1216, 1040 B -> 2048 each.
    assert Pn.fsdp_unit_shard_numels(TINY, 2) == (304, 304, 260)
    assert Pn.fsdp_offload_pinned_bytes(TINY, 2, 4) == 3 * 2048
    # N=3: ceil(608/3) = 203 -> 812 B -> 1024; ceil(520/3) = 174 -> 696 B -> 1024.
    assert Pn.fsdp_offload_pinned_bytes(TINY, 3, 4) == 3 * 1024
    # Adam: exp_avg + exp_avg_sq, each like the fp32 params.
    assert Pn.fsdp_optimizer_offload_pinned_bytes(TINY, 3) == 2 * 3 * 1024


@pytest.mark.parametrize("model", catalog_ids())
def test_fsdp_units_sum_to_the_model(model: str) -> None:
    arch = load_model(model)
    units = Pn.fsdp_unit_parameters(arch)
    assert sum(units) == P.num_parameters(arch)
    assert len(units) > arch.num_layers  # every layer plus the root (plus vision units)


def test_qwen2_5_vl_units_are_layers_blocks_and_root() -> None:
    arch = QWEN2_5_VL_7B
    units = Pn.fsdp_unit_parameters(arch)
    assert arch.vision is not None
    assert len(units) == arch.num_layers + arch.vision.depth + 1
    assert units[0] == P.num_parameters_per_decoder_layer(arch, "dense")


def test_fsdp_offload_is_at_least_the_raw_shard() -> None:
    arch = QWEN2_5_VL_7B
    raw = 4 * P.num_parameters(arch) / 8
    assert raw <= Pn.fsdp_offload_pinned_bytes(arch, 8, 4) < 2 * raw


# --- vLLM sleep level 1 --------------------------------------------------------------------------


def test_tiny_vllm_requests_by_hand() -> None:
    # TP=1: embedding V padded to 64 -> 64*8*2 = 1024 B; per layer qkv (8+4+4)*8*2 = 256 + bias
    # 16*2 = 32, o 8*8*2 = 128, gate_up 32*8*2 = 512, down 16*8*2 = 256, 2 norms of 16;
    # final norm 16; lm_head 1024.
    layer = (256, 32, 128, 512, 256, 16, 16)
    assert Pn.vllm_weight_request_sizes(TINY, 1) == (1024, *layer, *layer, 16, 1024)
    # TP=2: 32 vocab rows; 1 q head + the 1 kv head replicated: (4+4+4)*8*2 = 192, bias 24;
    # o 8*4*2 = 64; gate_up 16*8*2 = 256; down 8*8*2 = 128.
    layer2 = (192, 24, 64, 256, 128, 16, 16)
    assert Pn.vllm_weight_request_sizes(TINY, 2) == (512, *layer2, *layer2, 16, 512)
    # all small: 9728 B of 512 B blocks share one 2 MiB segment.
    assert Pn.vllm_sleep_backup_bytes(TINY, 1) == 2 * MiB


@pytest.mark.parametrize("model", catalog_ids())
def test_vllm_requests_at_tp1_are_the_bf16_model(model: str) -> None:
    arch = load_model(model)
    padded_rows = math.ceil(arch.vocab_size / 64) * 64 - arch.vocab_size
    vocab_tensors = 1 if arch.tie_word_embeddings else 2
    expected = 2 * (P.num_parameters(arch) + padded_rows * arch.hidden_size * vocab_tensors)
    assert sum(Pn.vllm_weight_request_sizes(arch, 1)) == expected


def test_qwen2_5_vl_7b_tp2_gate_up() -> None:
    # one rank's gate_up_proj: 3584 x 18944 x 2 (gate, up) x 2 B / 2 ranks = 129.5 MiB,
    # its own segment of 130 MiB, pinned as 256 MiB.
    gate_up = 3584 * 18944 * 2 * 2 // 2
    assert gate_up == int(129.5 * MiB)
    requests = Pn.vllm_weight_request_sizes(QWEN2_5_VL_7B, 2)
    assert requests.count(gate_up) == QWEN2_5_VL_7B.num_layers
    assert Pn.caching_allocator_segments([gate_up]) == (130 * MiB,)
    assert Pn.pinned_total_bytes(Pn.caching_allocator_segments([gate_up])) == 256 * MiB


def test_qwen2_5_vl_7b_tp2_backup_exceeds_raw_weights() -> None:
    raw = 2 * P.num_parameters(QWEN2_5_VL_7B) / 2
    backup = Pn.vllm_sleep_backup_bytes(QWEN2_5_VL_7B, 2)
    assert raw < backup < 2 * raw


# --- DeepSpeed flat partitions --------------------------------------------------------------------


def test_flat_partition_by_hand() -> None:
    assert Pn.flat_partition_pinned_bytes(1000, 4) == 4096  # 4000 B -> 4096
    # sub-groups of 300: 300, 300, 300, 100 elements -> 1200 B -> 2048 (x3), 400 B -> 512.
    assert Pn.flat_partition_pinned_bytes(1000, 4, sub_group_size=300) == 3 * 2048 + 512
    assert Pn.flat_partition_pinned_bytes(1000, 4, sub_group_size=5000) == 4096
    assert Pn.flat_partition_pinned_bytes(0, 4, sub_group_size=300) == 0


def test_bad_arguments_name_the_field() -> None:
    with pytest.raises(ValueError, match="num_shards"):
        Pn.fsdp_unit_shard_numels(TINY, 0)
    with pytest.raises(ValueError, match="tensor_parallel_size"):
        Pn.vllm_weight_request_sizes(TINY, 0)
    with pytest.raises(ValueError, match="sub_group_size"):
        Pn.flat_partition_pinned_bytes(10, 4, sub_group_size=0)
