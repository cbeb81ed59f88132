"""Formulas of the model states on a GPU: weights, master weights, optimizer states, gradients,
ZeRO-3's persistent and gathered parameters, DeepSpeed's reduce buckets, fp32 gradients.

Each mirrors `planner.roles` (`trainable_model`, `frozen_model`) on the values the plan's
`RoleModel` holds; Ψ_t is the model's trainable parameters, N its shards (its group's GPUs ×
nodes). ZeRO paper: Rajbhandari et al. 2020 (arXiv 1910.02054) §3.1 (2Ψ + 2Ψ + KΨ), §5.
"""

from __future__ import annotations

import dataclasses

from ..memory import constants as C
from ..memory import params as P
from ..memory import states as S
from ..planner import roles as R
from ..planner import sharding_terms as ST
from ..spec.run import Finetune, Optimizer, Precision, Role, Strategy
from .context import ROLE_OF_PREFIX, Ctx
from .formula import Formula, Input, code_ref, constant, constant_doc, doc_source, fn_input
from .registry import gpu

ROLES = "(policy|reference|critic|reward)"
ZERO_PAPER = "ZeRO paper (Rajbhandari et al. 2020, arXiv 1910.02054) §3.1 and §5"


def _finetune(ctx: Ctx, role: Role) -> Finetune:
    return R.finetune_of(ctx.spec, role)


def _shards(m: R.RoleModel) -> Input:
    return Input("N", m.num_shards, "shards of the model: GPUs of its group(s) × nodes")


def _psi_t(m: R.RoleModel) -> Input:
    return Input("Psi_t", m.num_trainable, "trainable parameters Ψ_t")


def _sharding_source() -> str:
    return constant_doc(S, "SHARDING")[0].removeprefix("Source: ")


def _sharded(symbol: str, sharded: bool) -> str:
    return f"ceil({symbol} / N)" if sharded else symbol


def _unsharded_weights(ctx: Ctx, role: Role) -> Input:
    """W: the model's weights on one unsharded replica, with how they are made up."""
    spec, m = ctx.spec, ctx.model(role)
    if m.trainable and R.fsdp_fp32_params(spec, _finetune(ctx, role)):
        f = Formula("Psi_t * FP32_BYTES", (_psi_t(m), constant(C, "FP32_BYTES")),
                    doc_source(R.fsdp_fp32_params), code_ref(R.fsdp_fp32_params))
    elif m.trainable and R.amp_fp32_params(spec, _finetune(ctx, role)):
        f = Formula("Psi * FP32_BYTES", (Input("Psi", m.weights_full // C.FP32_BYTES, "parameters of the model, all held in fp32"),
                                         constant(C, "FP32_BYTES")), doc_source(R.amp_fp32_params), code_ref(R.amp_fp32_params))
    elif role == Role.actor and R.adapter_bytes(spec, spec.finetune) is not None:
        f = Formula("frozen + Psi_t * ADAPTER_BYTES", (
            fn_input("frozen", S.frozen_weight_bytes(m.arch, spec.finetune), S.frozen_weight_bytes, "frozen base (LoRA bf16, QLoRA NF4)"),
            _psi_t(m), fn_input("ADAPTER_BYTES", R.adapter_bytes(spec, spec.finetune), R.adapter_bytes,
                                "bytes per adapter parameter as the trainer holds it (no other copy)"),
        ), doc_source(R.adapter_bytes), code_ref(R.adapter_bytes))
    elif role == Role.actor:
        psi_t = S.num_trainable_parameters(m.arch, spec.finetune)
        frozen = S.frozen_weight_bytes(m.arch, spec.finetune)
        f = Formula("frozen + Psi_t * BF16_BYTES", (
            fn_input("frozen", frozen, S.frozen_weight_bytes, "frozen base (LoRA bf16, QLoRA NF4, or a pre-quantized checkpoint); 0 for full fine-tuning"),
            Input("Psi_t", psi_t, "trainable parameters (all, or the LoRA adapters)"), constant(C, "BF16_BYTES"),
        ), f"{ZERO_PAPER}; {doc_source(S.frozen_weight_bytes) or 'QLoRA paper §3'}", code_ref(S.policy_weight_bytes))
    elif role == Role.reference and R.amp_fp32_params(spec, spec.finetune):
        f = Formula("Psi * FP32_BYTES", (fn_input("Psi", P.num_parameters(m.arch), P.num_parameters, "parameters of the model"),
                                         constant(C, "FP32_BYTES")), doc_source(R.reference_amp_weight_bytes),
                    code_ref(R.reference_amp_weight_bytes))
    elif role == Role.reference:
        f = Formula("Psi * BF16_BYTES", (fn_input("Psi", P.num_parameters(m.arch), P.num_parameters, "parameters of the model"),
                                         constant(C, "BF16_BYTES")), doc_source(R.frozen_model) or ZERO_PAPER, code_ref(R.role_models))
    else:
        f = Formula("Psi_v * BF16_BYTES", (fn_input("Psi_v", R.num_value_model_parameters(m.arch), R.num_value_model_parameters,
                                                    "value model parameters: the LM body without its head, plus hidden → 1"),
                                           constant(C, "BF16_BYTES")), doc_source(R.num_value_model_parameters), code_ref(R.role_models))
    return Input("W", m.weights_full, "unsharded weights of the model", formula=f)


@gpu(rf"{ROLES}\.weights")
def weights(ctx: Ctx, name: str) -> Formula:
    role = ROLE_OF_PREFIX[name.split(".")[0]]
    m = ctx.model(role)
    sharded = S.SHARDING[ctx.spec.distribution.strategy].weights
    return Formula(_sharded("W", sharded), (_unsharded_weights(ctx, role), _shards(m)),
                   f"{ZERO_PAPER}: 2 bytes per bf16 weight; {_sharding_source()}",
                   code_ref(R.trainable_model if m.trainable else R.frozen_model))


@gpu(rf"{ROLES}\.persistent_params")
def persistent_params(ctx: Ctx, name: str) -> Formula:
    m = ctx.model(ROLE_OF_PREFIX[name.split(".")[0]])
    threshold = ST.deepspeed_value(ctx.spec.distribution.stage3_param_persistence_threshold, m.arch, ST.AUTO_PERSISTENCE_THRESHOLD)
    return Formula("small * BF16_BYTES * (N - 1) // N", (
        fn_input("small", P.num_small_parameters(m.arch, threshold), P.num_small_parameters,
                 f"parameters in tensors of at most {threshold:,} elements (stage3_param_persistence_threshold)"),
        constant(C, "BF16_BYTES"), _shards(m),
    ), doc_source(ST._persistent), code_ref(ST._persistent))


@gpu(rf"{ROLES}\.master_weights")
def master_weights(ctx: Ctx, name: str) -> Formula:
    m = ctx.model(ROLE_OF_PREFIX[name.split(".")[0]])
    sharded = S.SHARDING[ctx.spec.distribution.strategy].optimizer
    return Formula(_sharded("Psi_t * MASTER_BYTES", sharded), (
        _psi_t(m), fn_input("MASTER_BYTES", S.master_bytes_per_param(ctx.spec.precision), S.master_bytes_per_param,
                            "fp32 master copy per trainable parameter"), _shards(m),
    ), f"{doc_source(S.master_bytes_per_param)}; {_sharding_source()}", code_ref(R.trainable_model))


def _optimizer_states_unsharded(ctx: Ctx, role: Role) -> Input:
    spec, m = ctx.spec, ctx.model(role)
    precision = R.trainable_precision(spec, _finetune(ctx, role))
    total = S.optimizer_state_bytes(m.arch, _finetune(ctx, role), spec.optimizer, precision, m.num_trainable)
    if spec.optimizer == Optimizer.adamw:
        dtype = C.BF16_BYTES if precision == Precision.bf16 else C.FP32_BYTES
        f = Formula("Psi_t * ADAM_NUM_STATES * state_bytes", (
            _psi_t(m), constant(C, "ADAM_NUM_STATES"),
            Input("state_bytes", dtype, "bytes per state: fp32, or bf16 under pure bf16 or for bf16 adapters "
                  "(torch keeps states in the parameter dtype)"),
        ), "torch.optim.AdamW (exp_avg, exp_avg_sq); " + ZERO_PAPER, code_ref(S.optimizer_state_bytes))
        return Input("S", total, "optimizer states of all trainable parameters, unsharded", formula=f)
    return fn_input("S", total, S.optimizer_state_bytes, f"{spec.optimizer.value} states of all trainable parameters, unsharded")


@gpu(rf"{ROLES}\.optimizer_states")
def optimizer_states(ctx: Ctx, name: str) -> Formula:
    role = ROLE_OF_PREFIX[name.split(".")[0]]
    m = ctx.model(role)
    sharded = S.SHARDING[ctx.spec.distribution.strategy].optimizer
    source = {
        Optimizer.adamw: "torch.optim.AdamW", Optimizer.adamw_8bit: constant_doc(C, "ADAM_8BIT_BLOCK_SIZE")[0],
        Optimizer.adafactor: "Shazeer & Stern 2018 (arXiv 1804.04235) §3", Optimizer.sgd: "torch.optim.SGD (momentum 0)",
    }[ctx.spec.optimizer]
    return Formula(_sharded("S", sharded), (_optimizer_states_unsharded(ctx, role), _shards(m)),
                   f"{source}; {_sharding_source()}", code_ref(S.optimizer_state_bytes))


@gpu(rf"{ROLES}\.grads")
def grads(ctx: Ctx, name: str) -> Formula:
    role = ROLE_OF_PREFIX[name.split(".")[0]]
    m = ctx.model(role)
    sharded = S.SHARDING[ctx.spec.distribution.strategy].grads
    if R.fsdp_fp32_params(ctx.spec, _finetune(ctx, role)):
        per, source = constant(C, "FP32_BYTES", "GRAD_BYTES"), doc_source(R.fsdp_fp32_params)
    elif R.amp_fp32_params(ctx.spec, _finetune(ctx, role)):
        per, source = constant(C, "FP32_BYTES", "GRAD_BYTES"), doc_source(R.amp_fp32_params)
    elif (adapter := R.adapter_bytes(ctx.spec, _finetune(ctx, role))) is not None:
        per = fn_input("GRAD_BYTES", adapter, R.adapter_bytes, "gradient bytes: the adapters' dtype")
        source = doc_source(R.adapter_bytes)
    else:
        per = fn_input("GRAD_BYTES", S.grad_bytes_per_param(ctx.spec.precision), S.grad_bytes_per_param, "gradient bytes per trainable parameter")
        source = doc_source(S.grad_bytes_per_param)
    return Formula(_sharded("Psi_t * GRAD_BYTES", sharded), (_psi_t(m), per, _shards(m)),
                   f"{source}; {_sharding_source()}", code_ref(R.trainable_model))


@gpu(r"zero\.reduce_buckets")
def reduce_buckets(ctx: Ctx, name: str) -> Formula:
    """One bucket per trainable model whose states list it in this phase (actor and critic may both)."""
    spec, inputs, terms = ctx.spec, [], []
    for role in ctx.planner.models if ctx.planner else ():
        if not any(c.name == name for c in ctx.states_of(role)):
            continue
        m = ctx.model(role)
        size = ST.deepspeed_value(spec.distribution.reduce_bucket_size, m.arch, ST.AUTO_REDUCE_BUCKET)
        buffers = 1 if spec.distribution.strategy == Strategy.zero3 else (2 if spec.distribution.overlap_comm else 1)
        p = role.value
        inputs += [Input(f"bucket_{p}", size, f"reduce_bucket_size of the {p} in elements ('auto' = h²)", source=doc_source(ST.deepspeed_value)),
                   Input(f"buffers_{p}", buffers, "buffers: 2 with overlap_comm under ZeRO-1/2, else 1")]
        terms.append(f"bucket_{p} * BF16_BYTES * buffers_{p}")
    inputs.append(constant(C, "BF16_BYTES"))
    return Formula(" + ".join(terms), tuple(inputs),
                   "deepspeed/runtime/zero/stage_1_and_2.py (ipg_buffer, _release_ipg_buffers), stage3.py (one buffer "
                   f"from init); {doc_source(ST.deepspeed_value)}", code_ref(ST._reduce_bucket))


@gpu(r"zero\.gathered_params")
def gathered_params(ctx: Ctx, name: str) -> Formula:
    assert ctx.role is not None
    m = ctx.model(ctx.role)
    dist, arch = ctx.spec.distribution, m.arch
    layer = Input("layer", P.num_decoder_layer_parameters(arch) // arch.num_layers, "parameters of one decoder layer",
                  source=doc_source(P.num_decoder_layer_parameters), code=code_ref(P.num_decoder_layer_parameters))
    largest = fn_input("largest", P.num_largest_module_parameters(arch), P.num_largest_module_parameters, "parameters of the largest module")
    if dist.strategy == Strategy.fsdp:
        return Formula("2 * max(layer, largest) * BF16_BYTES", (layer, largest, constant(C, "BF16_BYTES")),
                       "PyTorch FSDP docs (BACKWARD_PRE prefetch: the current and the next unit unsharded)", code_ref(ST._gathered))
    prefetch = ST.deepspeed_value(dist.stage3_prefetch_bucket_size, arch, ST.AUTO_PREFETCH_BUCKET)
    return Formula("min(max(largest, layer + prefetch), max_live) * BF16_BYTES", (
        largest, layer, Input("prefetch", prefetch, "stage3_prefetch_bucket_size ('auto' = 0.9 h²)"),
        Input("max_live", dist.stage3_max_live_parameters, "stage3_max_live_parameters"), constant(C, "BF16_BYTES"),
    ), doc_source(ST._gathered), code_ref(ST._gathered))


@gpu(r"optimizer\.fp32_grads")
def fp32_grads(ctx: Ctx, name: str) -> Formula:
    if ctx.planner is not None and ctx.planner.trains_jointly():  # one optimizer over policy and value model
        parts = [_fp32_grads_of(dataclasses.replace(ctx, role=r)) for r in (Role.actor, Role.critic)]
        return Formula("policy + critic", (
            Input("policy", parts[0].value, "the policy's fp32 gradient partition", formula=parts[0]),
            Input("critic", parts[1].value, "the value model's, stepped by the same optimizer", formula=parts[1]),
        ), parts[0].source + "; trl ppo_trainer.py: one optimizer over PolicyAndValueWrapper", parts[0].code)
    return _fp32_grads_of(ctx)


def _fp32_grads_of(ctx: Ctx) -> Formula:
    assert ctx.role is not None
    m, dist = ctx.model(ctx.role), ctx.spec.distribution
    inputs = (_psi_t(m), constant(C, "FP32_BYTES"), _shards(m))
    source = doc_source(S.fp32_grad_partition_bytes)
    if dist.strategy == Strategy.zero3:
        return Formula("min(ceil(Psi_t * FP32_BYTES / N), sub_group_size * FP32_BYTES)",
                       (*inputs, Input("sub_group_size", dist.sub_group_size, "ZeRO-3 sub_group_size (elements per optimizer sub-group)")),
                       f"{source}; deepspeed/runtime/zero/stage3.py (_prepare_fp32_grad_for_sub_group)", code_ref(ST._fp32_grads))
    return Formula("ceil(Psi_t * FP32_BYTES / N)", inputs, source, code_ref(ST._fp32_grads))


@gpu(r"optimizer\.step_temporaries")
def step_temporaries(ctx: Ctx, name: str) -> Formula:
    roles = (Role.actor, Role.critic) if ctx.planner is not None and ctx.planner.trains_jointly() else (ctx.role,)
    assert roles[0] is not None
    impl = R.optimizer_implementation(ctx.spec)
    inputs = tuple(Input(f"T_{r.value}", ctx.model(r).step_temporaries, f"{r.value}: {impl.value if impl else 'none'} step "
                         "over what this GPU steps (all trainable parameters under DDP, its shard under FSDP/ZeRO, "
                         "one sub_group_size tile under ZeRO-3), in the optimizer-state dtype") for r in roles)
    return Formula(" + ".join(i.symbol for i in inputs), inputs, doc_source(S.optimizer_step_temporary_bytes),
                   code_ref(R.step_temporary_bytes))


@gpu(r"generate\.autocast_weight_cache")
def autocast_weight_cache(ctx: Ctx, name: str) -> Formula:
    m = ctx.model(Role.actor)
    arch = m.arch
    if R.adapter_bytes(ctx.spec, ctx.spec.finetune) == C.FP32_BYTES:
        return Formula("Psi_t * BF16_BYTES", (_psi_t(m), constant(C, "BF16_BYTES")),
                       "aten cached_cast keeps bf16 casts of fp32 leaf tensors that require grad (the adapters); "
                       + doc_source(R.adapter_bytes), code_ref(R.trainable_model))
    return Formula("(decoder_linears + V * h) * BF16_BYTES", (
        fn_input("decoder_linears", S.num_quantizable_parameters(arch), S.num_quantizable_parameters, "decoder linear weights"),
        Input("V", arch.vocab_size, "vocabulary"), Input("h", arch.hidden_size, "hidden size"), constant(C, "BF16_BYTES"),
    ), doc_source(S.autocast_weight_cache_bytes), code_ref(S.autocast_weight_cache_bytes))
