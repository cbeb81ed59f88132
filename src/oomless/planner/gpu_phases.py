"""Phase-by-phase GPU memory of one training GPU and one rollout-only GPU.

A GRPO step on a training GPU goes load → rollout → logprob → train → optimizer →
weight_sync (TRL `GRPOTrainer._generate_and_score_completions`, ms-swift `rollout_mixin`,
verl `RayPPOTrainer.fit`). Each phase is the set of components resident at its peak; the
terms come from `oomless.memory`, and this module only decides which are resident when.

Residency rules (Assumes:):
- Gradients are freed after each optimizer step (HF Trainer `zero_grad(set_to_none=True)`),
  so they are resident in train and optimizer only.
- Between rollouts a colocated vLLM engine keeps its whole budget (sleep level 0) or only
  its CUDA graphs and non-torch memory (levels 1 and 2).
- `rollout.offload_model` moves policy and reference weights to CPU during rollout only;
  `rollout.offload_optimizer` moves optimizer states out for rollout and weight sync
  (ms-swift `offload_context`).
- Caching-allocator slack is charged on activations and temporaries (ACT, TEMP), the
  allocations that churn; gathered parameters and buckets are long-lived blocks of fixed
  size (see constants.ALLOCATOR_FRAGMENTATION_FRACTION).
"""

from __future__ import annotations

from ..catalog.models import ModelArch
from ..memory import activations as A
from ..memory import constants as C
from ..memory import logits as L
from ..memory import params as P
from ..memory import states as S
from ..memory import vllm as V
from ..memory.components import Category, Component
from ..spec.run import FinetuneMethod, RolloutEngine, RunSpec, Strategy
from .shape import RunShape

Phase = tuple[str, tuple[Component, ...]]


class TrainerState:
    """Per-GPU bytes of the trainer's resident model states, computed once per plan."""

    def __init__(self, spec: RunSpec, arch: ModelArch, shape: RunShape) -> None:
        n = shape.data_parallel_size
        dist, ft = spec.distribution, spec.finetune
        sharding = S.SHARDING[dist.strategy]
        self.sharding = sharding
        self.policy_weights_full = S.policy_weight_bytes(arch, ft, spec.precision)
        self.weights = 0 if dist.offload_params else S.sharded_bytes(self.policy_weights_full, sharding.weights, n)
        ref_full = S.reference_weight_bytes(arch, ft, spec.kl_beta)
        self.reference = S.sharded_bytes(ref_full, sharding.weights, n)
        self.grads = S.sharded_bytes(S.policy_grad_bytes(arch, ft, spec.precision), sharding.grads, n)
        opt_full = S.policy_optimizer_bytes(arch, ft, spec.optimizer, spec.precision)
        self.optimizer = 0 if dist.offload_optimizer else S.sharded_bytes(opt_full, sharding.optimizer, n)
        self.fp32_grads = self._fp32_grads(spec, arch, n)
        self.num_trainable = S.num_trainable_parameters(arch, ft)
        self.persistent = self._persistent_params(spec, arch, n)
        self.gathered = self._gathered_params(spec, arch)
        self.reduce_bucket, self.allgather_bucket = self._buckets(spec)

    def _fp32_grads(self, spec: RunSpec, arch: ModelArch, n: int) -> int:
        """fp32 gradient partition of the optimizer step (see states.fp32_grad_partition_bytes).
        ZeRO-3 builds it one sub-group (sub_group_size elements) at a time. Source: DeepSpeed
        stage3.py `_prepare_fp32_grad_for_sub_group`. None on the GPU with optimizer offload
        (CPU Adam steps on host copies) or under DDP (no ZeRO optimizer)."""
        dist = spec.distribution
        if dist.offload_optimizer or dist.strategy == Strategy.ddp:
            return 0
        partition = S.sharded_bytes(S.fp32_grad_partition_bytes(arch, spec.finetune, spec.precision), True, n)
        if dist.strategy == Strategy.zero3:
            return min(partition, dist.sub_group_size * C.FP32_BYTES)
        return partition

    def _persistent_params(self, spec: RunSpec, arch: ModelArch, n: int) -> int:
        """ZeRO-3 keeps tensors below stage3_param_persistence_threshold whole on every rank:
        the (N−1)/N of them beyond the shard already counted. Source: DeepSpeed
        runtime/zero/partition_parameters.py (`ds_persist`)."""
        if spec.distribution.strategy != Strategy.zero3:
            return 0
        small = P.num_small_parameters(arch, spec.distribution.stage3_param_persistence_threshold)
        return small * C.BF16_BYTES * (n - 1) // n

    def _gathered_params(self, spec: RunSpec, arch: ModelArch) -> int:
        """Unsharded 16-bit parameters alive during forward/backward under ZeRO-3/FSDP.

        ZeRO-3: the module being computed plus the prefetch bucket, capped by
        stage3_max_live_parameters, and at least the largest single module (the embedding
        or lm_head). Source: DeepSpeed runtime/zero/config.py, `estimate_zero3_model_states
        _mem_needs` (largest_layer term). FSDP: the current and the prefetched unit (one
        decoder layer each, BACKWARD_PRE). Source: PyTorch FSDP docs (limit_all_gathers).
        """
        dist = spec.distribution
        if not self.sharding.weights:
            return 0
        layer = P.num_decoder_layer_parameters(arch) // arch.num_layers
        if dist.strategy == Strategy.fsdp:
            return 2 * max(layer, P.num_largest_module_parameters(arch)) * C.BF16_BYTES
        live = max(P.num_largest_module_parameters(arch), layer + dist.stage3_prefetch_bucket_size)
        return min(live, dist.stage3_max_live_parameters) * C.BF16_BYTES

    def _buckets(self, spec: RunSpec) -> tuple[int, int]:
        """DeepSpeed communication buckets (elements capped by what there is to reduce).

        Reduce: reduce_bucket_size 16-bit gradient elements, doubled with overlap_comm
        (two IPG buffers). Allgather (ZeRO-1/2 parameter all-gather after the step):
        allgather_bucket_size 16-bit elements. Source: DeepSpeed
        runtime/zero/stage_1_and_2.py (`ipg_buffer`, `allgather_bucket_size`) and
        stage3.py; DeepSpeed config docs. DDP: PyTorch DDP buckets are views of grads.
        """
        dist = spec.distribution
        if dist.strategy in (Strategy.ddp, Strategy.fsdp):
            return 0, 0
        copies = 2 if dist.overlap_comm else 1
        reduce = min(dist.reduce_bucket_size, self.num_trainable) * C.BF16_BYTES * copies
        allgather = 0 if dist.strategy == Strategy.zero3 else min(dist.allgather_bucket_size, self.num_trainable) * C.BF16_BYTES
        return reduce, allgather


def _c(name: str, category: Category, num_bytes: int) -> Component:
    return Component(name, category, int(num_bytes))


def _slack(components: list[Component]) -> Component:
    churn = sum(c.num_bytes for c in components if c.category in (Category.ACT, Category.TEMP))
    return _c("allocator_fragmentation", Category.OTHER, churn * C.ALLOCATOR_FRAGMENTATION_FRACTION)


def _finish(components: list[Component]) -> tuple[Component, ...]:
    kept = [c for c in components if c.num_bytes > 0]
    slack = _slack(kept)
    return tuple(kept + ([slack] if slack.num_bytes else []))


def process_overheads(spec: RunSpec, shape: RunShape) -> list[Component]:
    """CUDA context of the training process, NCCL when it talks to other ranks, and the
    vLLM worker's own context when it runs in a separate process."""
    out = [_c("cuda_context", Category.OTHER, C.CUDA_CONTEXT_BYTES)]
    if shape.data_parallel_size > 1:
        out.append(_c("nccl", Category.OTHER, C.NCCL_COMMUNICATOR_BYTES))
    if spec.rollout.engine == RolloutEngine.vllm_colocate and not spec.rollout.engine_in_trainer_process:
        out.append(_c("vllm.cuda_context", Category.OTHER, C.CUDA_CONTEXT_BYTES))
    return out


def engine_budget(spec: RunSpec, arch: ModelArch, shape: RunShape) -> V.EngineBudget:
    ro = spec.rollout
    weights = S.frozen_weight_bytes(arch, spec.finetune) if spec.finetune.method == FinetuneMethod.qlora else P.num_parameters(arch) * C.BF16_BYTES
    return V.engine_budget(
        arch, weights, shape.capacity_bytes, ro.gpu_memory_utilization, ro.tensor_parallel_size,
        shape.vllm_max_num_batched_tokens, shape.vllm_max_num_seqs, ro.enforce_eager,
    )


def engine_awake(budget: V.EngineBudget) -> list[Component]:
    return [
        _c("vllm.weights", Category.PARAM, budget.weight_bytes),
        _c("vllm.kv_cache", Category.OTHER, max(budget.kv_cache_bytes, 0)),
        _c("vllm.profile_activations", Category.OTHER, budget.activation_bytes),
        _c("vllm.non_torch", Category.OTHER, budget.non_torch_bytes),
        _c("vllm.cuda_graphs", Category.OTHER, budget.cuda_graph_bytes),
    ]


def engine_residue(spec: RunSpec, budget: V.EngineBudget) -> list[Component]:
    if spec.rollout.engine != RolloutEngine.vllm_colocate:
        return []
    if spec.rollout.sleep_level == 0:
        return engine_awake(budget)
    return [
        _c("vllm.non_torch", Category.OTHER, budget.non_torch_bytes),
        _c("vllm.cuda_graphs", Category.OTHER, budget.cuda_graph_bytes),
    ]


def states(t: TrainerState, *, weights: bool = True, optimizer: bool = True, grads: bool = False) -> list[Component]:
    out = []
    if weights:
        out += [
            _c("policy.weights", Category.PARAM, t.weights),
            _c("policy.persistent_params", Category.PARAM, t.persistent),
            _c("reference.weights", Category.PARAM, t.reference),
        ]
    if optimizer:
        out.append(_c("policy.optimizer_states", Category.OPT, t.optimizer))
    if grads:
        out.append(_c("policy.grads", Category.GRAD, t.grads))
    return out


def load_phase(spec: RunSpec, shape: RunShape, t: TrainerState, budget: V.EngineBudget) -> Phase:
    """After start-up: engine budget reserved, trainer weights and optimizer states placed,
    DeepSpeed's buckets allocated (deepspeed.initialize). No activations yet."""
    comps = process_overheads(spec, shape) + states(t)
    comps.append(_c("zero.reduce_buckets", Category.GRAD, t.reduce_bucket))
    if spec.rollout.engine == RolloutEngine.vllm_colocate:
        comps += engine_awake(budget)
    return "load", _finish(comps)


def engine_start_resident_bytes(spec: RunSpec, shape: RunShape, t: TrainerState) -> int:
    """GPU bytes in use when a colocated engine checks free memory at start-up.

    Assumes the order of TRL and ms-swift: the engine is built in the trainer's __init__,
    after from_pretrained and before accelerator.prepare/deepspeed.initialize. ZeRO-3 and
    FSDP weights are already sharded on the GPU then (zero.Init during from_pretrained);
    DDP/ZeRO-1/2 weights and all optimizer states arrive later. Source: TRL
    grpo_trainer.py (`__init__` builds `VLLMGeneration`), transformers Trainer
    (`place_model_on_device` is False under DeepSpeed/FSDP).
    """
    overheads = sum(c.num_bytes for c in process_overheads(spec, shape))
    sharded_now = t.weights + t.reference if t.sharding.weights else 0
    return overheads + sharded_now


def rollout_phase(spec: RunSpec, arch: ModelArch, shape: RunShape, t: TrainerState, budget: V.EngineBudget) -> Phase:
    ro = spec.rollout
    comps = process_overheads(spec, shape)
    comps += states(t, weights=not ro.offload_model, optimizer=not ro.offload_optimizer)
    comps.append(_c("zero.reduce_buckets", Category.GRAD, t.reduce_bucket))
    if ro.engine == RolloutEngine.vllm_colocate:
        comps += engine_awake(budget)
    elif ro.engine == RolloutEngine.hf:
        comps += hf_generate_components(spec, arch, shape, t)
    return "rollout", _finish(comps)


def hf_generate_components(spec: RunSpec, arch: ModelArch, shape: RunShape, t: TrainerState) -> list[Component]:
    """transformers `generate` in the training process for the whole local rollout batch.

    ZeRO-3 gathers the full policy for generation (TRL/VLM-R1 `unwrap_model_for_generation`
    with ds3_gather_for_generation=True). The KV cache holds every sequence at full length
    (DynamicCache, bf16, no TP); prefill runs all prompts at once; each decode step makes
    fp32 next-token logits. Source: transformers generation/utils.py (`_sample`).
    """
    seqs = shape.generation_sequences_per_gpu
    gathered = t.policy_weights_full - t.weights if t.sharding.weights else 0
    kv = seqs * shape.seq_len * V.kv_bytes_per_token(arch, 1)
    prefill = A.inference_forward_peak_bytes(arch, seqs * spec.lengths.max_prompt_tokens)
    step_logits = seqs * arch.vocab_size * C.FP32_BYTES
    return [
        _c("generate.gathered_weights", Category.PARAM, gathered),
        _c("generate.kv_cache", Category.ACT, kv),
        _c("generate.activations", Category.TEMP, max(prefill, step_logits)),
    ]


def logprob_phase(spec: RunSpec, arch: ModelArch, shape: RunShape, t: TrainerState, budget: V.EngineBudget) -> Phase:
    """No-grad forward of the policy (old log-probs) or the reference over one log-prob
    micro-batch; only completion positions get logits."""
    comps = process_overheads(spec, shape) + states(t) + engine_residue(spec, budget)
    comps.append(_c("zero.reduce_buckets", Category.GRAD, t.reduce_bucket))
    comps.append(_c("zero.gathered_params", Category.PARAM, t.gathered))
    tokens = shape.logprob_sequences * shape.seq_len
    comps.append(_c("activations", Category.ACT, A.inference_forward_peak_bytes(arch, tokens)))
    completion_tokens = shape.logprob_sequences * shape.completion_len
    comps.append(_c("logits", Category.TEMP, L.logprob_logits_bytes(arch, spec.logits, completion_tokens, spec.logits_chunk_rows)))
    return "logprob", _finish(comps)


def train_phase(spec: RunSpec, arch: ModelArch, shape: RunShape, t: TrainerState, budget: V.EngineBudget) -> Phase:
    """Forward + backward of one micro-batch. Peak = saved activations + the larger of the
    logits peak (at the loss) and the backward transient (a recomputed layer later on)."""
    comps = process_overheads(spec, shape) + states(t, grads=True) + engine_residue(spec, budget)
    comps.append(_c("zero.reduce_buckets", Category.GRAD, t.reduce_bucket))
    comps.append(_c("zero.gathered_params", Category.PARAM, t.gathered))
    gc, attn = spec.gradient_checkpointing, spec.attention
    seqs, seq_len = shape.train_sequences, shape.seq_len
    comps.append(_c("activations", Category.ACT, A.training_saved_activation_bytes(arch, attn, gc, seqs, seq_len)))
    lm_head_trainable = spec.finetune.method == FinetuneMethod.full
    logits = L.training_logits_bytes(arch, spec.logits, seqs * shape.completion_len, spec.logits_chunk_rows, lm_head_trainable)
    transient = A.backward_transient_bytes(arch, attn, gc, seqs, seq_len)
    if logits >= transient:
        comps.append(_c("logits", Category.TEMP, logits))
    else:
        comps.append(_c("backward_recompute", Category.TEMP, transient))
    return "train", _finish(comps)


def optimizer_phase(spec: RunSpec, shape: RunShape, t: TrainerState, budget: V.EngineBudget) -> Phase:
    comps = process_overheads(spec, shape) + states(t, grads=True) + engine_residue(spec, budget)
    comps.append(_c("optimizer.fp32_grads", Category.GRAD, t.fp32_grads))
    comps.append(_c("zero.allgather_bucket", Category.PARAM, t.allgather_bucket))
    return "optimizer", _finish(comps)


def weight_sync_phase(spec: RunSpec, arch: ModelArch, shape: RunShape, t: TrainerState, budget: V.EngineBudget) -> Phase:
    """Trainer weights pushed into the engine. The engine's weights are awake (sleep levels
    1/2 wake "weights" first); under ZeRO-3/FSDP the trainer gathers parameters: one at a
    time for full fine-tuning, the whole model for LoRA (the adapter merge needs every base
    weight), then merges adapters one module at a time. Source: TRL `_move_model_to_vllm`,
    ms-swift `move_model_batches`."""
    ro = spec.rollout
    comps = process_overheads(spec, shape) + states(t, optimizer=not ro.offload_optimizer)
    if ro.engine == RolloutEngine.vllm_colocate:
        awake = engine_awake(budget) if ro.sleep_level == 0 else [
            _c("vllm.weights", Category.PARAM, budget.weight_bytes),
            _c("vllm.non_torch", Category.OTHER, budget.non_torch_bytes),
            _c("vllm.cuda_graphs", Category.OTHER, budget.cuda_graph_bytes),
        ]
        comps += awake
    lora = spec.finetune.method != FinetuneMethod.full
    if ro.engine != RolloutEngine.hf and t.sharding.weights:
        gather = t.policy_weights_full - t.weights if lora else P.num_largest_module_parameters(arch) * C.BF16_BYTES
        comps.append(_c("sync.gathered_params", Category.PARAM, gather))
    if ro.engine != RolloutEngine.hf and lora:
        comps.append(_c("sync.lora_merge_delta", Category.TEMP, lora_merge_delta_bytes(arch)))
    return "weight_sync", _finish(comps)


def lora_merge_delta_bytes(arch: ModelArch) -> int:
    """`merge_adapter` adds delta W = B·A·scaling module by module; the largest delta is one
    fp32 out×in matrix (PEFT keeps adapters in fp32, autocast_adapter_dtype=True).
    Source: peft/tuners/lora/layer.py (`get_delta_weight`, `merge`)."""
    largest = max(s.in_features * s.out_features for s, _ in S.linear_shapes_with_layer_counts(arch))
    return largest * C.FP32_BYTES


def training_gpu_phases(spec: RunSpec, arch: ModelArch, shape: RunShape) -> tuple[TrainerState, V.EngineBudget, list[Phase]]:
    t = TrainerState(spec, arch, shape)
    budget = engine_budget(spec, arch, shape)
    phases = [load_phase(spec, shape, t, budget), rollout_phase(spec, arch, shape, t, budget)]
    if shape.needs_logprob_pass:
        phases.append(logprob_phase(spec, arch, shape, t, budget))
    phases += [train_phase(spec, arch, shape, t, budget), optimizer_phase(spec, shape, t, budget)]
    if spec.rollout.engine != RolloutEngine.hf:
        phases.append(weight_sync_phase(spec, arch, shape, t, budget))
    return t, budget, phases


def rollout_gpu_phases(spec: RunSpec, budget: V.EngineBudget) -> list[Phase]:
    """A GPU given to vLLM alone (vllm_separate): its context and its whole budget, in
    every phase; weight sync receives tensors into the existing weights (NCCL broadcast)."""
    base = [_c("vllm.cuda_context", Category.OTHER, C.CUDA_CONTEXT_BYTES)] + engine_awake(budget)
    return [("load", tuple(base)), ("rollout", tuple(base)), ("weight_sync", tuple(base + [_c("nccl", Category.OTHER, C.NCCL_COMMUNICATOR_BYTES)]))]
