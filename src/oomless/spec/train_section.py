"""The `train:` section of a run spec: what `oomless train` needs beyond the memory knobs.

Data, rewards and optimiser settings of a GRPO run. The memory knobs (batch, lengths,
precision, LoRA, distribution, rollout engine) stay where `oomless plan` reads them, so the run
that is trained is the run that was planned. Paths are relative to the spec's folder.
"""

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from .base import INT64, Frozen

BUILTIN_REWARDS = ("accuracy", "format", "length")
"""Reward functions shipped in `oomless.train.rewards`; anything else is `module:function`."""


class ArithmeticData(Frozen):
    """A generated addition data set: prompts `a+b=`, answers `a+b`."""

    num_samples: Annotated[int, Field(ge=1), INT64] = Field(2000, description="Rows to generate. Default 2000.")
    max_operand: Annotated[int, Field(ge=1, le=9), INT64] = Field(
        4, description="Operands are drawn from 0..max_operand (single digits). Default 4."
    )
    seed: Annotated[int, INT64] = Field(0, description="Seed of the generator. Default 0.")


class TrainData(Frozen):
    """Where prompts (and the columns rewards read) come from: exactly one of `path`, `name`,
    `arithmetic`."""

    path: str | None = Field(None, description="Local .jsonl, .json, .parquet or .csv file.")
    name: str | None = Field(
        None, description="A `datasets` name or local dataset folder (the hub is not reached when offline)."
    )
    arithmetic: ArithmeticData | None = Field(None, description="Generate an addition data set instead.")
    split: str = Field("train", description="Split to read. Default train.")
    columns: dict[str, str] = Field(
        default_factory=dict,
        description="Trainer column ← data set column, e.g. {prompt: question, answer: solution}. "
        "The trainer reads `prompt`; rewards read the other columns by name. Default: names as they are.",
    )
    conversational: bool = Field(
        True,
        description="Wrap text prompts as one user message so the tokenizer's chat template is applied. Default true.",
    )
    system_prompt: str | None = Field(None, description="System message put before each conversational prompt.")
    chat_template: str | None = Field(
        None, description="Jinja chat template (inline, or a path to a .jinja file) replacing the tokenizer's."
    )
    max_samples: Annotated[int, Field(ge=1), INT64] | None = Field(None, description="Use only the first N rows.")

    @model_validator(mode="after")
    def _one_source(self) -> "TrainData":
        given = [k for k in ("path", "name", "arithmetic") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of path, name, arithmetic (got {', '.join(given) or 'none'})")
        return self


class RewardSpec(Frozen):
    """One reward function and its weight in the sum."""

    function: str = Field(
        description=f"A built-in ({', '.join(BUILTIN_REWARDS)}) or an import path `module:function`."
    )
    weight: float = Field(1.0, description="Weight in the summed reward. Default 1.")
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="Keyword options of a built-in: accuracy {answer_column}; format {pattern, value}; "
        "length {max_tokens, cache_tokens}.",
    )

    @field_validator("function")
    @classmethod
    def _known(cls, value: str) -> str:
        if value in BUILTIN_REWARDS:
            return value
        module, sep, func = value.partition(":")
        if not sep or not module or not func:
            raise ValueError(f"{value!r}: use a built-in ({', '.join(BUILTIN_REWARDS)}) or module:function")
        return value


def _reward_from_str(value: Any) -> "Any":
    return {"function": value} if isinstance(value, str) else value


class BuildModel(Frozen):
    """Build the policy locally: random weights from `model`'s config.json and a
    character-level tokenizer with a chat template (no hub)."""

    seed: Annotated[int, INT64] = Field(0, description="Seed of the weight initialisation. Default 0.")
    initializer_range: Annotated[float, Field(gt=0)] | None = Field(
        None, description="Std of the weight initialisation. Default: the config's (0.02)."
    )


class TrainSection(Frozen):
    """Settings of `oomless train`: data, rewards and the optimiser."""

    data: TrainData
    rewards: Annotated[list[RewardSpec], Field(min_length=1)] = Field(
        description="Reward functions, summed with their weights (TRL `reward_funcs`, `reward_weights`)."
    )
    build_model: BuildModel | None = Field(
        None, description="Build a tiny model and tokenizer locally instead of loading `model`'s weights."
    )
    tokenizer: str | None = Field(None, description="Tokenizer folder or id. Default: the model's.")
    learning_rate: Annotated[float, Field(gt=0)] = Field(1e-6, description="Peak learning rate. Default 1e-6 (TRL).")
    lr_scheduler: Literal["constant", "linear", "cosine"] = Field("linear", description="Default linear (HF Trainer).")
    max_steps: Annotated[int, Field(ge=1), INT64] = Field(100, description="Optimizer steps. Default 100.")
    save_steps: Annotated[int, Field(ge=0), INT64] = Field(
        50, description="Checkpoint every N optimizer steps; 0 saves only at the end. Default 50."
    )
    logging_steps: Annotated[int, Field(ge=1), INT64] = Field(10, description="Log every N steps. Default 10.")
    seed: Annotated[int, INT64] = Field(42, description="Seed of sampling and data order. Default 42 (HF Trainer).")
    output_dir: str = Field("runs/oomless", description="Checkpoints, telemetry and logs. Default runs/oomless.")
    temperature: Annotated[float, Field(gt=0)] = Field(1.0, description="Sampling temperature of the rollout. Default 1.")
    loss_type: Literal["grpo", "bnpo", "dr_grpo", "dapo"] = Field("dapo", description="TRL loss type. Default dapo (TRL).")
    max_grad_norm: Annotated[float, Field(ge=0)] = Field(1.0, description="Gradient clipping; 0 disables. Default 1.")
    num_iterations: Annotated[int, Field(ge=1), INT64] = Field(1, description="Updates per rollout batch (GRPO μ). Default 1.")
    cpu_threads: Annotated[int, Field(ge=1), INT64] | None = Field(
        None,
        description="torch intra-op threads of a CPU run (tiny models run fastest on 1, and much faster than "
        "on busy shared cores). Default: torch's, one per core.",
    )
    offload_optimizer_in_rollout: bool = Field(
        False,
        description="Move optimizer states off the training device while completions are generated, with "
        "any rollout engine (rollout.offload_optimizer does it for vllm_colocate). Default false.",
    )

    @field_validator("rewards", mode="before")
    @classmethod
    def _names_are_rewards(cls, value: Any) -> "Any":
        """`- accuracy` is short for `- {function: accuracy}`."""
        return [_reward_from_str(x) for x in value] if isinstance(value, list) else value
