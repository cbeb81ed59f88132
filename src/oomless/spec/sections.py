"""Spec sections for vision-language models and for multi-model algorithms (PPO).

Kept apart from `run.py` so each file reads in one sitting; `RunSpec` composes them.
"""

from typing import Annotated

from pydantic import Field, model_validator

from .base import INT64, Frozen
from .enums import Role
from .percentiles import Percentiles, check_percentiles

MAX_IMAGE_PIXELS = 2**28
"""Largest image area a spec may declare (268,435,456 px, a 16,384 × 16,384 image): at 28² px
per token (Qwen2.5-VL) that is 342,392 image tokens, past every supported model's context, so
no real limit is refused; the worst-case token search (`memory/vision_tokens.py`) grows with
√pixels and stays under a second here."""


class Vision(Frozen):
    """Images in the prompts of a vision-language model. Ignored for text-only models."""

    images_per_prompt: Annotated[int, Field(ge=0), INT64] = Field(1, description="Most images one prompt carries. Default 1.")
    max_pixels: Annotated[int, Field(ge=1, le=MAX_IMAGE_PIXELS), INT64] | None = Field(
        None,
        description="Largest image area after the processor's resize (Qwen2-VL family `max_pixels`, ms-swift "
        "`MAX_PIXELS`). Default: the processor's (Qwen2.5-VL 12845056).",
    )
    min_pixels: Annotated[int, Field(ge=1, le=MAX_IMAGE_PIXELS), INT64] | None = Field(
        None, description="Smallest image area after resize (Qwen2-VL family). Default: the processor's (3136)."
    )
    max_tiles: Annotated[int, Field(ge=1), INT64] = Field(
        12, description="InternVL dynamic tiling: most 448-px tiles per image (a thumbnail is added). Default 12."
    )
    freeze_tower: bool = Field(False, description="Vision tower frozen (ms-swift `freeze_vit`, VLM-R1 `freeze_vision_modules`). Default false.")
    dense_attention_mask: bool = Field(
        False,
        description="transformers 4.49-4.53 build a dense [patches × patches] mask in every Qwen2.5-VL vision "
        "block with sdpa/eager (PR #37363 removed it). Default false.",
    )
    tower_gradient_checkpointing: bool | None = Field(
        None, description="Recompute vision blocks in backward. Default: follows `gradient_checkpointing` (ms-swift)."
    )
    data_max_pixels: Annotated[int, Field(ge=1, le=MAX_IMAGE_PIXELS), INT64] | None = Field(
        None,
        description="Largest image area the training data holds, when the framework filters images below the "
        "processor's limit (TRL's grpo_vlm.py/rloo_vlm.py keep images under 512 px a side): the training batches' "
        "worst image; vLLM's profile still sizes images by max_pixels. Default: max_pixels.",
    )
    typical_pixels: Annotated[int, Field(ge=1, le=MAX_IMAGE_PIXELS), INT64] | None = Field(
        None,
        description="Median image area of the dataset after the processor's resize (gives the typical batch; "
        "max_pixels bounds the worst). Default: max_pixels.",
    )
    typical_images_per_prompt: Annotated[int, Field(ge=0), INT64] | None = Field(
        None, description="Median images per prompt. Default: images_per_prompt."
    )
    pixels_percentiles: Percentiles | None = Field(
        None,
        description="Image areas after resize at percentiles of the dataset, e.g. {90: 800000, 99: 2000000}. Default none.",
    )

    @model_validator(mode="after")
    def _typical_within_limits(self) -> "Vision":
        if self.typical_images_per_prompt is not None and self.typical_images_per_prompt > self.images_per_prompt:
            raise ValueError(
                f"typical_images_per_prompt={self.typical_images_per_prompt} exceeds images_per_prompt={self.images_per_prompt}"
            )
        if self.typical_pixels is not None and self.max_pixels is not None and self.typical_pixels > self.max_pixels:
            raise ValueError(f"typical_pixels={self.typical_pixels} exceeds max_pixels={self.max_pixels}")
        if self.typical_pixels is not None and self.data_max_pixels is not None and self.typical_pixels > self.data_max_pixels:
            raise ValueError(f"typical_pixels={self.typical_pixels} exceeds data_max_pixels={self.data_max_pixels}")
        check_percentiles("pixels_percentiles", self.pixels_percentiles, self.typical_pixels, self.max_pixels)
        return self


class Schedule(Frozen):
    """How long the run is and when it saves: the step timeline's horizon and its checkpoint phases."""

    max_steps: Annotated[int, Field(ge=1, le=10**9), INT64] | None = Field(
        None,
        description="Optimizer steps the run takes (TRL/ms-swift `max_steps`, verl `trainer.total_training_steps`, "
        "or epochs × steps per epoch). Default none: one step is planned and growth over steps is not judged.",
    )
    save_steps: Annotated[int, Field(ge=1, le=10**9), INT64] | None = Field(
        None,
        description="A checkpoint every N optimizer steps (HF `save_steps`, verl `trainer.save_freq`, OpenRLHF "
        "`--save_steps`). Default none: no checkpoint during the run.",
    )
    save_only_model: bool = Field(
        False,
        description="Checkpoints hold only the weights, not optimizer states (HF `save_only_model`, verl "
        "`checkpoint.contents` without optimizer). Default false.",
    )


class ExtraModel(Frozen):
    model: str | None = Field(
        None, description="Catalog id, directory or config.json of this model. Default: the policy's architecture."
    )
    wrapped_with_actor: bool = Field(
        False,
        description="The value model is one module with the policy (TRL PPOTrainer's PolicyAndValueWrapper), so "
        "ZeRO-3 gathers both for transformers generate (`unwrap_model_for_generation`). Default false (verl, "
        "OpenRLHF and ORZ keep the critic a module of its own).",
    )
    lora: bool = Field(
        False,
        description="The value model trains the run's LoRA adapters (finetune.lora_*) instead of all its weights: "
        "ms-swift PPO passes it through the same `prepare_model` as the policy. Needs finetune.method lora or "
        "qlora. Default false (full: TRL, OpenRLHF, verl, ORZ).",
    )


class RewardModel(Frozen):
    model: str | None = Field(
        None, description="A reward model (sequence classifier) to score rollouts. Default none: rule-based rewards."
    )


class PlacementGroup(Frozen):
    """GPUs shared by some roles. A model may span several groups (ms-swift 3.x puts its one
    vLLM engine on the last GPU, beside a training rank): it is sharded over all of them."""

    roles: list[Role] = Field(description="Roles sharing these GPUs: actor, reference, critic, reward, vllm.")
    gpus_per_node: Annotated[int, Field(ge=1), INT64] = Field(description="GPUs per node of this group.")


class Placement(Frozen):
    """Where each model lives. Default: every role on the training GPUs, with vLLM beside them
    (vllm_colocate) or on `rollout.num_gpus` GPUs of its own (vllm_separate)."""

    groups: list[PlacementGroup] | None = Field(
        None,
        description="Explicit GPU groups, as OpenRLHF's colocate_actor_ref / colocate_critic_reward / "
        "colocate_all_models place them. Default: derived from `rollout.engine`.",
    )
    process_per_role: bool = Field(
        False,
        description="Each role runs in its own process with its own CUDA context (OpenRLHF and ORZ Ray "
        "actors); false when actor and reference share the training process (TRL, ms-swift, verl). Default false.",
    )
    offload_idle_models: bool = Field(
        False,
        description="Models are moved to CPU while another role computes (ORZ colocate_all backload/offload, "
        "OpenRLHF deepspeed_enable_sleep + ref_reward_offload). Default false.",
    )

    @model_validator(mode="after")
    def _roles_make_sense(self) -> "Placement":
        if self.groups is None:
            return self
        for group in self.groups:
            twice = sorted({r.value for r in group.roles if group.roles.count(r) > 1})
            if twice:
                raise ValueError(f"a placement group lists {', '.join(twice)} twice")
        if Role.actor not in [r for g in self.groups for r in g.roles]:
            raise ValueError("the actor must be placed in a group")
        return self
