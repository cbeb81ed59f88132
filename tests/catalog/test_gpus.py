"""GPU catalog: capacities, their provenance labels, the derived-capacity rule, aliases."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from oomless.catalog.gpus import GpuSpec, capacity_rule, gpu_ids, load_gpu
from oomless.errors import InputError
from oomless.units import GiB, MiB

ENTRIES = json.loads(
    (resources.files("oomless.catalog") / "data" / "gpus.json").read_text("utf-8"))


def test_every_entry_loads_under_a_unique_id() -> None:
    ids = gpu_ids()
    assert len(ids) == len(set(ids)) == len(ENTRIES)
    for gpu_id in ids:
        spec = load_gpu(gpu_id)
        assert isinstance(spec, GpuSpec) and spec.id == gpu_id
        assert spec.capacity_bytes > 0


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e["name"])
def test_capacity_and_its_source(entry: dict) -> None:
    spec = next(load_gpu(i) for i in gpu_ids() if load_gpu(i).name == entry["name"])
    torch_gib = entry["torch_total_capacity_GiB"]
    if torch_gib is None:
        assert spec.capacity_source == "derived"
    else:
        assert spec.capacity_source == ("measured" if entry["_verified"] else "reported")
        assert abs(spec.capacity_bytes - torch_gib * GiB) < 1
    if spec.nvidia_smi_bytes is not None:
        assert spec.nvidia_smi_bytes == entry["nvidia_smi_MiB"] * MiB
        assert spec.capacity_bytes < spec.nvidia_smi_bytes
    assert spec.capacity_bytes <= entry["marketing_GB"] * GiB
    assert spec.bf16 == entry["bf16"]


def test_verified_a100_uses_its_torch_total() -> None:
    spec = load_gpu("A100-80GB")
    assert spec.capacity_source == "measured"
    assert spec.capacity_bytes == int(79.15 * GiB)


def test_derived_capacity_uses_most_conservative_verified_ratio() -> None:
    """Verified ratios torch/nvidia-smi: A100-80GB 79.15 GiB / 81920 MiB = 0.98938,
    H100 79.11/79.647 = 0.99325, RTX-4090 23.64/23.988 = 0.98548, RTX-3090 23.70/24 = 0.98750;
    the minimum is the 4090's. A800-80GB (no torch figure, 81920 MiB) gets 81920 MiB x that."""
    ratio = 23.64 * GiB / (24564 * MiB)
    spec = load_gpu("A800-80GB")
    assert spec.capacity_source == "derived"
    assert spec.capacity_bytes == int(81920 * MiB * ratio)
    assert spec.capacity_bytes < load_gpu("A100-80GB").capacity_bytes < spec.nvidia_smi_bytes
    assert "0.98548" in capacity_rule() and "RTX-4090" in capacity_rule()


def test_derived_without_nvidia_smi_uses_marketed_size() -> None:
    spec = load_gpu("Ascend-910B")
    assert spec.nvidia_smi_bytes is None and spec.capacity_source == "derived"
    assert spec.capacity_bytes == int(64 * GiB * 23.64 * GiB / (24564 * MiB))


@pytest.mark.parametrize(
    ("alias", "gpu_id"),
    [("3090", "RTX-3090"), ("rtx3090", "RTX-3090"), ("RTX 3090", "RTX-3090"),
     ("NVIDIA GeForce RTX 4090", "RTX-4090"), ("A100 80GB", "A100-80GB"),
     ("a100-sxm4-80gb", "A100-80GB"), ("NVIDIA A100-SXM4-40GB", "A100-40GB"),
     ("NVIDIA H100 80GB HBM3", "H100-80GB"), ("h20-96gb", "H20"), ("H20", "H20"),
     ("Tesla T4", "T4"), ("t4", "T4"), ("V100-32GB", "V100-32GB"), ("a6000", "RTX-A6000"),
     ("RTX-A6000", "RTX-A6000"), ("A10", "A10"), ("a10g", "A10G"), ("L4", "L4"),
     ("l40s", "L40S"), ("L20", "L20"), ("h200", "H200"), ("B200", "B200"),
     ("ascend 910b", "Ascend-910B"), ("MI300X", "MI300X"), ("H800-80GB", "H800-80GB"),
     ("a800_80gb", "A800-80GB"), ("5090", "RTX-5090")],
)
def test_aliases(alias: str, gpu_id: str) -> None:
    assert load_gpu(alias).id == gpu_id


def test_unknown_gpu_suggests_closest() -> None:
    with pytest.raises(InputError) as err:
        load_gpu("A100-80G")
    assert err.value.field == "hardware.gpu"
    assert "A100-80GB" in str(err.value) and "\n" not in str(err.value)


def test_ambiguous_bare_name_is_not_guessed() -> None:
    """A100 comes in 40 and 80 GB; the planner must not pick one silently."""
    with pytest.raises(InputError, match="A100"):
        load_gpu("A100")
