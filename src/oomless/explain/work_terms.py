"""Formulas of the work of a phase: activations, masks, the vision tower, Ulysses buffers,
logits, the backward transient, accumulating gradients, and weight sync's temporaries.

They mirror `GroupPlanner.forward_work`/`training_work`/`weight_sync` on the micro-batch the
plan holds (`RunShape.train_batch`, `logprob_batch`): b rows of s tokens, c logit rows.
"""

from __future__ import annotations

import dataclasses

from ..memory import activation_attention as AA
from ..memory import activations as A
from ..memory import constants as C
from ..memory import logits as L
from ..memory import params as P
from ..memory import vision as VZ
from ..catalog.models import ModelArch
from ..planner import gpu_phases as GP
from ..planner import gpu_terms as GT
from ..planner.batches import MicroBatch
from ..planner import vision_terms as VT
from ..spec.run import FinetuneMethod, LogitsMode, LoraSync, Role
from .context import Ctx
from .formula import Formula, Input, code_ref, constant, doc_source, fn_input
from .registry import gpu


def _training(ctx: Ctx) -> bool:
    return ctx.phase in ("train", "critic_train")


def _batch(ctx: Ctx) -> MicroBatch:
    return ctx.shape.train_batch if _training(ctx) else ctx.shape.logprob_batch


def _lora(ctx: Ctx) -> int:
    if ctx.role == Role.actor or (ctx.role == Role.critic and ctx.spec.critic.lora):
        return GP.lora_per_token(ctx.spec, ctx.model(ctx.role).arch)
    return 0


def _bs(ctx: Ctx) -> tuple[Input, Input]:
    mb = _batch(ctx)
    return (Input("b", mb.num_rows, "rows of the micro-batch (1 when packed)"),
            Input("s", mb.row_len, "tokens per row (this GPU's share under sequence parallelism)"))


@gpu(r"activations")
def activations(ctx: Ctx, name: str) -> Formula:
    assert ctx.role is not None
    arch, spec, mb = ctx.model(ctx.role).arch, ctx.spec, _batch(ctx)
    b, s = _bs(ctx)
    if not _training(ctx):
        return Formula("b * s * per_token", (b, s, fn_input("per_token", A.inference_layer_peak_bytes_per_token(arch), A.inference_layer_peak_bytes_per_token)),
                       doc_source(A.inference_layer_peak_bytes_per_token), code_ref(A.inference_forward_peak_bytes))
    attn, sp = spec.attention, mb.sequence_parallel_size
    common = (
        Input("L", arch.num_layers, "decoder layers"), b, s,
        fn_input("rotary", A.rotary_table_bytes(arch, mb.row_len), A.rotary_table_bytes),
        fn_input("head", A.head_saved_bytes_per_token(arch, GP.liger_kernels_in(spec, ctx.role)), A.head_saved_bytes_per_token),
        fn_input("head_const", A.head_constant_bytes(arch), A.head_constant_bytes, "the final norm's weight copy"),
    )
    tail = " + rotary + b * s * head + head_const"
    if spec.gradient_checkpointing:
        return Formula("L * b * s * layer_input + shared" + tail, (
            *common, fn_input("layer_input", A.checkpointed_layer_input_bytes_per_token(arch), A.checkpointed_layer_input_bytes_per_token),
            fn_input("shared", A.checkpoint_shared_input_bytes(arch, attn, mb.num_rows, mb.row_len), A.checkpoint_shared_input_bytes),
        ), doc_source(A.checkpointed_layer_input_bytes_per_token), code_ref(A.training_saved_activation_bytes))
    return Formula("L * (b * layer_saved + layer_const)" + tail, (
        *common,
        fn_input("layer_saved", A.decoder_layer_saved_bytes_per_sequence(arch, attn, mb.row_len, _lora(ctx), sp, GP.liger_kernels_in(spec, ctx.role)),
                 A.decoder_layer_saved_bytes_per_sequence, "what one decoder layer keeps for backward per row (norms, q/k norms, MLP, attention core, LoRA branches)"),
        fn_input("layer_const", A.decoder_layer_constant_bytes(arch, attn), A.decoder_layer_constant_bytes),
    ), "Korthikanti et al. 2022 (arXiv 2205.05198) §4.1, tensor by tensor from transformers' decoder (memory/activations.py); "
       "checked against `oomless trace`", code_ref(A.training_saved_activation_bytes))


@gpu(r"critic\.activations")
def critic_activations(ctx: Ctx, name: str) -> Formula:
    """The value model's saved activations, held through the policy's backward in one joint
    phase (`GroupPlanner.joint_train`)."""
    held = activations(dataclasses.replace(ctx, role=Role.critic, phase="critic_train"), name)
    return Formula(held.expression, held.inputs, held.source + "; held through the policy's backward: TRL "
                   "PolicyAndValueWrapper, one backward of pg_loss + vf_coef * vf_loss", code_ref(GP.GroupPlanner.joint_train))


@gpu(r"attention_mask")
def attention_mask(ctx: Ctx, name: str) -> Formula:
    b, s = _bs(ctx)
    per = {"sdpa": 1 + A.B, "eager": A.B}.get(ctx.spec.attention.value, 0)
    return Formula("b * s * s * mask_bytes", (b, s, Input("mask_bytes", per, f"bytes per mask element for {ctx.spec.attention.value} "
                                                       "(sdpa: bool + its bf16 additive copy; eager: bf16)")),
                   doc_source(A.dense_attention_mask_bytes), code_ref(A.dense_attention_mask_bytes))


VISION_SOURCE = ("tensor by tensor from transformers' qwen2_5_vl/modeling_qwen2_5_vl.py, InternVL modeling_intern_vit.py, "
                 "siglip/modeling_siglip.py (memory/vision.py), checked with `oomless trace`")


def _tower_forward_peak(ctx: Ctx, arch: ModelArch, images: int, patches: int) -> Formula:
    """`vision.vision_inference_peak_bytes`: residual stream and block input, plus the largest
    block-internal transient (norm, attention with its eager scores, MLP)."""
    v, attention, dense = arch.vision, ctx.spec.attention, ctx.spec.vision.dense_attention_mask
    norm, qkv, rotary, rest, mlp = VZ._inference_parts_per_patch(v, attention)
    scores = VZ._eager_score_bytes(v, attention, patches, images, dense, VZ.inference_score_bytes(v))
    return Formula("(2 * B * h + held) * images * patches + max(norm * images * patches, qkv * images * patches"
                   " + max(rotary * images * patches, rest * images * patches + scores), mlp * images * patches)", (
        Input("B", A.B, "bf16 bytes"), Input("h", v.hidden_size, "the tower's hidden size"),
        Input("held", VZ.inference_held_bytes_per_patch(v), "bytes per patch held through the forward (bf16 pixels, fp32 rotary tables)"),
        Input("images", images, "images in the forward: sequences × images_per_prompt"),
        Input("patches", patches, "patches per image (the processor's resize limits)"),
        Input("norm", norm, "bytes per patch of the norm's fp32 transient"), Input("qkv", qkv, "bytes per patch of the qkv output"),
        Input("rotary", rotary, "bytes per patch of the fp32 rotary temporaries"),
        Input("rest", rest, "bytes per patch of rotated q, k and the attention output"),
        Input("mlp", mlp, "bytes per patch of the MLP block"), Input("scores", scores, f"eager attention scores alive at once ({attention.value})"),
    ), VISION_SOURCE, code_ref(VZ.vision_inference_peak_bytes))


@gpu(r"vision\.activations")
def vision_activations(ctx: Ctx, name: str) -> Formula:
    assert ctx.role is not None
    arch, mb, spec = ctx.model(ctx.role).arch, _batch(ctx), ctx.spec
    images = mb.num_sequences * ctx.shape.lengths.images_per_prompt
    patches = VT.patches_per_image(spec, arch, ctx.shape.lengths.image_pixels)
    forward = _tower_forward_peak(ctx, arch, images, patches)
    hooked = VT.frozen_tower_keeps_activations(spec)
    if not (_training(ctx) and (VT.tower_trains(spec) or hooked)):
        return forward
    v, checkpointing = arch.vision, VT.tower_checkpointing(spec, arch)
    saved = VZ.vision_training_saved_bytes(v, patches, images, spec.attention, checkpointing, dense_mask=spec.vision.dense_attention_mask)
    who = f"the frozen tower's, hooked by transformers {spec.transformers_version}'s checkpointing" if hooked else "the trained tower's"
    return Formula("max(saved + merger, forward_peak)", (
        fn_input("saved", saved, VZ.vision_training_saved_bytes, f"{who} saved activations (checkpointing {checkpointing})"),
        fn_input("merger", VZ.merger_saved_bytes(v, patches, images), VZ.merger_saved_bytes, "the projector's saved activations"),
        Input("forward_peak", forward.value, "the tower's no-grad forward peak (it runs the same forward)", formula=forward),
    ), f"{VISION_SOURCE}; {doc_source(VT.training_bytes)}", code_ref(VT.training_bytes))


@gpu(r"ulysses\.all_to_all")
def ulysses(ctx: Ctx, name: str) -> Formula:
    assert ctx.role is not None
    arch = ctx.model(ctx.role).arch
    b, s = _bs(ctx)
    return Formula("ULYSSES_ALL_TO_ALL_COPIES * B * q * b * s", (
        constant(AA, "ULYSSES_ALL_TO_ALL_COPIES"), Input("B", A.B, "bf16 bytes"),
        Input("q", A.query_width(arch), "heads × head_dim"), b, s,
    ), doc_source(A.ulysses_all_to_all_bytes), code_ref(A.ulysses_all_to_all_bytes))


def _transient(ctx: Ctx) -> tuple[int, int]:
    spec, mb, arch = ctx.spec, ctx.shape.train_batch, ctx.model(ctx.role).arch
    args = (arch, spec.attention, spec.gradient_checkpointing, mb.num_rows, mb.row_len, _lora(ctx), mb.sequence_parallel_size,
            GP.liger_kernels_in(spec, ctx.role))
    return A.backward_transient_bytes(*args), A.ulysses_all_to_all_bytes(arch, mb.num_rows, mb.row_len, mb.sequence_parallel_size)


@gpu(r"backward_recompute")
def backward_recompute(ctx: Ctx, name: str) -> Formula:
    transient, a2a = _transient(ctx)
    return Formula("transient + all_to_all", (
        fn_input("transient", transient, A.backward_transient_bytes),
        fn_input("all_to_all", a2a, A.ulysses_all_to_all_bytes, "Ulysses' all-to-all buffers (0 without sequence parallelism)"),
    ), doc_source(A.backward_transient_bytes), code_ref(A.backward_transient_bytes))


def _logit_inputs(ctx: Ctx) -> tuple[Input, ...]:
    mb, arch = _batch(ctx), ctx.model(ctx.role).arch
    b, c, v, s = mb.num_rows, mb.logit_rows, arch.vocab_size, mb.row_len
    sym = (Input("b", b, "rows"), Input("c", c, "logit rows kept per row (completion tokens)"), Input("V", v, "vocabulary"))
    row = Input("s", s, "tokens per row")
    es = Formula("b * s * V", (*sym, row), "memory/logits.py all_positions_training_bytes",
                 code_ref(L.all_positions_training_bytes))
    e = Formula("b * c * V", sym, "memory/logits.py symbols", code_ref(L.training_logits_bytes))
    e1 = Formula("b * (c + 1) * V", sym, "memory/logits.py symbols", code_ref(L.training_logits_bytes))
    r = Formula("min(chunk_rows, b * c) * V", (*sym, Input("chunk_rows", ctx.spec.logits_chunk_rows, "logits_chunk_rows")),
                "memory/logits.py symbols", code_ref(L.training_logits_bytes))
    return (*sym, Input("h", arch.hidden_size, "hidden size"), Input("E", e.value, "logit elements b·c·V", formula=e),
            Input("E1", e1.value, "logit elements b·(c+1)·V", formula=e1), Input("R", r.value, "elements of one chunk", formula=r),
            row, Input("ES", es.value, "logit elements of every position b·s·V", formula=es),
            Input("EC", b * min(c, s) * v, "completion logit elements b·min(c, s)·V (ORZ's entropy copy)"),
            Input("B", L.B, "bf16 bytes"), Input("F", L.F, "fp32 bytes"), *_temperature_copies(ctx))


def _temperature_copies(ctx: Ctx) -> tuple[Input, ...]:
    how = ctx.spec.logits_temperature.value
    training, nograd = L.FLASH_CE_TEMPERATURE_COPIES[how]
    where = f"FLASH_CE_TEMPERATURE_COPIES[{how!r}] (memory/logits.py; logits_temperature {how})"
    return (Input("training_copies", training, f"bf16 logit copies at the training peak, {where}"),
            Input("nograd_copies", nograd, f"bf16 logit copies in a no-grad log-prob pass, {where}"))


LOGPROB = {
    LogitsMode.full_bf16: "B * (E1 + E)",
    LogitsMode.full_fp32: "max(B * E1 + F * E1, F * (E1 + E))",
    LogitsMode.chunked: "max(B * (E1 + E), B * E + CHUNK_FORWARD_FP32_COPIES * F * R)",
    LogitsMode.chunked_head: "B * b * c * h + work_buffer",
    LogitsMode.fused: "c * V * (B + F)",
    LogitsMode.fused_token_chunks: "min(VERL_FUSED_CHUNK_TOKENS, b * s) * V * VERL_FUSED_FORWARD_BYTES_PER_LOGIT",
    LogitsMode.fp32_all_positions: "(B + F) * ES",
    LogitsMode.bf16_all_positions: "(B + B) * ES",
    LogitsMode.bf16_flash_ce: "B * nograd_copies * ES",
    LogitsMode.bf16_flash_ce_entropy: "B * nograd_copies * ES",
}
TRAINING = {
    LogitsMode.full_bf16: "max(lm_input + softcap + B * max(E1 + E, c * V * (b + 2), E + E1), head_backward)",
    LogitsMode.full_fp32: "max(lm_input + softcap + max(B * E1 + F * E1, F * (E1 + E), FP32_GATHER_BACKWARD_COPIES * F * E), head_backward)",
    LogitsMode.chunked: "max(lm_input + softcap + max(max(B * (E1 + E), B * E + CHUNK_FORWARD_FP32_COPIES * F * R), "
                        "max(B * E + B * (E - R) + CHUNK_BACKWARD_FP32_COPIES * F * R, 2 * B * E, B * (E + E1))), head_backward)",
    LogitsMode.chunked_head: "max(B * N * h + work_buffer, B * N * h + work_buffer + (HEAD_FP32_GRADIENT_BYTES + B) * N * h "
                             "+ weight_grads, B * h * b * (2 * s - 1) + tied)",
    LogitsMode.fused: "c * V * FUSED_SEQUENCE_BYTES_PER_LOGIT + grad_weight",
    LogitsMode.fused_token_chunks: "2 * B * b * s * h + head_weight_grad + min(VERL_FUSED_CHUNK_TOKENS, b * s) * V * "
                                   "(VERL_FUSED_BACKWARD_BYTES_PER_LOGIT + VERL_FUSED_ENTROPY_EXTRA_BYTES_PER_LOGIT)",
    LogitsMode.fp32_all_positions: "max(lm_all + (B + F) * ES, lm_all + FP32_ALL_POSITIONS_BACKWARD_BYTES * ES, "
                                   "lm_all + B * ES + tied + B * h * b * s + F * ES)",
    LogitsMode.bf16_all_positions: "max(lm_all + B * (3 * ES + EC), lm_all + B * (BF16_ALL_POSITIONS_BACKWARD_COPIES * ES + EC), "
                                   "lm_all + B * (ES + EC) + B * ES + tied + B * h * b * s)",
    LogitsMode.bf16_flash_ce: "max(lm_all + B * training_copies * ES, lm_all + B * ES + tied + B * h * b * s)",
    LogitsMode.bf16_flash_ce_entropy: "max(lm_all + B * FLASH_CE_ENTROPY_BACKWARD_COPIES * ES, lm_all + B * ES + tied + B * h * b * s)",
}
CONSTANTS = ("CHUNK_FORWARD_FP32_COPIES", "CHUNK_BACKWARD_FP32_COPIES", "FP32_GATHER_BACKWARD_COPIES", "FUSED_SEQUENCE_BYTES_PER_LOGIT",
             "HEAD_FP32_GRADIENT_BYTES", "FP32_ALL_POSITIONS_BACKWARD_BYTES", "BF16_ALL_POSITIONS_BACKWARD_COPIES",
             "FLASH_CE_ENTROPY_BACKWARD_COPIES", "VERL_FUSED_CHUNK_TOKENS",
             "VERL_FUSED_FORWARD_BYTES_PER_LOGIT", "VERL_FUSED_BACKWARD_BYTES_PER_LOGIT", "VERL_FUSED_ENTROPY_EXTRA_BYTES_PER_LOGIT")


def _training_logits_terms(ctx: Ctx) -> tuple[Input, ...]:
    mb, arch = ctx.shape.train_batch, ctx.model(Role.actor).arch
    frozen = ctx.spec.finetune.method != FinetuneMethod.full
    b, c, s = mb.num_rows, mb.logit_rows, mb.row_len
    lm_input = fn_input("lm_input", 0 if frozen else L.lm_head_input_bytes(arch, b, c, s), L.lm_head_input_bytes,
                        "the LM head's kept input (0 when the head is frozen)")
    lm_all = Input("lm_all", 0 if frozen else L.B * arch.hidden_size * b * s,
                   "the LM head's whole bf16 input B·h·b·s, every position (0 when the head is frozen)")
    tied = fn_input("tied", 0 if frozen else A.tied_head_gradient_bytes(arch), A.tied_head_gradient_bytes,
                    "tied LM head's weight gradient waiting for the embedding's (0 untied or frozen)")
    base = _logit_inputs(ctx)
    weight_grads = Formula("0" if frozen else "HEAD_FP32_GRADIENT_BYTES * V * h + tied", (*base, tied, constant(L, "HEAD_FP32_GRADIENT_BYTES")),
                           doc_source(L.chunked_head_training_bytes), code_ref(L.chunked_head_training_bytes))
    head = Formula("lm_input + B * E1 + tied + B * h * b * (c + 1)", (*base, lm_input, tied),
                   "the LM head's backward (memory/logits.py)", code_ref(L.training_logits_bytes))
    return (
        *base, lm_input, lm_all, tied, Input("head_backward", head.value, "the LM head's backward moment", formula=head),
        fn_input("softcap", L._final_softcap_bytes(arch, b, c), L._final_softcap_bytes, "Gemma 2's soft-cap tensor (0 elsewhere)"),
        Input("N", b * c, "completion positions b·c gathered for the tiled head"),
        fn_input("work_buffer", L.head_work_buffer_bytes(b * c), L.head_work_buffer_bytes),
        Input("weight_grads", weight_grads.value, "the head's fp32 and bf16 weight gradients (0 when frozen)", formula=weight_grads),
        fn_input("grad_weight", L.fused_grad_weight_bytes(arch), L.fused_grad_weight_bytes),
        Input("head_weight_grad", 0 if frozen else L.B * arch.vocab_size * arch.hidden_size,
              "verl's fused head: its bf16 weight gradient B·V·h in full (0 when the head is frozen; "
              "memory/logits.py verl_fused_training_bytes)"),
    )


def _used(expression: str, inputs: tuple[Input, ...]) -> tuple[Input, ...]:
    import re

    names = set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", expression))
    return tuple(i for i in inputs if i.symbol in names)


@gpu(r"logits")
def logits(ctx: Ctx, name: str) -> Formula:
    assert ctx.role is not None
    mode = ctx.spec.logits
    constants = tuple(constant(L, n) for n in CONSTANTS)
    if _training(ctx):
        expression, inputs, fn = TRAINING[mode], _training_logits_terms(ctx) + constants, L.training_logits_bytes
    else:
        mb = _batch(ctx)
        buffer = fn_input("work_buffer", L.head_work_buffer_bytes(mb.num_rows * mb.logit_rows), L.head_work_buffer_bytes)
        expression, inputs, fn = LOGPROB[mode], _logit_inputs(ctx) + constants + (buffer,), L.logprob_logits_bytes
    source = {LogitsMode.fused: doc_source(L.fused_grad_weight_bytes), LogitsMode.chunked_head: doc_source(L.chunked_head_training_bytes),
              LogitsMode.fp32_all_positions: doc_source(L.all_positions_training_bytes),
              LogitsMode.bf16_all_positions: doc_source(L.orz_training_bytes),
              LogitsMode.bf16_flash_ce: doc_source(L.flash_ce_training_bytes),
              LogitsMode.bf16_flash_ce_entropy: doc_source(L.flash_ce_training_bytes),
              LogitsMode.fused_token_chunks: doc_source(L.verl_fused_training_bytes)}.get(
        mode, "TRL trainer/utils.py selective_log_softmax, _get_per_token_logps_and_entropies (logits_to_keep = c + 1); "
        "verl utils/torch_functional.py; traced moments (`oomless trace`, memory/logits.py)")
    return Formula(expression, _used(expression, inputs), source, code_ref(fn), note=f"logits mode {mode.value}")


@gpu(r"policy\.accumulating\.grads")
def accumulating_grads(ctx: Ctx, name: str) -> Formula:
    arch = ctx.model(Role.actor).arch
    saved = sum(c.num_bytes for c in GP.GroupPlanner.training_work(ctx.planner, Role.actor) if c.category.value == "ACT")
    transient, a2a = _transient(ctx)
    mb = ctx.shape.train_batch
    logit = L.training_logits_bytes(arch, ctx.spec.logits, mb.num_rows, mb.logit_rows, ctx.spec.logits_chunk_rows, mb.row_len, frozen_head=False)
    first = "(saved + max(logits, transient))"
    later = (f"max({first}, (TIED_GRADIENT_COPIES_AT_EMBEDDING_BACKWARD + 1) * g)" if arch.tie_word_embeddings
             else "max(saved + max(logits + g, transient), g)")
    g = Formula("B * V * h", (Input("B", L.B, "bf16 bytes"), Input("V", arch.vocab_size, "vocabulary"), Input("h", arch.hidden_size, "hidden")),
                "a bf16 V×h weight gradient", code_ref(L.accumulating_gradient_bytes))
    return Formula(f"{later} - {first}", (
        Input("saved", saved, "saved activations of the micro-batch (activations + vision.activations)"),
        Input("logits", logit, "the logits peak at the loss"), Input("transient", transient + a2a, "backward transient (+ Ulysses buffers)"),
        Input("g", g.value, "a vocabulary-sized weight gradient", formula=g), constant(A, "TIED_GRADIENT_COPIES_AT_EMBEDDING_BACKWARD"),
    ), doc_source(L.accumulating_gradient_bytes), code_ref(L.accumulating_gradient_bytes))


@gpu(r"sync\.gathered_params")
def sync_gathered(ctx: Ctx, name: str) -> Formula:
    m, spec = ctx.model(Role.actor), ctx.spec
    batches = spec.rollout.weight_sync_batches
    if batches is None and spec.finetune.method == FinetuneMethod.full:
        return Formula("largest * BF16_BYTES", (fn_input("largest", P.num_largest_module_parameters(m.arch), P.num_largest_module_parameters),
                                                constant(C, "BF16_BYTES")),
                       "TRL _move_model_to_vllm (full fine-tuning gathers one parameter at a time)", code_ref(GP.sync_gather_bytes))
    if spec.finetune.method != FinetuneMethod.full and spec.rollout.lora_sync == LoraSync.adapter_layers:
        return Formula("unit - unit // N", (
            fn_input("unit", GT.largest_unit_bytes(m), GT.largest_unit_bytes,
                     "the largest FSDP unit (a decoder layer, or the embedding / LM head) in the parameters' dtype"),
            Input("N", m.num_shards, "shards of the model"),
        ), doc_source(GT.layered_summon_bytes), code_ref(GT.layered_summon_bytes))
    return Formula("(W_full - W_shard) // batches", (
        Input("W_full", m.weights_full, "the actor's unsharded weights"), Input("W_shard", m.weights, "this GPU's shard"),
        Input("batches", batches or 1, "rollout.weight_sync_batches (ms-swift move_model_batches; 1: the whole model, as LoRA merges need)"),
    ), "ms-swift move_model_batches; TRL _move_model_to_vllm; OpenRLHF broadcast_to_vllm", code_ref(GP.sync_gather_bytes))


@gpu(r"sync\.lora_merge_delta")
def lora_merge_delta(ctx: Ctx, name: str) -> Formula:
    from ..memory import states as S

    arch = ctx.model(Role.actor).arch
    largest = max(s.in_features * s.out_features for s, _ in S.linear_shapes_with_layer_counts(arch))
    return Formula("2 * out_x_in * FP32_BYTES", (Input("out_x_in", largest, "elements of the largest adapted linear (out × in)"),
                                                 constant(C, "FP32_BYTES")),
                   doc_source(GP.lora_merge_delta_bytes), code_ref(GP.lora_merge_delta_bytes))
