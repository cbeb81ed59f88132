"""FLOP counts by hand on a tiny model, the training multipliers, and the GPU throughput data
(every catalog GPU covered, one source per entry)."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from oomless.catalog.gpus import gpu_ids, load_gpu
from oomless.catalog.models import arch_from_config
from oomless.perf import flops as F
from oomless.perf.hardware import REFERENCE_GPU, gpu_perf
from oomless.spec.run import FinetuneMethod
from tests.helpers import TINY_CONFIG


def test_tiny_model_flops_by_hand() -> None:
    # TINY_CONFIG: 1736 params (tests/memory/test_params.py), V·h = 256 embedding and 256
    # untied lm_head. N = 1736 - 256 (embedding lookup) = 1480; d = 2 heads × 4 = 8, L = 2.
    arch = arch_from_config(TINY_CONFIG, "tiny")
    assert F.num_matmul_parameters(arch) == 1480
    # 2·N + 4·L·d·T at T = 10: 2960 + 4·2·8·10 = 3600.
    assert F.forward_flops_per_token(arch, 10) == 3600


@pytest.mark.parametrize(("method", "recompute", "forwards"), [
    (FinetuneMethod.full, False, 3), (FinetuneMethod.full, True, 4),
    (FinetuneMethod.lora, False, 2), (FinetuneMethod.lora, True, 3), (FinetuneMethod.qlora, False, 2),
])
def test_training_multipliers(method: FinetuneMethod, recompute: bool, forwards: int) -> None:
    # 6N = 3 forwards for full fine-tuning, × 4/3 with recompute; LoRA skips base weight grads.
    assert F.training_forwards(method, recompute) == forwards


def test_sliding_window_layers_attend_to_the_window() -> None:
    arch = arch_from_config({**TINY_CONFIG, "model_type": "mistral", "sliding_window": 4}, "tiny-sw")
    assert F.attended_tokens(arch, 10) == 4
    assert F.forward_flops_per_token(arch, 10) < F.forward_flops_per_token(arch_from_config(TINY_CONFIG, "t"), 10)


def _entries() -> dict:
    text = (resources.files("oomless.catalog") / "data" / "gpu_perf.json").read_text("utf-8")
    return json.loads(text)["gpus"]


def test_every_catalog_gpu_has_throughput_figures_with_a_source() -> None:
    entries = _entries()
    assert set(entries) == set(gpu_ids())
    for gpu, e in entries.items():
        assert e["confidence"] in ("vendor", "third_party", "derived"), gpu
        assert e["source"] and e["seen_at"], gpu
        assert e["bf16_dense_tflops"] > 0 and e["memory_GBps"] > 0, gpu
        assert e["gpu_link"]["bidirectional_GBps"] > 0 and e["host_link"]["bidirectional_GBps"] > 0, gpu


def test_links_are_used_one_way_and_units_are_decimal() -> None:
    perf, note = gpu_perf(load_gpu("H100-80GB"))
    assert note is None
    assert perf.bf16_flops_per_s == pytest.approx(989.4e12)
    assert perf.memory_bytes_per_s == pytest.approx(3350e9)
    assert perf.gpu_link_bytes_per_s == pytest.approx(450e9)  # NVLink 900 GB/s bidirectional
    assert perf.host_link_bytes_per_s == pytest.approx(64e9)  # PCIe Gen5 x16 128 GB/s bidirectional


def test_a_spec_without_catalog_gpu_uses_the_reference_and_says_so() -> None:
    perf, note = gpu_perf(None)
    assert perf.gpu_id == REFERENCE_GPU
    assert note is not None and "relative" in note


def test_consumer_cards_have_no_nvlink_in_the_model() -> None:
    for gpu in ("RTX-3090", "RTX-4090", "L40S", "A10", "T4"):
        perf, _ = gpu_perf(load_gpu(gpu))
        assert perf.gpu_link_kind.startswith("pcie"), gpu
