"""Model states: published ZeRO and DeepSpeed figures, hand-derived LoRA/optimizer counts."""

from __future__ import annotations

import pytest

from oomless.spec.run import Role
from oomless.catalog.models import arch_from_config
from oomless.catalog.resolve import load_model
from oomless.memory import params as P
from oomless.memory import states as S
from oomless.spec.run import Finetune, Optimizer, Precision, Strategy
from tests.helpers import BASE_SPEC, TINY_CONFIG, component, merged, plan_of

GB = 1e9
TINY = arch_from_config(TINY_CONFIG, "tiny")


@pytest.mark.parametrize(
    ("stage", "published_gb"),
    [(0, 120), (1, 31.4), (2, 16.6), (3, 1.9)],
)
def test_zero_paper_figure_1_7_5b_on_64_gpus(stage: int, published_gb: float) -> None:
    # Rajbhandari et al. 2020, Figure 1: Ψ = 7.5B, N_d = 64, K = 12.
    got = S.zero_paper_model_state_bytes(7_500_000_000, stage, 64) / GB
    assert got == pytest.approx(published_gb, abs=0.05)  # the paper rounds to 0.1 GB


def test_composed_zero2_optimizer_step_is_deepspeeds_18_bytes() -> None:
    # DeepSpeed stage_1_and_2.py estimate_zero2_model_states_mem_needs (no offload):
    # gpu = 2Ψ + 18Ψ/N, 18 = 2 grads16 + 4 grads32 + 4 params32 + 8 Adam.
    data = merged(BASE_SPEC, **{"distribution.strategy": "zero2", "rollout.engine": "hf",
                                "rollout.sleep_level": 0, "kl_beta": 0.0})
    plan = plan_of(data)
    psi, n = P.num_parameters(plan.arch), plan.models[Role.actor].num_shards
    states = sum(component(plan, "optimizer", name) for name in
                 ("policy.weights", "policy.grads", "policy.master_weights", "policy.optimizer_states", "optimizer.fp32_grads"))
    assert states == pytest.approx(2 * psi + 18 * psi / n, abs=4)


def test_composed_zero3_training_states_are_the_papers_16_bytes_over_n() -> None:
    # ZeRO paper P_os+g+p: (2 + 2 + 12)Ψ/N while training. The optimizer step adds the fp32
    # gradient sub-group (4Ψ/N here, Ψ/N < sub_group_size), which DeepSpeed's stage-3
    # estimator (4·largest_layer + 18Ψ/N) folds differently; we keep both 16-bit and fp32
    # gradients alive at that moment, as its ZeRO-2 estimator does.
    plan = plan_of(merged(BASE_SPEC, **{"rollout.engine": "hf", "rollout.sleep_level": 0, "kl_beta": 0.0}))
    psi, n = P.num_parameters(plan.arch), plan.models[Role.actor].num_shards
    train = sum(component(plan, "train", name) for name in ("policy.weights", "policy.grads", "policy.master_weights", "policy.optimizer_states"))
    assert train == pytest.approx(16 * psi / n, abs=8)
    assert component(plan, "optimizer", "optimizer.fp32_grads") == pytest.approx(4 * psi / n, abs=4)


def test_zero3_fp32_grads_are_one_sub_group() -> None:
    small = plan_of(merged(BASE_SPEC, **{"rollout.engine": "hf", "rollout.sleep_level": 0,
                                         "distribution.sub_group_size": 1_000_000}))
    assert component(small, "optimizer", "optimizer.fp32_grads") == 4_000_000


def test_lora_parameters_by_hand() -> None:
    # Tiny: q 8->8, k 8->4, v 8->4, o 8->8, gate 8->16, up 8->16, down 16->8, 2 layers.
    # r=2: r·(in+out) = 2·(16+12+12+16+24+24+24) = 256 per layer -> 512.
    assert S.num_lora_parameters(TINY, 2, "all-linear") == 512
    # q and v only: 2·(16 + 12) = 56 per layer -> 112.
    assert S.num_lora_parameters(TINY, 2, ["q_proj", "v_proj"]) == 112


def test_lora_7b_rank_8_matches_peft_count() -> None:
    # Qwen2-7B all-linear r=8: per layer 8·[(3584+3584)·2 + (3584+512)·2 + (3584+18944)·2
    # + (18944+3584)] = 8·(14336 + 8192 + 45056 + 22528) = 720,896; × 28 = 20,185,088,
    # PEFT's print_trainable_parameters for this config.
    arch = load_model("Qwen/Qwen2-7B-Instruct")
    assert S.num_lora_parameters(arch, 8, "all-linear") == 20_185_088


@pytest.mark.parametrize(
    ("optimizer", "precision", "expected"),
    [
        (Optimizer.adamw, Precision.bf16_mixed, 1736 * 8),
        (Optimizer.adamw, Precision.bf16, 1736 * 4),
        (Optimizer.adamw_8bit, Precision.bf16_mixed, 1736 * 2 + 2 * 4 * 1),  # one 2048-block
        (Optimizer.sgd, Precision.bf16_mixed, 0),
    ],
)
def test_optimizer_state_bytes_tiny(optimizer: Optimizer, precision: Precision, expected: int) -> None:
    assert S.optimizer_state_bytes(TINY, Finetune(method="full"), optimizer, precision) == expected


def test_adafactor_factored_state_tiny() -> None:
    # Per layer matrices (out×in): q 8×8, k 4×8, v 4×8, o 8×8, gate 16×8, up 16×8, down 8×16:
    # rows+cols = 16+12+12+16+24+24+24 = 128 -> 256 over 2 layers; embed and lm_head 32×8
    # -> 2·40 = 80; vectors: 1736 − matrix params (2·(64+32+32+64+128·3) + 2·256 = 1664) = 72.
    assert S.adafactor_state_elements(TINY, Finetune(method="full")) == 256 + 80 + 72


def test_qlora_base_is_about_a_quarter_of_bf16() -> None:
    arch = load_model("Qwen/Qwen2.5-7B-Instruct")
    lora = S.frozen_weight_bytes(arch, Finetune(method="lora"))
    qlora = S.frozen_weight_bytes(arch, Finetune(method="qlora"))
    linear = S.num_quantizable_parameters(arch)
    # linears at 4.127 bits, embeddings/head/norms at 16 bits.
    assert qlora == pytest.approx(linear * 4.127 / 8 + (P.num_parameters(arch) - linear) * 2, rel=1e-3)
    assert qlora < 0.4 * lora


@pytest.mark.parametrize("strategy", list(Strategy))
def test_sharding_table_covers_every_strategy(strategy: Strategy) -> None:
    assert strategy in S.SHARDING


def test_qlora_base_without_double_quantisation_keeps_an_fp32_absmax_per_64_weights() -> None:
    """QLoRA paper §3: NF4 costs 4 bits plus 32/64 for the fp32 block constants, 0.127 with double
    quantisation; TRL's `use_bnb_nested_quant` defaults to false."""
    from oomless.memory import states as S
    from oomless.spec.load import parse_spec, resolve
    from oomless.spec.run import Finetune

    arch = resolve(parse_spec({"model": "Qwen/Qwen2-7B-Instruct", "hardware": {"gpu": "H100"}})).arch
    quantized = S.num_quantizable_parameters(arch)
    double = S.frozen_weight_bytes(arch, Finetune(method="qlora"))
    single = S.frozen_weight_bytes(arch, Finetune(method="qlora", double_quant=False))
    assert abs((single - double) - quantized * (0.5 - (8 / 64 + 32 / (64 * 256))) / 8) <= 2
