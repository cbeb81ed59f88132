"""The run spec: what the user wants to run, as a validated, frozen pydantic model.

A spec is read from YAML (`oomless.spec.load`). Every field has a description (shown by
`oomless schema` and in the JSON schema) and a stated default. Field names follow the house
style: counts are ``num_*``, sizes ``*_bytes``/``*_gib``, parallel sizes ``*_size``.
Cross-field rules that need the model architecture (e.g. TP dividing the KV heads) are
checked in `oomless.spec.load`, where the architecture is known.
"""

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from .base import INT64, Frozen as _Frozen
from .lengths import Lengths
from .rollout import Ray, Rollout
from .sections import ExtraModel, Placement, RewardModel, Schedule, Vision
from .train_section import TrainSection

from .enums import (
    Algorithm,
    AttentionImpl,
    FinetuneMethod,
    LogitsMode,
    LoraSync,
    Optimizer,
    OptimizerImplementation,
    Precision,
    Role,
    RolloutEngine,
    Strategy,
    TemperatureScaling,
)

MAX_GPU_CAPACITY_GIB = 4096.0
"""Largest usable GPU capacity a spec may give (4 TiB; the largest GPUs hold 192-288 GB)."""
MAX_HOST_RAM_GIB = float(2**20)
"""Largest host RAM per node a spec may give (1 PiB; the largest single servers hold tens of TiB)."""

__all__ = [
    "Algorithm", "AttentionImpl", "FinetuneMethod", "LogitsMode", "LoraSync", "Optimizer", "OptimizerImplementation",
    "TemperatureScaling",
    "Precision", "Role", "RolloutEngine", "Strategy",
]


class Hardware(_Frozen):
    gpu: str | None = Field(
        None, description="GPU type from the catalog (`oomless gpus`), e.g. A100-80GB, RTX-3090."
    )
    gpu_capacity_gib: Annotated[float, Field(gt=0, le=MAX_GPU_CAPACITY_GIB)] | None = Field(
        None,
        description="Usable capacity per GPU as torch reports it (GiB). Overrides the catalog; "
        "required when `gpu` is not given.",
    )
    gpus_per_node: Annotated[int, Field(ge=1, le=1024), INT64] = Field(
        8, description="GPUs per node, training and rollout GPUs together. Default 8."
    )
    num_nodes: Annotated[int, Field(ge=1, le=2**20), INT64] = Field(1, description="Number of nodes. Default 1.")
    host_ram_gib: Annotated[float, Field(gt=0, le=MAX_HOST_RAM_GIB)] | None = Field(
        None, description="Host RAM per node (GiB). Without it host RAM is reported, not judged."
    )

    @model_validator(mode="after")
    def _needs_capacity(self) -> "Hardware":
        if self.gpu is None and self.gpu_capacity_gib is None:
            raise ValueError("give `gpu` (a catalog name) or `gpu_capacity_gib`")
        return self


class Finetune(_Frozen):
    method: FinetuneMethod = Field(FinetuneMethod.full, description="full | lora | qlora (4-bit NF4 base). Default full.")
    lora_rank: Annotated[int, Field(ge=1), INT64] = Field(8, description="LoRA rank r. Default 8.")
    lora_alpha: Annotated[float, Field(gt=0)] = Field(32, description="LoRA alpha (no memory effect). Default 32.")
    lora_dropout: Annotated[float, Field(ge=0, lt=1)] = Field(
        0.0, description="LoRA dropout; > 0 saves a mask per adapted input. Default 0 (PEFT; ms-swift uses 0.05)."
    )
    lora_targets: list[str] | Literal["all-linear"] = Field(
        "all-linear",
        description="Linear modules carrying adapters: `all-linear` or names such as "
        "[q_proj, v_proj]. Default all-linear.",
    )
    double_quant: bool = Field(
        True,
        description="qlora: bitsandbytes double quantisation of the NF4 constants (4.127 bits per weight; without it "
        "4.5). Default true (ms-swift `bnb_4bit_use_double_quant`, OpenRLHF); TRL's `use_bnb_nested_quant` defaults to false.",
    )
    adapter_dtype: Literal["fp32", "bf16"] | None = Field(
        None,
        description="dtype the trainer holds the adapters in under plain DDP with mixed precision (no separate "
        "master copy; gradients and AdamW states alike): fp32 (PEFT's default) or bf16 (TRL casts QLoRA adapters). "
        "Default: bf16 for qlora, fp32 for lora.",
    )


class Distribution(_Frozen):
    strategy: Strategy = Field(Strategy.zero3, description="ddp | zero1 | zero2 | zero3 | fsdp. Default zero3.")
    offload_params: bool = Field(False, description="ZeRO-3/FSDP parameter offload to CPU during training. Default false.")
    offload_optimizer: bool = Field(False, description="Optimizer states (and fp32 master) on CPU (ZeRO-Offload). Default false.")
    reduce_bucket_size: Annotated[Annotated[int, Field(ge=0)] | Literal["auto"], INT64] = Field(
        500_000_000,
        description="DeepSpeed reduce_bucket_size in elements, or `auto` (HF: hidden²). Default 5e8 (DeepSpeed).",
    )
    overlap_comm: bool = Field(True, description="DeepSpeed overlap_comm (ZeRO-1/2: two reduce buffers). Default true.")
    stage3_prefetch_bucket_size: Annotated[Annotated[int, Field(ge=0)] | Literal["auto"], INT64] = Field(
        50_000_000, description="ZeRO-3 prefetch bucket in elements, or `auto` (HF: 0.9·hidden²). Default 5e7 (DeepSpeed)."
    )
    stage3_max_live_parameters: Annotated[int, Field(ge=0), INT64] = Field(
        1_000_000_000, description="ZeRO-3 cap on gathered parameters in elements. Default 1e9."
    )
    rank0_init: bool = Field(
        False,
        description="Only local rank 0 loads the checkpoint into host RAM, the others build on the meta "
        "device (verl/EasyR1 FSDP `enable_rank0_init`). Default false.",
    )
    sub_group_size: Annotated[int, Field(ge=1), INT64] = Field(
        1_000_000_000, description="ZeRO-3 optimizer-step tile in elements (fp32 grads exist per tile). Default 1e9."
    )
    stage3_param_persistence_threshold: Annotated[Annotated[int, Field(ge=0)] | Literal["auto"], INT64] = Field(
        100_000,
        description="ZeRO-3: tensors up to this many elements stay unpartitioned, or `auto` (HF: 10·hidden). Default 1e5.",
    )
    offload_reference_params: bool = Field(
        False,
        description="The reference model's parameters live in pinned CPU memory and stream to the GPU unit by "
        "unit in its forward (verl: FSDP CPUOffload is forced on the reference, `fsdp_workers.py` \"We force "
        "reference policy to use CPUOffload\"; `ref.fsdp_config.param_offload`). Needs zero3 or fsdp. Default false.",
    )
    sequence_parallel_size: Annotated[int, Field(ge=1, le=1024), INT64] = Field(
        1,
        description="Ulysses/ring sequence-parallel degree: each sequence's tokens are split over this many "
        "training GPUs (verl `ulysses_sequence_parallel_size`, EasyR1 `ulysses_size` with padding_free, ms-swift "
        "`--sequence_parallel_size`, OpenRLHF `--ring_attn_size`). Must divide the training GPUs and the attention heads. Default 1 (none).",
    )

    @model_validator(mode="after")
    def _param_offload_needs_sharding(self) -> "Distribution":
        if self.offload_params and self.strategy not in (Strategy.zero3, Strategy.fsdp):
            raise ValueError(
                f"offload_params needs strategy zero3 or fsdp, not {self.strategy.value}"
            )
        if self.offload_reference_params and self.strategy not in (Strategy.zero3, Strategy.fsdp):
            raise ValueError(f"offload_reference_params needs strategy zero3 or fsdp, not {self.strategy.value}")
        if self.offload_optimizer and self.strategy == Strategy.ddp:
            raise ValueError("offload_optimizer needs a ZeRO stage or fsdp, not ddp")
        return self


class Batch(_Frozen):
    micro_batch_size: Annotated[int, Field(ge=1, le=2**20), INT64] = Field(
        1, description="Completions per GPU per forward/backward (per_device_train_batch_size). Default 1."
    )
    gradient_accumulation_steps: Annotated[int, Field(ge=1, le=2**20), INT64] = Field(1, description="Default 1.")
    num_generations: Annotated[int, Field(ge=1, le=2**16), INT64] = Field(8, description="Completions per prompt (group size). Default 8 (TRL).")
    steps_per_generation: Annotated[int, Field(ge=1), INT64] | None = Field(
        None, description="Optimizer micro-steps per rollout batch. Default: gradient_accumulation_steps (TRL)."
    )
    logprob_micro_batch_size: Annotated[int, Field(ge=1), INT64] | None = Field(
        None, description="Sequences per no-grad log-prob forward. Default: micro_batch_size (TRL)."
    )
    oversample_factor: Annotated[float, Field(ge=1, le=1000)] = Field(
        1.0,
        description="Rollouts generated per kept rollout: DAPO's dynamic sampling over-generates and drops "
        "groups with equal rewards (e.g. 3). Default 1.",
    )
    padding_free: bool = Field(
        False,
        description="Sequences are packed without padding, so a micro-batch costs its real tokens (ms-swift "
        "`--padding_free`, TRL `padding_free`, OpenRLHF `--packing_samples`, verl `use_remove_padding`). "
        "Default false: every member is padded to the longest one.",
    )
    length_sorted_micro_batches: bool = Field(
        False,
        description="A GPU's share of a rollout is sorted by length before it is cut into micro-batches, so one "
        "micro-batch can hold its longest sequences together (verl >= 0.6.1 `trainer.balance_batch`, its default: "
        "ray_trainer.py `_balance_batch` puts the longest in the middle). Matters only for the chance of a packed "
        "batch over the typical one. Default false: micro-batches take rows in the data's order.",
    )
    max_tokens_per_gpu: Annotated[int, Field(ge=1, le=2**31), INT64] | None = Field(
        None,
        description="Token budget of one training micro-batch per GPU: the sequences of a step are split into "
        "ceil(tokens / budget) balanced micro-batches (verl `use_dynamic_bsz` + `ppo_max_token_len_per_gpu`, EasyR1 "
        "`dynamic_batching`, OpenRLHF `--max_tokens_per_gpu`); one can exceed the budget by less than one sequence. "
        "With a budget, micro_batch_size × gradient_accumulation_steps is read as the sequences per GPU per "
        "optimizer step. Default none: micro-batches are counted in sequences.",
    )
    logprob_max_tokens_per_gpu: Annotated[int, Field(ge=1, le=2**31), INT64] | None = Field(
        None,
        description="Token budget of one no-grad log-prob micro-batch per GPU (verl "
        "`log_prob_max_token_len_per_gpu`, `ref.log_prob_max_token_len_per_gpu`). Default: max_tokens_per_gpu.",
    )
    token_budget_balance: Literal["tokens", "workload"] = Field(
        "tokens",
        description="What a token budget's micro-batches are balanced on: `tokens` (Karmarkar-Karp on token counts: "
        "EasyR1, OpenRLHF, verl before PR #3605) or `workload` (24576·s + s² per sequence: verl >= 0.6, "
        "`calculate_workload`), which lets a micro-batch of short sequences hold more tokens. Default tokens.",
    )

    @property
    def logprob_token_budget(self) -> int | None:
        return self.logprob_max_tokens_per_gpu or self.max_tokens_per_gpu


class RunSpec(_Frozen):
    """One RL fine-tuning run: model, hardware and every memory-relevant knob."""

    model: str = Field(description="Hugging Face id (local cache, then the Hub, then the shipped catalog: `oomless "
                       "models`), a checkpoint or PEFT adapter folder, or a config.json path.")
    model_revision: Annotated[str, Field(min_length=1, max_length=200)] | None = Field(
        None, description="Hub revision (branch, tag or commit) of `model` (TRL/ms-swift `model_revision`). Default main."
    )
    hardware: Hardware
    algorithm: Algorithm = Field(Algorithm.grpo, description="grpo | ppo | dapo | rloo. Default grpo.")
    finetune: Finetune = Finetune()
    precision: Precision = Field(Precision.bf16_mixed, description="bf16_mixed | bf16 | fp16_mixed. Default bf16_mixed.")
    optimizer: Optimizer = Field(Optimizer.adamw, description="adamw | adamw_8bit | adafactor | sgd. Default adamw.")
    optimizer_implementation: OptimizerImplementation | None = Field(
        None,
        description="How torch's AdamW steps: foreach (torch's choice on CUDA when no flag is given; HF optim adamw_torch; "
        "verl) holds one temporary the size of the parameters it steps (sqrt of v); fused (HF adamw_torch_fused, the "
        "Trainer's default from transformers 4.54 with torch 2.8; EasyR1) none; for_loop twice the largest parameter. "
        "Default: foreach under ddp/fsdp, DeepSpeed's own optimizer (none) under ZeRO.",
    )
    distribution: Distribution = Distribution()
    gradient_checkpointing: bool = Field(True, description="Recompute each decoder layer in backward. Default true (TRL).")
    transformers_version: Annotated[str, Field(pattern=r"^\d+(\.\d+){0,3}([a-z0-9.+-]*)$", max_length=40)] | None = Field(
        None,
        description="transformers release the trainer runs (e.g. 4.49, 5.2): from 5.0 gradient checkpointing makes a frozen "
        "vision tower's patch embedding require grad, so the tower keeps activations for backward. Default unknown: "
        "planned as before 5.0, with a warning where it matters.",
    )
    attention: AttentionImpl = Field(AttentionImpl.sdpa, description="sdpa | flash_attention_2 | eager. Default sdpa (transformers).")
    batch: Batch = Batch()
    lengths: Lengths = Lengths()
    logits: LogitsMode = Field(
        LogitsMode.full_bf16, description="full_bf16 | full_fp32 | chunked | fused. Default full_bf16 (TRL, ms-swift)."
    )
    logits_temperature: TemperatureScaling = Field(
        TemperatureScaling.in_place,
        description="in_place | copy | none: how the sampling temperature reaches the logits of the bf16_flash_ce modes "
        "(verl <= 0.8 and EasyR1 divide in place; verl 0.9.0 makes a scaled copy, 0.9.1 too except at temperature 1: none). "
        "Default in_place.",
    )
    logits_chunk_rows: Annotated[int, Field(ge=1), INT64] = Field(
        2048, description="Rows per chunk for `chunked`. Default 2048."
    )
    liger_kernels: bool = Field(
        False,
        description="Liger's RMSNorm, SwiGLU and RoPE kernels replace the model's own in training (TRL/ms-swift "
        "`use_liger_kernel`, verl `actor_rollout_ref.model.use_liger`): they keep less for backward. Applied to "
        "Llama, Mistral, Qwen2/2.5 and Qwen3 layers; other families are planned unchanged. Default false.",
    )
    kl_beta: Annotated[float, Field(ge=0)] = Field(
        0.04, description="KL coefficient; > 0 needs reference log-probs. Default 0.04 (ms-swift, TRL <= 0.18)."
    )
    rollout: Rollout = Rollout()
    ray: Ray = Ray()
    vision: Vision = Vision()
    critic: ExtraModel = Field(ExtraModel(), description="PPO's value model (a causal LM with a value head).")
    reward_model: RewardModel = RewardModel()
    placement: Placement = Placement()
    schedule: Schedule = Schedule()
    train: TrainSection | None = Field(None, description="Data, rewards and optimiser of `oomless train` (ignored by `plan`).")

    @property
    def tower_trains(self) -> bool:
        """The vision tower trains: full fine-tuning without `vision.freeze_tower` (LoRA adapters
        sit on the language model only)."""
        return self.finetune.method == FinetuneMethod.full and not self.vision.freeze_tower

    @field_validator("transformers_version")
    @classmethod
    def _pep440(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from packaging.version import InvalidVersion, Version  # imported here: few specs name a release

        try:
            Version(value)
        except InvalidVersion:
            raise ValueError(f"{value!r} is not a release number; allowed: e.g. 4.49, 5.2.0") from None
        return value

    @model_validator(mode="after")
    def _cross_checks(self) -> "RunSpec":
        hw, ro = self.hardware, self.rollout
        if ro.engine == RolloutEngine.vllm_separate and ro.num_gpus >= hw.gpus_per_node:
            raise ValueError(
                f"rollout.num_gpus={ro.num_gpus} leaves no training GPU on a "
                f"{hw.gpus_per_node}-GPU node; allowed 1..{hw.gpus_per_node - 1}"
            )
        world = hw.gpus_per_node * hw.num_nodes
        tp = ro.tensor_parallel_size
        # A colocated engine may span whole nodes (verl's examples/tuning/70b: TP 16 over 2 of 4
        # 8-GPU nodes); each GPU still holds 1/TP of the weights, and max(1, KV heads / TP) heads.
        if ro.engine == RolloutEngine.vllm_colocate and tp > hw.gpus_per_node and (tp % hw.gpus_per_node or world % tp):
            raise ValueError(
                f"rollout.tensor_parallel_size={tp} exceeds gpus_per_node={hw.gpus_per_node}; allowed: at most "
                f"{hw.gpus_per_node}, or whole nodes that divide the {world} GPUs"
            )
        if ro.engine == RolloutEngine.vllm_separate and ro.tensor_parallel_size > ro.num_gpus:
            raise ValueError(
                f"rollout.tensor_parallel_size={ro.tensor_parallel_size} exceeds rollout.num_gpus={ro.num_gpus}"
            )
        if ro.keeps_generation_scores and ro.engine != RolloutEngine.hf:
            raise ValueError("rollout.keeps_generation_scores needs rollout.engine hf (transformers generate's scores)")
        if ro.engine == RolloutEngine.hf and (ro.sleep_level or ro.offload_model or ro.offload_optimizer):
            raise ValueError("rollout.sleep_level/offload_* apply to vllm_colocate, not engine hf")
        if self.critic.wrapped_with_actor and self.algorithm != Algorithm.ppo:
            raise ValueError("critic.wrapped_with_actor needs algorithm ppo (a value model)")
        if self.critic.lora and (self.algorithm != Algorithm.ppo or self.finetune.method == FinetuneMethod.full):
            raise ValueError("critic.lora needs algorithm ppo and finetune.method lora or qlora")
        if self.placement.groups is not None:
            self._check_groups()
        sp = self.distribution.sequence_parallel_size
        if sp > hw.gpus_per_node * hw.num_nodes:
            raise ValueError(
                f"distribution.sequence_parallel_size={sp} exceeds the {hw.gpus_per_node * hw.num_nodes} GPUs"
            )
        return self

    def _check_groups(self) -> "None":
        groups, engine = self.placement.groups or [], self.rollout.engine
        total = sum(g.gpus_per_node for g in groups)
        if total > self.hardware.gpus_per_node:
            raise ValueError(f"placement.groups use {total} GPUs per node; hardware.gpus_per_node is {self.hardware.gpus_per_node}")
        vllm = [g for g in groups if Role.vllm in g.roles]
        if engine == RolloutEngine.hf and vllm:
            raise ValueError("placement.groups place vllm but rollout.engine is hf")
        if engine != RolloutEngine.hf and not vllm:
            raise ValueError(f"rollout.engine is {engine.value} but no placement group holds vllm")
        if vllm and (len(vllm[0].roles) == 1) != (engine == RolloutEngine.vllm_separate):
            raise ValueError("vllm alone in its group means rollout.engine vllm_separate; sharing a group means vllm_colocate")
        if Role.critic in [r for g in groups for r in g.roles] and self.algorithm != Algorithm.ppo:
            raise ValueError("a critic is placed but algorithm is not ppo")
        if Role.reward in [r for g in groups for r in g.roles] and self.reward_model.model is None:
            raise ValueError("a reward role is placed but reward_model.model is not set")

    @property
    def steps_per_generation(self) -> int:
        return self.batch.steps_per_generation or self.batch.gradient_accumulation_steps

    @property
    def logprob_micro_batch_size(self) -> int:
        return self.batch.logprob_micro_batch_size or self.batch.micro_batch_size

    @property
    def max_sequence_tokens(self) -> int:
        return self.lengths.max_prompt_tokens + self.lengths.max_completion_tokens
