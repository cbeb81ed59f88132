"""The models of a run (actor, reference, critic, reward), where they live, and what each
keeps on one GPU of its group.

GRPO/DAPO/RLOO have an actor and, for full fine-tuning with KL, a reference model; PPO adds a
critic (a causal LM body with a value head) and optionally a reward model. LoRA runs reuse the
actor's base with adapters disabled as reference (TRL, ms-swift, verl `ref_in_actor`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from ..catalog.models import ModelArch
from ..memory import constants as C
from ..memory import params as P
from ..memory import states as S
from ..spec.run import (
    Algorithm, Finetune, FinetuneMethod, OptimizerImplementation, Precision, Role, RolloutEngine, RunSpec, Strategy,
)
from ..frozen_hash import cached_hash, state_without_hash
from .memo import Memo, value_key
from .sharding_terms import _fp32_grads, _gathered, _persistent, _reduce_bucket

MODEL_ROLES = (Role.actor, Role.reference, Role.critic, Role.reward)


@dataclass(frozen=True)
class Group:
    """GPUs (per node) shared by some roles; vLLM is a role too."""

    roles: tuple[Role, ...]
    gpus_per_node: int

    def models(self) -> tuple[Role, ...]:
        return tuple(r for r in self.roles if r != Role.vllm)

    @property
    def name(self) -> str:
        return "+".join(r.value for r in self.roles)


def has_reference_model(spec: RunSpec) -> bool:
    """A separate reference model: KL on (beta > 0), full fine-tuning, and not DAPO (which
    drops the KL term). Source: research/rl-frameworks.md §7.3."""
    return spec.kl_beta > 0 and spec.finetune.method == FinetuneMethod.full and spec.algorithm != Algorithm.dapo


def default_roles(spec: RunSpec) -> tuple[Role, ...]:
    roles = [Role.actor]
    if has_reference_model(spec):
        roles.append(Role.reference)
    if spec.algorithm == Algorithm.ppo:
        roles.append(Role.critic)
    if spec.reward_model.model is not None:
        roles.append(Role.reward)
    return tuple(roles)


def placement_groups(spec: RunSpec) -> tuple[Group, ...]:
    """Explicit `placement.groups`, or: every model on the training GPUs with vLLM beside them
    (colocate) or on `rollout.num_gpus` GPUs of its own (separate)."""
    if spec.placement.groups is not None:
        return tuple(Group(tuple(g.roles), g.gpus_per_node) for g in spec.placement.groups)
    roles, gpus, ro = default_roles(spec), spec.hardware.gpus_per_node, spec.rollout
    if ro.engine == RolloutEngine.vllm_colocate:
        return (Group(roles + (Role.vllm,), gpus),)
    if ro.engine == RolloutEngine.vllm_separate:
        return (Group(roles, gpus - ro.num_gpus), Group((Role.vllm,), ro.num_gpus))
    return (Group(roles, gpus),)


@dataclass(frozen=True)
class RoleModel:
    """Per-GPU bytes of one model on a GPU of its group (N = its group's GPUs × nodes)."""

    role: Role
    arch: ModelArch
    trainable: bool
    num_shards: int
    num_trainable: int
    weights_full: int
    weights: int
    persistent: int
    gathered: int
    grads: int = 0
    grads_persistent: bool = False
    """ZeRO-3 keeps its flat gradient partition buffer for the whole run."""
    master: int = 0
    optimizer_states: int = 0
    fp32_grads: int = 0
    reduce_bucket: int = 0
    bucket_persistent: bool = False
    """ZeRO-3's reduce buffer lives from init; ZeRO-1/2's exist only during backward."""
    states_at_first_step: bool = False
    """The optimizer states appear at the first optimizer step, not at load (`optimizer_states_at_first_step`)."""
    step_temporaries: int = 0
    """What the optimizer's `step()` allocates beyond its states (`step_temporary_bytes`)."""
    autocast_cache: int = 0
    """bf16 casts of fp32 weights torch.autocast keeps through a forward (`amp_fp32_params`)."""

    @property
    def optimizer(self) -> int:
        """Master weights + optimizer states on the GPU."""
        return self.master + self.optimizer_states

    def __hash__(self) -> int:
        """Computed once: the phase memos (`gpu_phases`) key on a group's models."""
        return cached_hash(self, _ROLE_MODEL_FIELDS)

    def __getstate__(self) -> dict[str, object]:
        return state_without_hash(self)


_ROLE_MODEL_FIELDS = tuple(f.name for f in fields(RoleModel))


def num_value_model_parameters(arch: ModelArch) -> int:
    """A critic or reward model: the LM body without its vocabulary head, plus a scalar head
    (hidden → 1). Source: OpenRLHF `models/model.py` (`_get_critic_model`, value_head =
    nn.Linear(hidden, 1, bias=False)); transformers `*ForSequenceClassification` (score)."""
    return P.num_parameters(arch) - P.num_lm_head_parameters(arch) + arch.hidden_size


def actor_trainable_parameters(spec: RunSpec, arch: ModelArch) -> int:
    """Ψ_t of the actor; a frozen vision tower is not trained in full fine-tuning (LoRA adapters
    sit on the language model only, so the tower never trains under LoRA)."""
    trainable = S.num_trainable_parameters(arch, spec.finetune)
    if spec.finetune.method == FinetuneMethod.full and spec.vision.freeze_tower:
        trainable -= P.num_vision_parameters(arch)
    return trainable


def critic_trainable_parameters(spec: RunSpec, arch: ModelArch) -> int:
    """Ψ_t of the value model: all of it, or with `critic.lora` the run's adapters on its body
    plus the scalar value head (hidden + 1; ms-swift keeps `v_head` trainable beside them).
    Source: ms-swift v3.5.0 swift/llm/train/rlhf.py (`prepare_model` on the value model),
    trl `AutoModelForCausalLMWithValueHead` (`v_head`: Linear(hidden, 1))."""
    if not spec.critic.lora:
        return num_value_model_parameters(arch)
    return S.num_trainable_parameters(arch, spec.finetune) + arch.hidden_size + 1


def optimizer_states_at_first_step(spec: RunSpec) -> bool:
    """A torch optimizer (DDP, FSDP) creates its states lazily: AdamW's exp_avg and exp_avg_sq
    are allocated in the first `step()` (`_init_group`: zeros_like per parameter with no state),
    so the load phase and the vLLM start-up check do not see them and an OOM they cause comes
    in the optimizer phase of step 1. DeepSpeed's ZeRO optimizers create them at
    `deepspeed.initialize` by stepping once on zero gradients (stage_1_and_2.py and stage3.py
    `initialize_optimizer_states`). Source: torch/optim/adamw.py (torch 2.x `_init_group`);
    HF Trainer `create_optimizer` (torch.optim.AdamW, no state before the first step);
    verl/EasyR1 `fsdp_workers.py` (torch AdamW on the FSDP module)."""
    return spec.distribution.strategy in (Strategy.ddp, Strategy.fsdp)


def fsdp_fp32_params(spec: RunSpec, finetune: Finetune) -> bool:
    """FSDP with mixed precision keeps the sharded parameters themselves in fp32 (they are the
    optimizer's master copy; bf16 exists only unsharded during compute) and reduces gradients
    in fp32: 4 + 4 + 8 = 16 bytes per parameter, ZeRO-3's total split differently.
    Source: verl/EasyR1 `fsdp_workers.py` (actor loaded in float32, MixedPrecision(param_dtype
    bf16, reduce_dtype fp32)); PyTorch FSDP MixedPrecision docs."""
    return (
        spec.distribution.strategy == Strategy.fsdp
        and spec.precision != Precision.bf16
        and finetune.method == FinetuneMethod.full
    )


def amp_fp32_params(spec: RunSpec, finetune: Finetune) -> bool:
    """Plain DDP with mixed precision is torch AMP: the trained model is held in fp32 and the
    Trainer's autocast computes in bf16/fp16, so weights and gradients are fp32 and the
    optimizer steps the weights themselves (4 + 4 + 8 = 16 bytes per parameter, no 16-bit
    working copy and no separate master), plus the autocast cache during a forward.
    Source: TRL 1.x GRPOTrainer loads float32 when `model_init_kwargs` names no dtype (its
    docstring; transformers 4.x `from_pretrained` defaulted to fp32 as well); accelerate
    `prepare_model` wraps `forward` in torch.autocast under bf16/fp16; measured on an H200
    (benchmarks/results/gpu/: load allocates 4 bytes per parameter).
    Not distinguished: DeepSpeed at ZeRO stage 0 (OpenRLHF/ORZ `zero_stage 0`, read as ddp)
    keeps bf16 weights with fp32 masters instead (its BF16_Optimizer); no corpus config uses it."""
    return (
        spec.distribution.strategy == Strategy.ddp
        and spec.precision != Precision.bf16
        and finetune.method == FinetuneMethod.full
    )


def adapter_bytes(spec: RunSpec, finetune: Finetune) -> int | None:
    """Bytes per trainable parameter of LoRA/QLoRA adapters trained by torch AMP (plain DDP,
    mixed precision): the adapters are held as they are, with no 16-bit working copy and no
    separate master; their gradients and AdamW states take the same dtype. None elsewhere
    (full fine-tuning: `amp_fp32_params`; ZeRO and FSDP keep their own layouts).
    fp32 (4): PEFT's default, `get_peft_model(..., autocast_adapter_dtype=True)` upcasts the
    adapters to fp32 (peft `tuners_utils._cast_adapter_dtype`). bf16 (2): TRL casts the
    adapters of a 4-bit base to bf16 (trl/trainer/grpo_trainer.py, 0.26 and 1.16: `param.data =
    param.data.to(torch.bfloat16)` where `is_loaded_in_4bit`; 0.23-0.25 through
    `peft_module_casting_to_bf16` under bf16), the QLoRA paper's setting (§3).
    Measured on an H100 (benchmarks/results/gpu-lora, gpu-qlora: TRL 1.16, peft 0.21, Qwen2.5-1.5B,
    r 32): LoRA adapters and gradients 4 bytes per parameter, QLoRA 2; neither has another copy."""
    if finetune.method == FinetuneMethod.full or spec.distribution.strategy != Strategy.ddp or spec.precision == Precision.bf16:
        return None
    dtype = finetune.adapter_dtype or ("bf16" if finetune.method == FinetuneMethod.qlora else "fp32")
    return C.BF16_BYTES if dtype == "bf16" else C.FP32_BYTES


def trainable_precision(spec: RunSpec, finetune: Finetune) -> Precision:
    """The precision the optimizer steps in: pure bf16 for bf16 adapters (`adapter_bytes`), whose
    AdamW states torch keeps in the parameter dtype; the spec's otherwise."""
    return Precision.bf16 if adapter_bytes(spec, finetune) == C.BF16_BYTES else spec.precision


def implementation_under(stated: OptimizerImplementation | None, strategy: Strategy) -> OptimizerImplementation | None:
    """``stated``, else foreach under DDP/FSDP (torch's `_default_to_fused_or_foreach` picks
    foreach for CUDA tensors when neither flag is given: torch/optim/optimizer.py) and None
    (DeepSpeed's own optimizer, no step temporaries) under ZeRO."""
    if stated is not None:
        return stated
    return OptimizerImplementation.foreach if strategy in (Strategy.ddp, Strategy.fsdp) else None


def optimizer_implementation(spec: RunSpec) -> OptimizerImplementation | None:
    """How the spec's optimizer step runs (`implementation_under` its strategy)."""
    return implementation_under(spec.optimizer_implementation, spec.distribution.strategy)


def step_temporary_bytes(spec: RunSpec, arch: ModelArch, finetune: Finetune, num_trainable: int, n: int) -> int:
    """The optimizer step's temporaries on one GPU (`states.optimizer_step_temporary_bytes`)
    over what that GPU steps: every trainable parameter under DDP, its shard under FSDP, the
    flat fp32 partition DeepSpeed hands a client torch optimizer under ZeRO-1/2 (one tensor,
    so for_loop is the same), at most one `sub_group_size` tile under ZeRO-3. None with CPU
    Adam (`offload_optimizer`)."""
    dist, implementation = spec.distribution, optimizer_implementation(spec)
    if dist.offload_optimizer or implementation in (None, OptimizerImplementation.fused):
        return 0
    stepped, largest = num_trainable, S.largest_trainable_tensor_elements(arch, finetune)
    if dist.strategy != Strategy.ddp:
        stepped, largest = math.ceil(num_trainable / n), math.ceil(largest / n)
    if dist.strategy in (Strategy.zero1, Strategy.zero2, Strategy.zero3):
        largest = stepped = min(stepped, dist.sub_group_size) if dist.strategy == Strategy.zero3 else stepped
    return S.optimizer_step_temporary_bytes(spec.optimizer, trainable_precision(spec, finetune), implementation, stepped, largest)


def finetune_of(spec: RunSpec, role: Role) -> Finetune:
    """How ``role`` trains: the spec's fine-tuning for the actor, and for a critic with
    `critic.lora` (ms-swift's LoRA value model); full fine-tuning for any other model."""
    return spec.finetune if role == Role.actor or (role == Role.critic and spec.critic.lora) else Finetune(method=FinetuneMethod.full)


def trainable_model(spec: RunSpec, role: Role, arch: ModelArch, num_trainable: int, weights_full: int, n: int) -> RoleModel:
    """A model with gradients and optimizer states (actor, critic), per GPU. ZeRO-3 keeps
    its flat gradient partition from init (stage3.py `grad_partitions_flat_buffer`)."""
    dist = spec.distribution
    sharding = S.SHARDING[dist.strategy]
    finetune = finetune_of(spec, role)
    grads = num_trainable * S.grad_bytes_per_param(spec.precision)
    master = num_trainable * S.master_bytes_per_param(spec.precision)
    if fsdp_fp32_params(spec, finetune):
        weights_full, grads, master = num_trainable * C.FP32_BYTES, num_trainable * C.FP32_BYTES, 0
    amp = amp_fp32_params(spec, finetune)
    if amp:
        weights_full, grads, master = weights_full // C.BF16_BYTES * C.FP32_BYTES, num_trainable * C.FP32_BYTES, 0
    adapter = adapter_bytes(spec, finetune)
    if adapter is not None:  # the adapters as held, in place of the 16-bit copy `policy_weight_bytes` counts
        weights_full += num_trainable * (adapter - C.BF16_BYTES)
        grads, master = num_trainable * adapter, 0
    states = S.optimizer_state_bytes(arch, finetune, spec.optimizer, trainable_precision(spec, finetune), num_trainable)
    on_gpu = not dist.offload_optimizer
    return RoleModel(
        role=role, arch=arch, trainable=True, num_shards=n, num_trainable=num_trainable,
        weights_full=weights_full,
        weights=0 if dist.offload_params else S.sharded_bytes(weights_full, sharding.weights, n),
        persistent=_persistent(spec, arch, n), gathered=_gathered(spec, arch, sharding.weights),
        grads=S.sharded_bytes(grads, sharding.grads, n), grads_persistent=dist.strategy == Strategy.zero3,
        master=S.sharded_bytes(master, sharding.optimizer, n) if on_gpu else 0,
        optimizer_states=S.sharded_bytes(states, sharding.optimizer, n) if on_gpu else 0,
        fp32_grads=_fp32_grads(spec, num_trainable, n), reduce_bucket=_reduce_bucket(spec, arch),
        bucket_persistent=dist.strategy == Strategy.zero3, states_at_first_step=optimizer_states_at_first_step(spec),
        step_temporaries=step_temporary_bytes(spec, arch, finetune, num_trainable, n),
        autocast_cache=_autocast_cache_bytes(arch, amp, adapter, num_trainable),
    )


def _autocast_cache_bytes(arch: ModelArch, amp: bool, adapter: int | None, num_trainable: int) -> int:
    """bf16 casts autocast keeps of fp32 leaf tensors that require grad: the whole model under
    `amp_fp32_params`, the adapters when they are fp32 (`adapter_bytes`), nothing otherwise."""
    if amp:
        return S.autocast_weight_cache_bytes(arch)
    return num_trainable * C.BF16_BYTES if adapter == C.FP32_BYTES else 0


def reference_amp_weight_bytes(bf16_bytes: int) -> int:
    """The reference model of a torch-AMP run (`amp_fp32_params`) in the policy's dtype, fp32.
    Source: TRL 1.x GRPOTrainer builds it with `model_init_kwargs.setdefault("dtype",
    self.model.dtype)` (trl/trainer/grpo_trainer.py), and `create_model_from_path` defaults
    to float32; under DDP nothing casts it (DeepSpeed would, at `deepspeed.initialize`)."""
    return bf16_bytes // C.BF16_BYTES * C.FP32_BYTES


def frozen_model(spec: RunSpec, role: Role, arch: ModelArch, weights_full: int, n: int) -> RoleModel:
    """A forward-only model (reference, reward): bf16 weights, sharded like the actor's under
    ZeRO-3/FSDP (TRL/OpenRLHF prepare it with the same DeepSpeed stage), whole otherwise
    (TRL's `prepare_deepspeed` runs stage 0/1/2 reference models unsharded). With
    `distribution.offload_reference_params` the reference's shards live on CPU and only the
    units being computed come to the GPU (`gathered`): verl `fsdp_workers.py` forces FSDP
    CPUOffload(offload_params=True) / CPUOffloadPolicy(pin_memory=True) on the reference."""
    sharded = S.SHARDING[spec.distribution.strategy].weights
    on_cpu = role == Role.reference and spec.distribution.offload_reference_params
    if role == Role.reference and amp_fp32_params(spec, spec.finetune):
        weights_full = reference_amp_weight_bytes(weights_full)
    return RoleModel(
        role=role, arch=arch, trainable=False, num_shards=n, num_trainable=0, weights_full=weights_full,
        weights=0 if on_cpu else S.sharded_bytes(weights_full, sharded, n), persistent=_persistent(spec, arch, n),
        gathered=_gathered(spec, arch, sharded),
    )


_ROLE_MODELS = Memo()


def role_models(spec: RunSpec, archs: dict[Role, ModelArch], groups: tuple[Group, ...]) -> dict[Role, RoleModel]:
    """Each model's per-GPU bytes (a new dict each call; the frozen `RoleModel`s are shared
    between calls with the same inputs: the spec sections read here, the archs, the groups)."""
    key = (
        tuple(archs.items()), groups, value_key(spec.hardware.num_nodes), value_key(spec.finetune),
        value_key(spec.precision), value_key(spec.vision.freeze_tower), value_key(spec.distribution),
        value_key(spec.optimizer), value_key(spec.optimizer_implementation), value_key(spec.critic),
    )
    return dict(_ROLE_MODELS.get(key, lambda: _role_models(spec, archs, groups)))


def _role_models(spec: RunSpec, archs: dict[Role, ModelArch], groups: tuple[Group, ...]) -> dict[Role, RoleModel]:
    nodes = spec.hardware.num_nodes
    shards: dict[Role, int] = {}
    for g in groups:
        for r in g.roles:
            shards[r] = shards.get(r, 0) + g.gpus_per_node * nodes
    out: dict[Role, RoleModel] = {}
    actor = archs[Role.actor]
    out[Role.actor] = trainable_model(
        spec, Role.actor, actor, actor_trainable_parameters(spec, actor),
        S.policy_weight_bytes(actor, spec.finetune, spec.precision), shards[Role.actor],
    )
    if Role.reference in shards:
        out[Role.reference] = frozen_model(spec, Role.reference, actor, P.num_parameters(actor) * C.BF16_BYTES, shards[Role.reference])
    if Role.critic in shards:
        critic = archs[Role.critic]
        psi = num_value_model_parameters(critic)
        trained = critic_trainable_parameters(spec, critic)
        out[Role.critic] = trainable_model(spec, Role.critic, critic, trained, psi * C.BF16_BYTES, shards[Role.critic])
    if Role.reward in shards:
        reward = archs[Role.reward]
        out[Role.reward] = frozen_model(spec, Role.reward, reward, num_value_model_parameters(reward) * C.BF16_BYTES, shards[Role.reward])
    return out
