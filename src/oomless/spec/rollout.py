"""The `rollout:` and `ray:` sections of a run spec: the generation engine (vLLM or HF) and its
memory knobs, and Ray's memory monitor. Kept apart from `run.py` so each file reads in one
sitting; `RunSpec` composes them."""

from typing import Annotated, Literal

from pydantic import Field

from .base import INT64, Frozen
from .enums import LoraSync, RolloutEngine


class Rollout(Frozen):
    engine: RolloutEngine = Field(RolloutEngine.vllm_colocate, description="hf | vllm_colocate | vllm_separate. Default vllm_colocate.")
    num_gpus: Annotated[int, Field(ge=1), INT64] = Field(
        1, description="vllm_separate only: GPUs per node given to vLLM (the rest train). Default 1."
    )
    gpu_memory_utilization: Annotated[float, Field(gt=0, le=1)] = Field(
        0.9,
        description="vLLM's per-instance fraction of total GPU memory, in (0, 1]. Default: with vllm_colocate, the "
        "largest (up to vLLM's 0.9) with which the run fits beside the trainer with a 5 % margin, which the plan "
        "names (`oomless.planner.defaults`); otherwise 0.9 (vLLM). Framework configs read with --from always "
        "carry their framework's own default.",
    )
    tensor_parallel_size: Annotated[int, Field(ge=1), INT64] = Field(
        1, description="vLLM tensor parallel size: at most gpus_per_node, or for a colocated engine whole nodes "
        "(a multiple of gpus_per_node dividing every GPU). Default 1.")
    max_num_seqs: Annotated[int, Field(ge=1), INT64] | None = Field(
        None, description="vLLM max_num_seqs. Default: vLLM's (256, or 1024 on >=70 GiB non-A100 GPUs)."
    )
    max_num_batched_tokens: Annotated[int, Field(ge=1), INT64] | None = Field(
        None, description="vLLM max_num_batched_tokens. Default: vLLM LLM-class (8192, or 16384 on >=70 GiB non-A100)."
    )
    max_model_len: Annotated[int, Field(ge=1), INT64] | None = Field(
        None, description="vLLM max_model_len. Default: max_prompt_tokens + max_completion_tokens."
    )
    enforce_eager: bool = Field(False, description="No CUDA graphs. Default false.")
    vllm_version: Annotated[str, Field(pattern=r"^\d+(\.\d+){0,3}([a-z0-9.+-]*)$", max_length=40)] | None = Field(
        None,
        description="vLLM version the framework runs (e.g. 0.7.3): selects version-dependent behaviour, such as the "
        "V0 engine of 0.7.x keeping every finished n > 1 request (vllm#14353) and the start-up profile's sampler. "
        "Default unknown: the newest release's behaviour (no leak).",
    )
    samples_per_request: Annotated[int, Field(ge=1), INT64] | None = Field(
        None,
        description="SamplingParams n of one prompt's request to vLLM: EasyR1/verl `rollout.n`, TRL server mode "
        "num_generations; 1 where prompts are repeated instead (TRL colocate, ms-swift without TP). "
        "Default: num_generations.",
    )
    cuda_graphs_in_budget: bool = Field(
        True,
        description="CUDA graphs are profiled inside gpu_memory_utilization (vLLM >= 0.21); false for older "
        "vLLM, which captures them on top of the budget. Default true.",
    )
    empty_cache_before_rollout: bool = Field(
        True,
        description="The trainer returns its cached blocks (torch.cuda.empty_cache) before the engine wakes "
        "(TRL, verl); false keeps them reserved through rollout (ms-swift 3.x without gc_collect_after_offload). "
        "Default true.",
    )
    limit_images_per_prompt: Annotated[int, Field(ge=0), INT64] | None = Field(
        None,
        description="vLLM `limit_mm_per_prompt` image count: images per prompt vLLM profiles and accepts. "
        "Default: vision.images_per_prompt.",
    )
    sleep_level: Literal[0, 1, 2] = Field(
        0, description="vLLM sleep after rollout: 0 none, 1 weights to pinned host RAM + KV freed, 2 both freed. Default 0."
    )
    engine_in_trainer_process: bool = Field(
        True,
        description="vllm_colocate: the engine runs inside the training process and shares its CUDA "
        "context (TRL, ms-swift, verl); false for separate worker processes (OpenRLHF, ORZ). Default true.",
    )
    weight_sync_batches: Annotated[int, Field(ge=1), INT64] | None = Field(
        None,
        description="Under ZeRO-3/FSDP the weights are gathered for the sync in this many batches: 1 = the whole "
        "model at once (ms-swift default; LoRA merges need it), N = ms-swift `move_model_batches`; default "
        "none = one parameter at a time (TRL full fine-tuning), the whole model for LoRA.",
    )
    lora_sync: LoraSync = Field(
        LoraSync.merge,
        description="LoRA only: merge (TRL, ms-swift: adapters merged into the gathered base) | adapter (verl: the "
        "whole model summoned, adapters sent unmerged) | adapter_layers (verl layered_summon: one FSDP unit at a "
        "time). Default merge.",
    )
    engine_starts_first: bool = Field(
        False,
        description="The engine is created before the training models are loaded (ORZ, OpenRLHF create vLLM "
        "engines first); false: after from_pretrained and before deepspeed.initialize (TRL, ms-swift). Default false.",
    )
    recompute_old_logprobs: bool | None = Field(
        None,
        description="The trainer recomputes the rollout's log-probs with its own weights in a no-grad pass "
        "before training, even with beta 0 and one optimizer step per rollout: TRL >= 0.22 with vLLM "
        "(`vllm_importance_sampling_correction`, default true: trl PR #3867), verl and OpenRLHF (always). "
        "Default: only when the loss needs them (rollout reused over steps, PPO, LoRA reference).",
    )
    keeps_generation_scores: bool = Field(
        False,
        description="transformers generate's fp32 scores [completions, completion tokens, vocab] stay on the GPU "
        "from the rollout to the next one: TRL's PPOTrainer and its RLOOTrainer before 0.22 (`logitss` of "
        "`batch_generation`). Needs rollout.engine hf. Default false.",
    )
    offload_model: bool = Field(False, description="Move training (and reference) weights to CPU during rollout (ms-swift). Default false.")
    offload_optimizer: bool = Field(False, description="Move optimizer states to CPU during rollout (ms-swift). Default false.")

    @property
    def utilization_given(self) -> bool:
        """The spec sets gpu_memory_utilization (else the planner may choose it: `planner.defaults`)."""
        return "gpu_memory_utilization" in self.model_fields_set


class Ray(Frozen):
    enabled: bool = Field(False, description="The run uses Ray (verl, EasyR1, OpenRLHF). Default false.")
    memory_usage_threshold: Annotated[float, Field(gt=0, le=1)] = Field(
        0.95, description="Ray memory monitor kill threshold (RAY_memory_usage_threshold). Default 0.95."
    )
    object_store_fraction: Annotated[float, Field(ge=0, le=1)] = Field(
        0.3, description="Object store size as a fraction of node RAM (Ray default 0.3, capped at 200 GB)."
    )
