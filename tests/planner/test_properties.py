"""Properties of the plan that must hold for any spec (hypothesis), plus determinism."""

from __future__ import annotations

import copy

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oomless.planner.gpu_phases import lora_per_token
from oomless.planner import roles as R
from oomless.planner.plan import Plan, make_plan
from oomless.spec.load import parse_spec, resolve
from tests.helpers import BASE_SPEC, merged, plan_of

PROFILE = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

MODELS = st.sampled_from(["Qwen/Qwen2.5-1.5B-Instruct", "meta-llama/Llama-3.2-1B-Instruct", "Qwen/Qwen3-4B"])
STRATEGIES = st.sampled_from(["ddp", "zero1", "zero2", "zero3", "fsdp"])
ENGINES = st.sampled_from(["hf", "vllm_colocate", "vllm_separate"])
METHODS = st.sampled_from(["full", "lora", "qlora"])
LOGITS = st.sampled_from(["full_bf16", "full_fp32", "chunked", "fused"])


@st.composite
def specs(draw: st.DrawFn) -> dict:
    engine = draw(ENGINES)
    data = merged(
        BASE_SPEC,
        model=draw(MODELS),
        **{
            "finetune.method": draw(METHODS),
            "distribution.strategy": draw(STRATEGIES),
            "gradient_checkpointing": draw(st.booleans()),
            "logits": draw(LOGITS),
            "kl_beta": draw(st.sampled_from([0.0, 0.04])),
            "batch.micro_batch_size": draw(st.integers(1, 8)),
            "lengths.max_prompt_tokens": draw(st.integers(16, 4096)),
            "lengths.max_completion_tokens": draw(st.integers(16, 4096)),
            "rollout.engine": engine,
            "rollout.sleep_level": 0 if engine == "hf" else draw(st.sampled_from([0, 1, 2])),
        },
    )
    return data


def peaks(plan: Plan) -> dict[tuple[str, str], int]:
    return {(g.role, p.name): p.peak_bytes for g in plan.devices for p in g.phases}


def model_states(plan: Plan, phase: str = "train") -> int:
    names = ("policy.weights", "policy.persistent_params", "policy.grads", "policy.master_weights", "policy.optimizer_states")
    ph = next(p for p in plan.devices[0].phases if p.name == phase)
    return sum(c.num_bytes for c in ph.components if c.name in names)


def assert_not_above(smaller: Plan, larger: Plan) -> None:
    big = peaks(larger)
    for key, value in peaks(smaller).items():
        assert value <= big[key], key


@PROFILE
@given(specs(), st.sampled_from(["batch.micro_batch_size", "lengths.max_prompt_tokens", "lengths.max_completion_tokens"]), st.integers(1, 512))
def test_memory_never_falls_as_batch_or_length_grow(data: dict, field: str, extra: int) -> None:
    section, key = field.split(".")
    if section == "lengths":
        # PyTorch pads sdpa's bias per head when the length is not a multiple of 16
        # (memory/activations.py::sdpa_bias_bytes_per_sequence): memory is monotone between
        # aligned lengths, not across an unaligned one.
        data = merged(data, **{f"lengths.{k}": -(-v // 16) * 16 for k, v in data["lengths"].items()})
        extra = -(-extra // 16) * 16
    grown = merged(data, **{field: data[section][key] + extra})
    assert_not_above(plan_of(data), plan_of(grown))


@PROFILE
@given(specs())
def test_model_states_fall_with_each_zero_stage(data: dict) -> None:
    states = [model_states(plan_of(merged(data, **{"distribution.strategy": s}))) for s in ("ddp", "zero1", "zero2", "zero3")]
    assert states[3] <= states[2] <= states[1]
    # DDP with bf16 adapters (TRL's QLoRA cast, `roles.adapter_bytes`) steps them in bf16 with no
    # fp32 master, where DeepSpeed keeps fp32 masters and states: not a smaller layout to compare
    ddp = parse_spec(merged(data, **{"distribution.strategy": "ddp"}))
    if R.adapter_bytes(ddp, ddp.finetune) != 2:
        assert states[1] <= states[0]


@PROFILE
@given(specs(), st.sampled_from(["distribution.offload_optimizer", "distribution.offload_params", "rollout.offload_model", "rollout.offload_optimizer"]))
def test_offload_never_raises_gpu_memory(data: dict, flag: str) -> None:
    if flag == "distribution.offload_params":
        data = merged(data, **{"distribution.strategy": "zero3"})
    if flag == "distribution.offload_optimizer" and data["distribution"]["strategy"] == "ddp":
        data = merged(data, **{"distribution.strategy": "zero2"})
    if flag.startswith("rollout.") :
        data = merged(data, **{"rollout.engine": "vllm_colocate"})
    assert_not_above(plan_of(merged(data, **{flag: True})), plan_of(merged(data, **{flag: False})))


@PROFILE
@given(specs())
def test_lora_below_full_finetuning(data: dict) -> None:
    # Model states always; the whole peak with checkpointing. Without it PEFT's fp32 copies of
    # every adapted input can outweigh the optimizer states LoRA saves (a real effect).
    # With it, what LoRA can still add is its branch tensors (fp32 inputs of lora_A/lora_B) of the
    # one layer being recomputed at a time: per token × the micro-batch's tokens. On long micro-
    # batches that outweighs the states LoRA saves on a small model (e.g. Llama-3.2-1B, 7 × 7,704
    # tokens: ~4 GB of branch tensors against ~4 GB of full fine-tuning states), so the peak is
    # bounded by that term, with the allocator's fragmentation on top taken out of both sides.
    data = merged(data, gradient_checkpointing=True)
    run = resolve(parse_spec(merged(data, **{"finetune.method": "lora"})))
    lora = make_plan(run.spec, run.arch, run.gpu, run.archs)
    full = plan_of(merged(data, **{"finetune.method": "full"}))
    assert model_states(lora) < model_states(full)
    branch = lora_per_token(run.spec, run.arch) * lora.shape.train_sequences * lora.shape.seq_len
    assert peak_without_fragmentation(lora) <= peak_without_fragmentation(full) + branch


def peak_without_fragmentation(plan: Plan) -> int:
    group = plan.devices[0]
    return max(p.peak_bytes - sum(c.num_bytes for c in p.components if c.name == "allocator_fragmentation")
               for p in group.phases)


@PROFILE
@given(specs())
def test_sleep_never_raises_gpu_memory(data: dict) -> None:
    data = merged(data, **{"rollout.engine": "vllm_colocate"})
    assert_not_above(plan_of(merged(data, **{"rollout.sleep_level": 1})), plan_of(merged(data, **{"rollout.sleep_level": 0})))


@PROFILE
@given(specs())
def test_checkpointing_never_raises_train_peak(data: dict) -> None:
    on = plan_of(merged(data, gradient_checkpointing=True))
    off = plan_of(merged(data, gradient_checkpointing=False))
    assert on.devices[0].phases[[p.name for p in on.devices[0].phases].index("train")].peak_bytes <= \
        off.devices[0].phases[[p.name for p in off.devices[0].phases].index("train")].peak_bytes


@PROFILE
@given(specs())
def test_plan_is_deterministic_and_consistent(data: dict) -> None:
    before = copy.deepcopy(data)
    a, b = plan_of(data), plan_of(data)
    assert data == before
    assert peaks(a) == peaks(b)
    assert a.fits == all(c.ok for c in a.constraints)
    for group in a.devices:
        for phase in group.phases:
            assert phase.peak_bytes == sum(c.num_bytes for c in phase.components)
            assert all(c.num_bytes > 0 for c in phase.components)
