"""The rollout phase of a GPU and what transformers generate holds in it (a mixin of
`gpu_phases.GroupPlanner`: it uses the planner's states, overheads, engine and training work)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..memory import activations as A
from ..memory import constants as C
from ..memory import vllm as V
from ..memory.components import Category, Component
from ..spec.run import Role, RolloutEngine
from . import vision_terms as VT
from .gpu_terms import generate_gathered_bytes, generation_scores_bytes
from .phase_parts import _c, _finish

if TYPE_CHECKING:
    from .gpu_phases import Phase


class RolloutTerms:
    """`GroupPlanner`'s rollout: the engine awake or transformers generate in the trainer."""

    def rollout(self) -> Phase:
        hf = self.spec.rollout.engine == RolloutEngine.hf and Role.actor in self.models
        comps = self.overheads() + self.states("rollout", active=(Role.actor,) if hf else ()) + self.engine_awake()
        if hf:
            comps += self.hf_generate() + self.kept_scores()
            comps.append(_c("generate.scores_padded_copy", Category.TEMP, self.kept_scores_bytes()))
            # the last rollout's scores are only released when `logitss` is reassigned, after
            # batch_generation returns (trl v0.17.0 ppo_trainer.py: `del (...)` does not list it)
            comps.append(_c("generate.previous_scores", Category.ACT, self.kept_scores_bytes()))
        comps.append(_c("trainer_cached_blocks", Category.OTHER, self.cached_blocks_at_wake_up()))
        return "rollout", _finish(comps)

    def kept_scores_bytes(self) -> int:
        spec = self.spec
        if not spec.rollout.keeps_generation_scores or Role.actor not in self.models:
            return 0
        return generation_scores_bytes(self.shape.generation_sequences_per_gpu, self.shape.completion_len,
                                       self.models[Role.actor].arch.vocab_size)

    def kept_scores(self) -> list[Component]:
        """generate's scores kept from the rollout to the next one (`rollout.keeps_generation_scores`:
        TRL PPOTrainer's `logitss`); at the rollout's end `batch_generation` holds them twice (the
        chunks and their padded copy: `generate.scores_padded_copy`)."""
        return [_c("generate.scores", Category.ACT, self.kept_scores_bytes())]

    def cached_blocks_at_wake_up(self) -> int:
        """Blocks the trainer freed after its last step but PyTorch still caches. A sleeping
        engine wakes through cuMem, which cannot use them: the documented wake-up OOM (verl
        #302, ms-swift #5099). Zero when the framework empties the cache first."""
        ro = self.spec.rollout
        if ro.empty_cache_before_rollout or ro.sleep_level == 0 or not self.has_engine or Role.actor not in self.models:
            return 0
        work = self.training_work(Role.actor)
        return sum(c.num_bytes for c in work if c.category in (Category.ACT, Category.TEMP))

    def hf_generate(self) -> list[Component]:
        """transformers `generate` in the training process for the whole local rollout batch.

        ZeRO-3 gathers the full actor for generation (TRL/VLM-R1 `unwrap_model_for_generation`,
        ds3_gather_for_generation=True), and the value model with it when the two are one module
        (`critic.wrapped_with_actor`: TRL PPOTrainer unwraps `PolicyAndValueWrapper`, trl
        v0.14.0 trainer/ppo_trainer.py, v1.12.0 experimental/ppo/ppo_trainer.py `train`).
        The KV cache holds every sequence at full length
        (DynamicCache, bf16, no TP); prefill runs all prompts at once (vision tower included);
        each decode step makes fp32 next-token logits. Source: transformers
        generation/utils.py (`_sample`).
        """
        shape, arch = self.shape, self.models[Role.actor].arch
        seqs = shape.generation_sequences_per_gpu
        gathered = generate_gathered_bytes(self.spec, self.models)
        kv = seqs * shape.seq_len * V.kv_bytes_per_token(arch, 1)
        prefill = A.inference_forward_peak_bytes(arch, seqs * shape.prompt_len) + VT.inference_bytes(self.spec, shape, arch, seqs)
        step_logits = seqs * arch.vocab_size * C.FP32_BYTES
        return [
            _c("generate.gathered_weights", Category.PARAM, gathered),
            # torch AMP: each forward of generate runs in the Trainer's autocast (`roles.amp_fp32_params`)
            _c("generate.autocast_weight_cache", Category.TEMP, self.models[Role.actor].autocast_cache),
            _c("generate.kv_cache", Category.ACT, kv),
            _c("generate.activations", Category.TEMP, max(prefill, step_logits)),
        ]
