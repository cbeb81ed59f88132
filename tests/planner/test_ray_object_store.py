"""Ray's object store on the host: what a step's calls hold (planner/host_phases.py
`ray_step_batch`, memory/host.py `ray_object_store_bytes`), from the first step on."""

from __future__ import annotations

from oomless.memory import constants as C
from oomless.planner.host_phases import ray_step_batch
from oomless.spec.load import parse_spec, resolve
from tests.helpers import plan_of

RAY = {"model": "Qwen/Qwen2.5-7B-Instruct", "hardware": {"gpu": "A100-80GB", "gpus_per_node": 8, "host_ram_gib": 1024},
       "distribution": {"strategy": "fsdp"}, "ray": {"enabled": True},
       "batch": {"micro_batch_size": 4, "num_generations": 8}, "lengths": {"max_prompt_tokens": 1024, "max_completion_tokens": 2048},
       "rollout": {"engine": "vllm_colocate", "gpu_memory_utilization": 0.5, "sleep_level": 1}}


def host_component(data: dict, phase: str, name: str) -> int:
    plan = plan_of(data)
    comps = next(p for p in plan.host.phases if p.name == phase).components
    return next((c.num_bytes for c in comps if c.name == name), 0)


def test_the_store_holds_the_steps_batch_twice_from_the_first_step() -> None:
    run = resolve(parse_spec(RAY))
    from oomless.planner.shape import run_shape

    batch = ray_step_batch(run.spec, run_shape(run.spec, run.arch, run.gpu), run.arch)
    assert host_component(RAY, "rollout", "ray.object_store") == C.RAY_LIVE_BATCH_COPIES * batch
    assert host_component(RAY, "load", "ray.object_store") == 0  # nothing has passed through it yet
    assert batch < 10 * 2**30  # text GRPO: a few GiB of token tensors, far below the store's 200 GB


def test_longer_sequences_and_images_fill_it_more_and_the_cap_bounds_it() -> None:
    longer = {**RAY, "lengths": {"max_prompt_tokens": 4096, "max_completion_tokens": 8192}}
    assert host_component(longer, "rollout", "ray.object_store") > host_component(RAY, "rollout", "ray.object_store")
    small = {**RAY, "hardware": {**RAY["hardware"], "host_ram_gib": 0.01}}  # a 3 MiB store below the batch's ~10 MB
    assert host_component(small, "rollout", "ray.object_store") == int(0.01 * 2**30 * 0.3)
    vlm = {**RAY, "model": "Qwen/Qwen2.5-VL-7B-Instruct", "vision": {"images_per_prompt": 1, "max_pixels": 4_194_304}}
    assert host_component(vlm, "rollout", "ray.object_store") > 4 * host_component(RAY, "rollout", "ray.object_store")


def test_without_ray_there_is_no_store() -> None:
    assert host_component({**RAY, "ray": {"enabled": False}}, "rollout", "ray.object_store") == 0


def test_the_drivers_node_holds_every_nodes_sequences() -> None:
    two = {**RAY, "hardware": {**RAY["hardware"], "num_nodes": 2}}
    assert host_component(two, "rollout", "ray.object_store") == 2 * host_component(RAY, "rollout", "ray.object_store")
