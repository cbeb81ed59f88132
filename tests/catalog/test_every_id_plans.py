"""Issue 12, done when: a spec naming any shipped catalog id plans without error (a verdict,
fits or not, never an exception), with and without images for the VLMs."""

from __future__ import annotations

import pytest

from oomless.catalog.resolve import catalog_ids, load_catalog_model
from oomless.planner.plan import make_plan
from oomless.spec.load import parse_spec, resolve

IDS = catalog_ids()


def test_the_catalog_holds_at_least_150_models() -> None:
    assert len(IDS) >= 150


def _tp(arch) -> int:
    """The largest TP of 8, 4, 2, 1 that vLLM accepts for the model's heads."""
    kv = arch.num_kv_heads
    return next(tp for tp in (8, 4, 2, 1) if arch.num_attention_heads % tp == 0 and (kv % tp == 0 or tp % kv == 0))


@pytest.mark.parametrize("model_id", IDS)
def test_every_catalog_id_plans(model_id: str) -> None:
    arch = load_catalog_model(model_id)
    spec = {"model": model_id, "hardware": {"gpu": "H100-80GB", "gpus_per_node": 8, "host_ram_gib": 1024},
            "distribution": {"strategy": "zero3"}, "lengths": {"max_prompt_tokens": 512, "max_completion_tokens": 512},
            "rollout": {"engine": "vllm_colocate", "gpu_memory_utilization": 0.4, "tensor_parallel_size": _tp(arch)}}
    if arch.vision is not None:
        spec["vision"] = {"images_per_prompt": 1, "max_pixels": 1003520}
    run = resolve(parse_spec(spec))
    plan = make_plan(run.spec, run.arch, run.gpu, run.archs)
    assert plan.verdict in ("fits", "fits_typical", "does_not_fit")
    assert all(p.peak_bytes > 0 for g in plan.devices for p in g.phases if p.name in ("load", "train"))
