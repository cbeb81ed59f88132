"""Phase-by-phase GPU memory of one GPU of each placement group.

A step goes load → rollout → logprob → critic_train (PPO; one joint train phase when the value
model is wrapped with the policy) → train → optimizer → weight_sync
(TRL `GRPOTrainer._generate_and_score_completions`, ms-swift `rollout_mixin`, verl and OpenRLHF
`fit`). Each phase is the set of components resident at its peak; the terms come from
`oomless.memory` and `planner.roles`, and this module only decides which are resident when
(the rollout phase in `gpu_rollout`, pure terms in `gpu_terms`, component handling in `phase_parts`).

Residency rules (Assumes:):
- Gradients are freed after each optimizer step (HF Trainer `zero_grad(set_to_none=True)`),
  so a model's gradients are resident in its own train and optimizer phases only.
- Between rollouts a colocated vLLM engine keeps its whole budget (sleep level 0) or only its
  CUDA graphs and non-torch memory (levels 1 and 2).
- `rollout.offload_model` moves actor and reference weights to CPU during rollout only;
  `rollout.offload_optimizer` moves the actor's optimizer states out for rollout and weight
  sync (ms-swift `offload_context`). `placement.offload_idle_models` keeps every model on CPU
  except while it computes (ORZ backload/offload, OpenRLHF deepspeed_enable_sleep).
- Forward passes of the experience phase (actor old log-probs, reference, critic values,
  reward) run one after another; the phase peak is the largest of them.
- Caching-allocator slack is charged on activations and temporaries (ACT, TEMP), the
  allocations that churn; parameters and buckets are long-lived blocks of fixed size.
"""

from __future__ import annotations

from ..memory import activations as A
from ..memory import constants as C
from ..memory import load_warmup as LW
from ..memory import logits as L
from ..memory import states as S
from ..memory import vllm as V
from ..memory.components import Category, Component
from ..spec.run import FinetuneMethod, LoraSync, Role, RolloutEngine, RunSpec
from . import vision_terms as VT
from .gpu_terms import (actor_recomputes_logprobs, generate_gathered_bytes, generation_scores_bytes,  # noqa: F401
                        lora_merge_delta_bytes, lora_per_token, sync_gather_bytes)  # re-exported: explain and trace reach them as GP.*
from .gpu_rollout import RolloutTerms
from .memo import Memo, value_key
from .phase_parts import _c, _finish  # explain imports _finish from here
from .roles import Group, RoleModel
from .shape import RunShape

Phase = tuple[str, tuple[Component, ...]]
PREFIX = {Role.actor: "policy", Role.reference: "reference", Role.critic: "critic", Role.reward: "reward"}


_STATES, _TRAINING_WORK, _FORWARD_WORK = Memo(), Memo(), Memo()
"""A GPU's model states, and one micro-batch's training and log-prob work, by what they read:
the fit search's variants of a run mostly change other fields (`planner.memo`)."""

def liger_kernels_in(spec: RunSpec, role: Role | None) -> bool:
    """Whether ``role``'s training forward runs Liger's model kernels: the policy's, when the run
    sets them (TRL's Trainer and verl's actor worker patch the model they train; a value model
    is planned without them)."""
    return spec.liger_kernels and role == Role.actor


class GroupPlanner(RolloutTerms):
    """Builds the phases of one GPU of ``group``."""

    def __init__(self, spec: RunSpec, shape: RunShape, group: Group, models: dict[Role, RoleModel], budget: V.EngineBudget) -> None:
        self.spec, self.shape, self.group, self.budget = spec, shape, group, budget
        self.models = {r: models[r] for r in group.models()}
        self.has_engine = Role.vllm in group.roles
        self._memo: dict[object, tuple[Component, ...]] = {}
        ro = spec.rollout
        self._states_key = (
            value_key(spec.placement.offload_idle_models), value_key(ro.sleep_level),
            value_key(ro.offload_model), value_key(ro.offload_optimizer),
        )
        self._work_key = (
            value_key(shape.lengths), value_key(spec.attention), value_key(spec.vision), value_key(spec.logits),
            value_key(spec.logits_chunk_rows), value_key(spec.transformers_version), value_key(spec.logits_temperature),
        )

    def _once(self, key: object, build) -> list[Component]:
        """``build()`` for this GPU, computed once: a phase-independent part (overheads, the
        engine's blocks, a micro-batch's work) enters several phases of one plan."""
        if key not in self._memo:
            self._memo[key] = tuple(build())
        return list(self._memo[key])

    # --- what is always there ----------------------------------------------------------------

    def overheads(self) -> list[Component]:
        """CUDA context per process on this GPU, NCCL for processes talking to other ranks."""
        return self._once("overheads", self._overheads)

    def _overheads(self) -> list[Component]:
        spec, out = self.spec, []
        if spec.placement.process_per_role:
            procs = [(f"{PREFIX[r]}.", m.num_shards) for r, m in self.models.items()]
        elif self.models:
            procs = [("", max(m.num_shards for m in self.models.values()))]
        else:
            procs = []
        for prefix, shards in procs:
            out.append(_c(f"{prefix}cuda_context", Category.OTHER, C.CUDA_CONTEXT_BYTES))
            if shards > 1:
                out.append(_c(f"{prefix}nccl", Category.OTHER, C.NCCL_COMMUNICATOR_BYTES))
        own_process = not self.models or spec.placement.process_per_role or not spec.rollout.engine_in_trainer_process
        if self.has_engine and own_process:
            out.append(_c("vllm.cuda_context", Category.OTHER, C.CUDA_CONTEXT_BYTES))
        return out

    def states(self, phase: str, active: tuple[Role, ...] = (), grads_of: tuple[Role, ...] = ()) -> list[Component]:
        key = (phase, active, grads_of, tuple(self.models.items()), self._states_key)  # models: read now (explain swaps them)
        return list(_STATES.get(key, lambda: tuple(self._states(phase, active, grads_of))))

    def _states(self, phase: str, active: tuple[Role, ...], grads_of: tuple[Role, ...]) -> list[Component]:
        """Each model's weights, optimizer states, gradients and buffers where they are on the
        GPU in ``phase``. ms-swift's `offload_optimizer` moves the optimizer states (Adam m, v)
        but not the fp32 master weights, and only with a sleeping engine."""
        spec, ro, out = self.spec, self.spec.rollout, []
        rollout_offload = ro.sleep_level > 0
        for role, m in self.models.items():
            idle_offloaded = spec.placement.offload_idle_models and phase != "load" and role not in active
            weights_out = idle_offloaded or (
                phase == "rollout" and rollout_offload and ro.offload_model and role in (Role.actor, Role.reference)
            )
            states_out = idle_offloaded or (
                phase in ("rollout", "weight_sync") and rollout_offload and ro.offload_optimizer and role == Role.actor
            )
            p = PREFIX[role]
            if not weights_out:
                out += [_c(f"{p}.weights", Category.PARAM, m.weights), _c(f"{p}.persistent_params", Category.PARAM, m.persistent)]
            if not m.trainable or idle_offloaded:
                continue
            out.append(_c(f"{p}.master_weights", Category.OPT, m.master))
            if phase == "load" and m.states_at_first_step:
                pass  # created by the first optimizer step (`RoleModel.states_at_first_step`)
            elif not states_out:
                out.append(_c(f"{p}.optimizer_states", Category.OPT, m.optimizer_states))
            if role in grads_of or (m.grads_persistent and phase != "load"):
                out.append(_c(f"{p}.grads", Category.GRAD, m.grads))
            in_backward = role in grads_of and phase.endswith("train")
            if m.bucket_persistent or in_backward:
                out.append(_c("zero.reduce_buckets", Category.GRAD, m.reduce_bucket))
        return out

    def engine_awake(self) -> list[Component]:
        return self._once("engine_awake", self._engine_awake)

    def _engine_awake(self) -> list[Component]:
        if not self.has_engine:
            return []
        b = self.budget
        return [
            _c("vllm.weights", Category.PARAM, b.weight_bytes),
            _c("vllm.kv_cache", Category.OTHER, max(b.kv_cache_bytes, 0)),
            _c("vllm.profile_activations", Category.OTHER, b.activation_bytes),
            _c("vllm.non_torch", Category.OTHER, b.non_torch_bytes),
            _c("vllm.cuda_graphs", Category.OTHER, b.cuda_graph_bytes),
        ]

    def engine_residue(self) -> list[Component]:
        """The engine between rollouts. Awake (level 0) it keeps weights, KV cache, graphs and
        non-torch memory; its profile-run activations are free blocks of the caching
        allocator, which a trainer in the same process reuses. Asleep, graphs and non-torch
        memory stay."""
        return self._once("engine_residue", self._engine_residue)

    def _engine_residue(self) -> list[Component]:
        if not self.has_engine:
            return []
        if self.spec.rollout.sleep_level == 0:
            in_process = bool(self.models) and not self.spec.placement.process_per_role and self.spec.rollout.engine_in_trainer_process
            return [c for c in self.engine_awake() if not (in_process and c.name == "vllm.profile_activations")]
        return [
            _c("vllm.non_torch", Category.OTHER, self.budget.non_torch_bytes),
            _c("vllm.cuda_graphs", Category.OTHER, self.budget.cuda_graph_bytes),
        ]

    def engine_weights_only(self) -> list[Component]:
        if not self.has_engine or self.spec.rollout.sleep_level == 0:
            return self.engine_awake()
        return [_c("vllm.weights", Category.PARAM, self.budget.weight_bytes)] + self.engine_residue()

    # --- phases ----------------------------------------------------------------------------------

    def load(self) -> Phase:
        """After start-up: engine budget reserved, models placed with the optimizer states
        DeepSpeed creates at initialisation (a torch optimizer creates its states at the first
        step: `RoleModel.states_at_first_step`). No activations yet."""
        return "load", _finish(self.overheads() + self.states("load") + self.engine_awake() + self.load_warmup())

    def load_warmup(self) -> list[Component]:
        """What transformers' warm-up block of a QLoRA load (`load_warmup.quantized_load_warmup_bytes`)
        reserves beyond the policy's weights on this GPU: the load peaks at the block. Not with a
        colocated engine, whose start-up allocations reuse the freed block."""
        m = self.models.get(Role.actor)
        if m is None or self.has_engine:
            return []
        block = LW.quantized_load_warmup_bytes(m.arch, self.spec.finetune, self.spec.transformers_version)
        return [_c("model_loading.allocator_warmup", Category.PARAM, max(0, block - m.weights))]

    def forward_roles(self) -> tuple[Role, ...]:
        """Models that run a no-grad forward over the rollout batch on this group: the actor
        when old log-probs are recomputed (`actor_recomputes_logprobs`), then the others."""
        out = [Role.actor] if Role.actor in self.models and actor_recomputes_logprobs(self.spec, self.shape) else []
        out += [r for r in (Role.reference, Role.critic, Role.reward) if r in self.models]
        return tuple(out)

    def forward_work(self, role: Role) -> list[Component]:
        key = (role, self.models[role], value_key(self.shape.logprob_batch), self._work_key)
        return list(_FORWARD_WORK.get(key, lambda: tuple(self._forward_work(role))))

    def _forward_work(self, role: Role) -> list[Component]:
        """A no-grad forward over one log-prob micro-batch (`RunShape.logprob_batch`: padded
        rows, a packed row, or a token budget's part; this GPU's slice under sequence
        parallelism)."""
        m, mb = self.models[role], self.shape.logprob_batch
        arch = m.arch
        comps = [
            _c("zero.gathered_params", Category.PARAM, m.gathered),
            _c("activations", Category.ACT, A.inference_forward_peak_bytes(arch, mb.num_tokens)),
            _c("attention_mask", Category.ACT, A.dense_attention_mask_bytes(self.spec.attention, mb.num_rows, mb.row_len)),
            _c("vision.activations", Category.ACT, VT.inference_bytes(self.spec, self.shape, arch, mb.num_sequences)),
            _c("ulysses.all_to_all", Category.TEMP, A.ulysses_all_to_all_bytes(arch, mb.num_rows, mb.row_len, mb.sequence_parallel_size)),
        ]
        if role in (Role.actor, Role.reference):
            logits = L.logprob_logits_bytes(arch, self.spec.logits, mb.num_rows, mb.logit_rows, self.spec.logits_chunk_rows,
                                            mb.row_len, self.spec.logits_temperature.value)
            comps.append(_c("logits", Category.TEMP, logits))
        return comps

    def logprob(self) -> Phase | None:
        candidates = [
            _finish(self.overheads() + self.states("logprob", active=(r,)) + self.engine_residue() + self.forward_work(r)
                    + self.kept_scores())
            for r in self.forward_roles()
        ]
        if not candidates:
            return None
        return "logprob", max(candidates, key=lambda comps: sum(c.num_bytes for c in comps))

    def training_work(self, role: Role) -> list[Component]:
        """Forward + backward of one micro-batch (`RunShape.train_batch`): saved activations +
        the larger of the logits peak at the loss (actor only) and the backward transient of one
        recomputed layer (with Ulysses' all-to-all buffers), and (actor) the vocabulary-sized
        weight gradient waiting to be accumulated into ``.grad``."""
        spec = self.spec
        key = (role, self.models[role], value_key(self.shape.train_batch), self._work_key,
               value_key(spec.gradient_checkpointing), value_key(spec.finetune), value_key(spec.liger_kernels))
        return self._once(("training_work", role), lambda: _TRAINING_WORK.get(key, lambda: tuple(self._training_work(role))))

    def _training_work(self, role: Role) -> list[Component]:
        spec, shape, m, mb = self.spec, self.shape, self.models[role], self.shape.train_batch
        gc, attn, arch = spec.gradient_checkpointing, spec.attention, m.arch
        rows, row_len, sp, liger = mb.num_rows, mb.row_len, mb.sequence_parallel_size, liger_kernels_in(spec, role)
        lora = lora_per_token(spec, arch) if role == Role.actor or (role == Role.critic and spec.critic.lora) else 0
        comps = [
            _c("zero.gathered_params", Category.PARAM, m.gathered),
            _c("activations", Category.ACT, A.training_saved_activation_bytes(arch, attn, gc, rows, row_len, lora, sp, liger)),
            _c("vision.activations", Category.ACT, VT.training_bytes(spec, shape, arch, mb.num_sequences) if role == Role.actor else 0),
        ]
        transient = A.backward_transient_bytes(arch, attn, gc, rows, row_len, lora, sp, liger)
        transient += A.ulysses_all_to_all_bytes(arch, rows, row_len, sp)
        logits = 0
        if role == Role.actor:
            frozen_head = spec.finetune.method != FinetuneMethod.full
            logits = L.training_logits_bytes(
                arch, spec.logits, rows, mb.logit_rows, spec.logits_chunk_rows, row_len, frozen_head=frozen_head,
                temperature=spec.logits_temperature.value,
            )
            saved = sum(c.num_bytes for c in comps if c.category == Category.ACT)
            extra = L.accumulating_gradient_bytes(arch, frozen_head, saved, logits, transient)
            comps.append(_c("policy.accumulating.grads", Category.GRAD, extra))
        if logits >= transient:
            comps.append(_c("logits", Category.TEMP, logits))
        else:
            comps.append(_c("backward_recompute", Category.TEMP, transient))
        return comps

    def train(self, role: Role) -> Phase:
        name = "train" if role == Role.actor else "critic_train"
        comps = self.overheads() + self.states(name, active=(role,), grads_of=(role,)) + self.engine_residue()
        return name, _finish(comps + self.training_work(role) + self.kept_scores())

    def joint_train(self) -> Phase:
        """Policy and value model trained by one backward (`critic.wrapped_with_actor`): TRL's
        PolicyAndValueWrapper runs the value model, then the policy, in one forward, and
        `accelerator.backward(pg_loss + vf_coef * vf_loss)` goes through the policy first, while
        the value model's saved activations are still held; both models' gradients come to exist.
        Source: trl v0.17.0 trainer/ppo_trainer.py (`PolicyAndValueWrapper.forward`, `train`:
        `output, vpred_temp = forward(model, ...)`, `loss = pg_loss + args.vf_coef * vf_loss`)."""
        roles = (Role.actor, Role.critic)
        held = sum(c.num_bytes for c in self.training_work(Role.critic) if c.category == Category.ACT)
        comps = self.overheads() + self.states("train", active=roles, grads_of=roles) + self.engine_residue()
        return "train", _finish(comps + self.training_work(Role.actor) + [_c("critic.activations", Category.ACT, held)]
                                + self.kept_scores())

    def trains_jointly(self) -> bool:
        return self.spec.critic.wrapped_with_actor and Role.critic in self.models and Role.actor in self.models

    def optimizer_roles(self) -> list[tuple[Role, ...]]:
        """Models stepped together: the policy and a value model wrapped with it share one
        optimizer (TRL PPOTrainer builds it over PolicyAndValueWrapper), else one at a time."""
        trainable = tuple(r for r, m in self.models.items() if m.trainable)
        if self.trains_jointly():
            return [trainable]
        return [(r,) for r in trainable]

    def optimizer(self) -> Phase | None:
        candidates = []
        for roles in self.optimizer_roles():
            comps = self.overheads() + self.states("optimizer", active=roles, grads_of=roles) + self.engine_residue()
            comps.append(_c("optimizer.fp32_grads", Category.GRAD, sum(self.models[r].fp32_grads for r in roles)))
            # one group when the roles share an optimizer: foreach steps them together
            comps.append(_c("optimizer.step_temporaries", Category.TEMP, sum(self.models[r].step_temporaries for r in roles)))
            candidates.append(_finish(comps + self.kept_scores()))
        if not candidates:
            return None
        return "optimizer", max(candidates, key=lambda comps: sum(c.num_bytes for c in comps))

    def weight_sync(self) -> Phase | None:
        """Actor weights pushed into the engine. The engine's weights are awake (sleep levels
        1/2 wake "weights" first); under ZeRO-3/FSDP the actor gathers one parameter at a time
        for full fine-tuning and the whole model for LoRA (the adapter merge needs every base
        weight), then merges adapters module by module. A vLLM-only GPU receives the
        broadcast through an NCCL communicator when the engine is a separate server (TRL
        vllm-serve, OpenRLHF); an engine inside a trainer process (ms-swift 3.x) loads the
        weights in-process. Source: TRL `_move_model_to_vllm`, ms-swift
        `move_model_batches`, OpenRLHF `broadcast_to_vllm`."""
        spec = self.spec
        if spec.rollout.engine == RolloutEngine.hf or not (Role.actor in self.models or self.has_engine):
            return None
        comps = self.overheads() + self.states("weight_sync", active=(Role.actor,)) + self.engine_weights_only()
        if Role.actor in self.models:
            m = self.models[Role.actor]
            lora = spec.finetune.method != FinetuneMethod.full
            if S.SHARDING[spec.distribution.strategy].weights:
                comps.append(_c("sync.gathered_params", Category.PARAM, sync_gather_bytes(spec, m)))
            if lora and spec.rollout.lora_sync == LoraSync.merge:  # verl sends its adapters unmerged
                comps.append(_c("sync.lora_merge_delta", Category.TEMP, lora_merge_delta_bytes(m.arch)))
        elif not spec.rollout.engine_in_trainer_process:
            comps.append(_c("nccl", Category.OTHER, C.NCCL_COMMUNICATOR_BYTES))
        return "weight_sync", _finish(comps)

    def phases(self) -> list[Phase]:
        out: list[Phase | None] = [self.load()]
        if self.has_engine or Role.actor in self.models:
            out.append(self.rollout())
        out.append(self.logprob())
        if self.trains_jointly():
            out.append(self.joint_train())
        else:
            if Role.critic in self.models:
                out.append(self.train(Role.critic))
            if Role.actor in self.models:
                out.append(self.train(Role.actor))
        out += [self.optimizer(), self.weight_sync()]
        return [p for p in out if p is not None]

    def engine_start_resident_bytes(self) -> int:
        """GPU bytes in use when a colocated engine checks free memory at start-up.

        Assumes the order of ms-swift and TRL: the engine is built in the trainer's __init__,
        after the weights are on the GPU — whole models under DDP/ZeRO-1/2 (ms-swift's
        `get_default_device_map` puts them on `cuda:<local_rank>`; TRL's Trainer moves a
        DDP model there), shards under ZeRO-3/FSDP (zero.Init) — and before
        deepspeed.initialize creates optimizer states. With `rollout.engine_starts_first`
        (ORZ, OpenRLHF) only the processes already running are there.
        """
        overheads = self.overheads()
        if self.spec.rollout.engine_starts_first:
            own = [c for c in overheads if c.name.startswith("vllm.") or not self.spec.placement.process_per_role]
            return sum(c.num_bytes for c in own)
        return sum(c.num_bytes for c in overheads) + sum(m.weights + m.persistent for m in self.models.values())
