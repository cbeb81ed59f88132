"""Formulas of a vLLM engine worker on one GPU (`memory.vllm`, `planner.engine`) and of HF
``generate`` in the training process (`GroupPlanner.hf_generate`)."""

from __future__ import annotations

from ..memory import activations as A
from ..memory import constants as C
from ..memory import params as P
from ..memory import states as S
from ..memory import vllm as V
from ..memory import vllm_sampler as VS
from ..planner import engine as E
from ..planner import gpu_phases as GP
from ..planner import vision_terms as VT
from ..spec.run import FinetuneMethod, Role
from .context import Ctx
from .formula import Formula, Input, code_ref, constant, constant_doc, constant_formula, doc_source, fn_input
from .registry import gpu

VLLM_SOURCE = "vllm/v1/worker/gpu_worker.py (determine_available_memory), vllm/utils/mem_utils.py (memory_profiling)"


def _engine_model_weights(ctx: Ctx) -> Input:
    spec, arch = ctx.spec, ctx.plan.arch
    stored = S.prequantized_weight_bytes(arch) if spec.finetune.method != FinetuneMethod.full else None
    if stored is not None:
        return fn_input("W", stored, S.prequantized_weight_bytes, "the pre-quantized checkpoint as stored (vLLM serves that format)")
    if spec.finetune.method == FinetuneMethod.qlora:
        return fn_input("W", S.frozen_weight_bytes(arch, spec.finetune), S.frozen_weight_bytes, "the 4-bit base (TRL loads the bitsandbytes model into vLLM)")
    f = Formula("Psi * BF16_BYTES", (fn_input("Psi", P.num_parameters(arch), P.num_parameters, "parameters of the actor"), constant(C, "BF16_BYTES")),
                doc_source(E.engine_budget) or "bf16 engine weights", code_ref(E.engine_budget))
    return Input("W", f.value, "the actor's weights as the engine loads them", formula=f)


def _tp(ctx: Ctx) -> Input:
    return Input("TP", ctx.spec.rollout.tensor_parallel_size, "rollout.tensor_parallel_size")


@gpu(r"vllm\.weights")
def engine_weights(ctx: Ctx, name: str) -> Formula:
    return Formula("ceil(W / TP)", (_engine_model_weights(ctx), _tp(ctx)), doc_source(V.weight_bytes_per_rank) or
                   "vllm/model_executor/layers/linear.py (column/row-parallel layers split over TP ranks)", code_ref(V.weight_bytes_per_rank))


def _requested(ctx: Ctx) -> Input:
    u = ctx.spec.rollout.gpu_memory_utilization
    f = Formula("ceil(capacity * utilization)", (Input("capacity", ctx.shape.capacity_bytes, "GPU memory"),
                                                  Input("utilization", u, "rollout.gpu_memory_utilization")),
                "vllm/v1/worker/gpu_worker.py (requested_memory)", code_ref(V.requested_bytes))
    return Input("requested", ctx.budget.requested_bytes, "the engine's budget on one GPU", formula=f)


@gpu(r"vllm\.profile_activations")
def profile_activations(ctx: Ctx, name: str) -> Formula:
    spec, shape, arch, tp = ctx.spec, ctx.shape, ctx.plan.arch, ctx.spec.rollout.tensor_parallel_size
    encoder = VT.engine_encoder_bytes(spec, shape, arch)
    version = spec.rollout.vllm_version
    forward = V.profile_activation_bytes(arch, tp, shape.vllm_max_num_batched_tokens, shape.vllm_max_num_seqs, version)
    state = fn_input("state", VS.sampler_state_bytes(version, shape.vllm_max_num_seqs, arch.vocab_size), VS.sampler_state_bytes,
                     "model runner V2's penalty counts per request slot (vLLM >= 0.29)")
    if encoder + state.value > forward:
        return Formula("encoder + state", (fn_input("encoder", encoder, VT.engine_encoder_bytes), state),
                       doc_source(VT.engine_encoder_bytes), code_ref(E.engine_budget))
    tokens = shape.vllm_max_num_batched_tokens
    per_token = fn_input("per_token", A.inference_layer_peak_bytes_per_token(arch, tp), A.inference_layer_peak_bytes_per_token)
    return Formula("max(tokens * per_token, sampler) + state", (
        Input("tokens", tokens, "max_num_batched_tokens of the profile run (vLLM's default for the GPU when unset)"), per_token,
        Input("sampler", V.profile_sampler_bytes(arch, tokens, shape.vllm_max_num_seqs, version),
              f"the dummy sampler run (vLLM {version or 'newest'}) and the forward output kept through it",
              formula=_profile_sampler(ctx)),
        state,
    ), doc_source(V.profile_activation_bytes), code_ref(V.profile_activation_bytes))


def _profile_sampler(ctx: Ctx) -> Formula:
    shape, arch, version = ctx.shape, ctx.plan.arch, ctx.spec.rollout.vllm_version
    tokens = shape.vllm_max_num_batched_tokens
    rows = VS.sampler_rows(tokens, shape.vllm_max_num_seqs)
    return Formula("R * V * per_logit + workspace + kept", (
        Input("R", rows, "min(max_num_seqs, max_num_batched_tokens) dummy requests"),
        Input("V", arch.vocab_size, "vocabulary"),
        fn_input("per_logit", VS.sampler_live_bytes_per_logit(version), VS.sampler_live_bytes_per_logit,
                 f"bytes per logit alive in vLLM {version or 'newest'} at the sampler's peak"),
        fn_input("workspace", VS.sampler_workspace_bytes(version, rows, arch.vocab_size), VS.sampler_workspace_bytes),
        fn_input("kept", VS.retained_forward_output_bytes(version, tokens, arch.hidden_size), VS.retained_forward_output_bytes,
                 "the forward's bf16 hidden states profile_run holds meanwhile"),
    ), doc_source(VS.sampler_peak_bytes), code_ref(VS.sampler_peak_bytes))


@gpu(r"vllm\.non_torch")
def non_torch(ctx: Ctx, name: str) -> Formula:
    if ctx.spec.rollout.tensor_parallel_size > 1:
        return Formula("VLLM_NON_TORCH_BYTES + NCCL_COMMUNICATOR_BYTES",
                       (constant(C, "VLLM_NON_TORCH_BYTES"), constant(C, "NCCL_COMMUNICATOR_BYTES")),
                       constant_doc(C, "VLLM_NON_TORCH_BYTES")[0], code_ref(V.non_torch_bytes))
    return constant_formula(C, "VLLM_NON_TORCH_BYTES")


@gpu(r"vllm\.cuda_graphs")
def cuda_graphs(ctx: Ctx, name: str) -> Formula:
    return constant_formula(C, "VLLM_CUDA_GRAPH_BYTES")


@gpu(r"vllm\.kv_cache")
def kv_cache(ctx: Ctx, name: str) -> Formula:
    b = ctx.budget
    inputs = [_requested(ctx), Input("weights", b.weight_bytes, "vllm.weights"),
              Input("profile", b.activation_bytes, "vllm.profile_activations"), Input("non_torch", b.non_torch_bytes, "vllm.non_torch")]
    expression = "requested - weights - profile - non_torch"
    if b.graphs_in_budget:
        inputs.append(Input("graphs", b.cuda_graph_bytes, "vllm.cuda_graphs (inside the budget, vLLM >= 0.21)"))
        expression += " - graphs"
    return Formula(f"max({expression}, 0)", tuple(inputs), f"{VLLM_SOURCE}; vllm#11251 (graphs in the budget from v0.21)",
                   code_ref(V.EngineBudget))


# --- HF generate in the trainer -----------------------------------------------------------------


@gpu(r"generate\.gathered_weights")
def generate_gathered(ctx: Ctx, name: str) -> Formula:
    m = ctx.model(Role.actor)
    inputs = (Input("W_full", m.weights_full, "the actor's unsharded weights"),
              Input("W_shard", m.weights, "this GPU's shard (policy.weights)"))
    source = "TRL/VLM-R1 unwrap_model_for_generation (ds3_gather_for_generation=True)"
    if ctx.spec.critic.wrapped_with_actor and Role.critic in ctx.plan.models:
        c = ctx.model(Role.critic)
        return Formula("(W_full - W_shard) + (Wc_full - Wc_shard)", inputs + (
            Input("Wc_full", c.weights_full, "the value model's unsharded weights (one module with the policy)"),
            Input("Wc_shard", c.weights, "this GPU's shard of it")),
            source + "; TRL PPOTrainer's PolicyAndValueWrapper", code_ref(GP.generate_gathered_bytes))
    return Formula("W_full - W_shard", inputs, source, code_ref(GP.GroupPlanner.hf_generate))


def _sequences(ctx: Ctx) -> Input:
    return Input("seqs", ctx.shape.generation_sequences_per_gpu, "completions this rank generates per rollout")


@gpu(r"generate\.kv_cache")
def generate_kv(ctx: Ctx, name: str) -> Formula:
    arch = ctx.model(Role.actor).arch
    return Formula("seqs * seq_len * kv_per_token", (
        _sequences(ctx), Input("seq_len", ctx.shape.seq_len, "prompt + completion tokens"),
        fn_input("kv_per_token", V.kv_bytes_per_token(arch, 1), V.kv_bytes_per_token),
    ), doc_source(GP.GroupPlanner.hf_generate), code_ref(GP.GroupPlanner.hf_generate))


@gpu(r"generate\.activations")
def generate_activations(ctx: Ctx, name: str) -> Formula:
    spec, shape, arch = ctx.spec, ctx.shape, ctx.model(Role.actor).arch
    seqs = shape.generation_sequences_per_gpu
    return Formula("max(seqs * prompt_len * per_token + vision, seqs * V * FP32_BYTES)", (
        _sequences(ctx), Input("prompt_len", shape.prompt_len, "longest prompt (text + image tokens)"),
        fn_input("per_token", A.inference_layer_peak_bytes_per_token(arch), A.inference_layer_peak_bytes_per_token),
        fn_input("vision", VT.inference_bytes(spec, shape, arch, seqs), VT.inference_bytes, "vision tower's no-grad forward over the prompts' images"),
        Input("V", arch.vocab_size, "vocabulary"), constant(C, "FP32_BYTES"),
    ), doc_source(GP.GroupPlanner.hf_generate), code_ref(GP.GroupPlanner.hf_generate))


@gpu(r"generate\.(?:previous_)?scores(?:_padded_copy)?")
def generate_scores(ctx: Ctx, name: str) -> Formula:
    arch = ctx.model(Role.actor).arch
    what = ("their padded copy, made at the rollout's end (`batch_generation`'s `pad`)" if name.endswith("copy")
            else "the last rollout's, alive until `logitss` is reassigned" if "previous" in name
            else "kept from the rollout to the next one (TRL PPOTrainer's `logitss`)")
    return Formula("seqs * completion * V * FP32_BYTES", (
        _sequences(ctx), Input("completion", ctx.shape.completion_len, "completion tokens"),
        Input("V", arch.vocab_size, "vocabulary"), constant(C, "FP32_BYTES"),
    ), f"{doc_source(GP.generation_scores_bytes)}; {what}", code_ref(GP.generation_scores_bytes))
