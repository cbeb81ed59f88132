"""Seed case S1 and phase-level behaviour of the planner."""

from __future__ import annotations

import pytest

from oomless.memory import constants as C
from oomless.planner.plan import make_plan
from oomless.spec.load import load_run
from oomless.units import GiB
from tests.helpers import BASE_SPEC, EXAMPLES, component, merged, phase_peak, plan_of

SEEDS = EXAMPLES / "seeds"


def plan_file(name: str):
    run = load_run(SEEDS / name)
    return make_plan(run.spec, run.arch, run.gpu, run.archs)


def plan_of_file_with(name: str, **overrides):
    from oomless.spec.load import read_yaml

    return plan_of(merged(read_yaml(SEEDS / name), **overrides))


def test_s1_before_breaks_at_engine_start_on_the_shared_gpu() -> None:
    plan = plan_file("s1-before.yaml")
    assert not plan.fits
    b = plan.binding
    # ms-swift's engine lands on GPU 3 beside trainer rank 3, whose LoRA base (14.2 GiB,
    # whole under ZeRO-2) is already there: vLLM cannot get its 0.8 × 23.7 GiB, whatever the
    # batch ("OOM even at the smallest batch").
    assert (b.phase, b.device, b.component) == ("load", "gpu", "vllm.gpu_memory_utilization")
    assert b.device_role == "actor+vllm"
    assert b.required_bytes == plan.engine.requested_bytes
    smaller = plan_of_file_with("s1-before.yaml", **{"batch.micro_batch_size": 1})
    assert smaller.binding.component == "vllm.gpu_memory_utilization"
    assert not smaller.fits


def test_s1_before_separate_layout_would_have_fitted() -> None:
    # The other layout the report allows is consistent with "trains", not with the OOM.
    assert plan_file("s1-before-separate.yaml").fits


def test_s1_after_fits_on_separate_gpus() -> None:
    plan = plan_file("s1-after.yaml")
    assert plan.fits
    assert {g.role for g in plan.devices} == {"train", "rollout"}


def test_s1_after_with_the_engine_on_a_training_gpu_cannot_start() -> None:
    plan = plan_file("s1-after-shared.yaml")
    assert not plan.fits
    assert plan.binding.component == "vllm.gpu_memory_utilization"


def test_vllm_startup_sees_the_weights_but_not_the_optimizer() -> None:
    # The engine starts after the weights are on the GPU (ZeRO-3 shards, whole ZeRO-2
    # models) and before deepspeed.initialize creates optimizer states.
    for strategy in ("zero2", "zero3"):
        plan = plan_of(merged(BASE_SPEC, **{"distribution.strategy": strategy}))
        start = next(c for c in plan.constraints if c.component == "vllm.gpu_memory_utilization")
        weights = sum(component(plan, "load", f"{m}.{part}") for m in ("policy", "reference") for part in ("weights", "persistent_params"))
        overheads = component(plan, "load", "cuda_context") + component(plan, "load", "nccl")
        assert start.available_bytes == plan.shape.capacity_bytes - overheads - weights


def test_sleep_level_frees_engine_in_training() -> None:
    awake = plan_of(merged(BASE_SPEC, **{"rollout.sleep_level": 0}))
    asleep = plan_of(BASE_SPEC)
    assert component(awake, "train", "vllm.kv_cache") > 0
    assert component(asleep, "train", "vllm.kv_cache") == 0
    assert component(asleep, "train", "vllm.cuda_graphs") == C.VLLM_CUDA_GRAPH_BYTES


def test_level_one_sleep_pins_weights_on_host_per_worker() -> None:
    plan = plan_of(BASE_SPEC)
    host = {c.name: c.num_bytes for p in plan.host.phases if p.name == "train" for c in p.components}
    # Per worker: the weight segments, each rounded up to a power of two when pinned.
    from oomless.memory.pinned import vllm_sleep_backup_bytes

    assert host["vllm.sleep_weights_pinned"] == vllm_sleep_backup_bytes(plan.arch, 1) * 4
    assert plan.engine.weight_bytes * 4 < host["vllm.sleep_weights_pinned"] < plan.engine.weight_bytes * 4 * 2
    level2 = plan_of(merged(BASE_SPEC, **{"rollout.sleep_level": 2}))
    assert all(c.name != "vllm.sleep_weights_pinned" for p in level2.host.phases for c in p.components)


def test_ray_threshold_is_the_host_limit() -> None:
    plan = plan_of(merged(BASE_SPEC, **{"ray.enabled": True}))
    assert plan.host.limit_bytes == int(512 * GiB * 0.95)
    host = [c for c in plan.constraints if c.device == "host"]
    assert len(host) == 1 and "Ray" in host[0].message


def test_host_offload_can_be_the_binding_constraint() -> None:
    data = merged(BASE_SPEC, model="Qwen/Qwen2.5-7B-Instruct", **{
        "hardware.gpus_per_node": 8, "hardware.host_ram_gib": 64, "ray.enabled": True,
        "distribution.offload_optimizer": True, "distribution.offload_params": True})
    plan = plan_of(data)
    assert not plan.fits
    assert plan.binding.device == "host"


def test_hf_generate_gathers_zero3_weights_and_keeps_kv() -> None:
    plan = plan_of(merged(BASE_SPEC, **{"rollout.engine": "hf", "rollout.sleep_level": 0}))
    assert component(plan, "rollout", "generate.gathered_weights") > 0
    # 2 × 4 sequences of 1024 tokens × KV bytes/token (28 layers, 2 KV heads of 128, bf16).
    assert component(plan, "rollout", "generate.kv_cache") == 8 * 1024 * (2 * 28 * 2 * 128 * 2)
    assert all(p.name != "weight_sync" for p in plan.devices[0].phases)


def test_no_logprob_phase_without_kl_or_rollout_reuse() -> None:
    plan = plan_of(merged(BASE_SPEC, kl_beta=0.0))
    assert "logprob" not in [p.name for p in plan.devices[0].phases]
    reuse = plan_of(merged(BASE_SPEC, kl_beta=0.0, **{"batch.steps_per_generation": 8}))
    assert "logprob" in [p.name for p in reuse.devices[0].phases]


def test_kv_too_small_for_max_model_len_breaks() -> None:
    plan = plan_of(merged(BASE_SPEC, **{"rollout.gpu_memory_utilization": 0.05, "rollout.max_model_len": 131072}))
    kv = next(c for c in plan.constraints if c.component == "vllm.kv_cache")
    assert not kv.ok


@pytest.mark.parametrize("logits", ["chunked", "fused"])
def test_logits_modes_lower_train_peak(logits: str) -> None:
    # 8 × 1024 = 8192 completion rows, more than a 2048-row chunk (with fewer rows than one
    # chunk, chunking cannot help: the model says so too).
    # Both replace the fp32 upcast path.
    data = merged(BASE_SPEC, logits="full_fp32", **{"batch.micro_batch_size": 8, "lengths.max_completion_tokens": 1024})
    full = plan_of(data)
    other = plan_of(merged(data, logits=logits))
    assert phase_peak(other, "train") < phase_peak(full, "train")


def test_s4_before_breaks_at_load_because_the_engine_took_the_card() -> None:
    plan = plan_file("s4-before.yaml")
    assert not plan.fits
    assert (plan.binding.phase, plan.binding.device) == ("load", "gpu")
    # The engine reserved 0.85 × 79.15 GiB before the models: the report's 66.85 GiB
    # allocated by PyTorch is that reservation less its non-torch part, within 1 %.
    torch_allocated = plan.engine.requested_bytes - plan.engine.non_torch_bytes
    assert abs(torch_allocated / GiB - 66.85) / 66.85 < 0.01
    # The engine's own start-up check passes: it was created on an empty GPU.
    start = next(c for c in plan.constraints if c.component == "vllm.gpu_memory_utilization")
    assert start.ok


def test_s4_after_fits() -> None:
    assert plan_file("s4-after.yaml").fits


def test_s0_before_breaks_at_load_and_after_fits() -> None:
    before, after = plan_file("s0-before.yaml"), plan_file("s0-after.yaml")
    assert not before.fits
    assert (before.binding.phase, before.binding.device) == ("load", "gpu")
    assert after.fits
    # 602112 px is 768 tokens (24 × 32 patches of 28 px) per image.
    assert before.shape.image_tokens_per_prompt == 768


def test_s3_breaks_in_training_on_the_worst_case_image_and_fits_at_batch_one() -> None:
    """HF generate's prefill runs the tower over the generation batch's worst-case images and
    breaks first (rollout); training, with the tower's saved activations the largest part,
    needs more than twice the card."""
    before, after = plan_file("s3-before.yaml"), plan_file("s3-after.yaml")
    assert before.shape.image_tokens_per_prompt == 16_384
    assert not before.fits
    assert (before.binding.phase, before.binding.device) == ("rollout", "gpu")
    train = next(c for c in before.constraints if c.phase == "train" and c.device == "gpu")
    assert not train.ok and train.component == "vision.activations" and train.required_bytes > 2 * train.available_bytes
    assert after.fits


def test_s2_host_components_and_what_the_fix_removes() -> None:
    before, after = plan_file("s2-before.yaml"), plan_file("s2-after.yaml")
    peak = before.host.peak_phase
    names = {c.name for c in peak.components}
    assert peak.name == "rollout"
    assert {"moved_to_cpu.actor.weights", "moved_to_cpu.actor.optimizer_states", "vllm.sleep_weights_pinned", "ray.object_store"} <= names
    moved = sum(c.num_bytes for c in peak.components if c.name.startswith("moved_to_cpu."))
    assert before.host.peak_phase.peak_bytes - after.host.peak_phase.peak_bytes == moved
    # The GPUs were fine in both runs.
    assert all(c.ok for c in before.constraints if c.device == "gpu")
    assert all(c.ok for c in after.constraints if c.device == "gpu")


def test_s2_before_crosses_rays_threshold_at_the_step_the_timeline_gives() -> None:
    """S2 with its environment (vLLM 0.7.3, 60 rounds): the phases fit, host RAM grows by the
    V0 engine's n > 1 request leak and crosses Ray's threshold within the run; the fix (offload
    off) moves the crossing later without removing it; without the version nothing grows."""
    before, after = plan_file("s2-before.yaml"), plan_file("s2-after.yaml")
    for plan in (before, after):
        b = plan.binding
        assert not plan.fits and b.kind == "host_steps" and b.component.startswith("vLLM 0.7.3 V0 engine")
        assert b.first_step == plan.timeline.crossing_step <= plan.timeline.horizon_steps == 60
        assert plan.timeline.host_bytes_at(b.first_step) > plan.host.limit_bytes >= plan.timeline.host_bytes_at(b.first_step - 1)
        assert all(c.ok for c in plan.constraints if c.kind != "host_steps")  # every phase fits
    assert after.timeline.crossing_step > before.timeline.crossing_step
    small = [plan_of_file_with(f"s2-{case}.yaml", **{"vision.typical_pixels": 262144}) for case in ("before", "after")]
    assert before.timeline.crossing_step < small[0].timeline.crossing_step < small[1].timeline.crossing_step <= 60
    unknown = plan_of_file_with("s2-before.yaml", **{"rollout.vllm_version": None})
    assert unknown.fits and unknown.timeline.growth == ()
