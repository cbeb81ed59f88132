"""What a trace reports: peaks by category, the moment of each peak, top modules. No torch here.

Regions of the traced step, in time order: ``logprob`` (no-grad log-prob forward of the
rollout batch), ``forward`` (training forward), ``loss`` (GRPO loss from the log-probs),
``backward``, ``optimizer``. The *training activation peak* is the largest ACT + TEMP total
seen in forward, loss and backward: what the planner's train-phase `activations` + `logits` /
`backward_recompute` components predict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..memory.components import Category

REGIONS = ("logprob", "forward", "loss", "backward", "optimizer")
TRAINING_REGIONS = ("forward", "loss", "backward")


@dataclass(frozen=True)
class PeakMoment:
    region: str
    module: str
    op: str
    by_category: dict[str, int]
    top_modules: tuple[tuple[str, int], ...]
    """(module, ACT + TEMP bytes it made that are alive at this moment), largest first."""

    @property
    def total_bytes(self) -> int:
        return sum(self.by_category.values())

    @property
    def activation_bytes(self) -> int:
        return self.by_category.get(Category.ACT.value, 0) + self.by_category.get(Category.TEMP.value, 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "region": self.region, "module": self.module, "op": self.op,
            "total_bytes": self.total_bytes, "activation_bytes": self.activation_bytes,
            "by_category": dict(self.by_category),
            "top_modules": [{"module": m, "bytes": b} for m, b in self.top_modules],
        }


@dataclass(frozen=True)
class TraceScope:
    """What one trace stands for. The tracer runs one process on one device with the whole
    model, gradients and optimizer states: one unsharded replica. Under ZeRO/FSDP over N GPUs
    each rank holds 1/N of ``sharded_categories``, which this trace does not show."""

    strategy: str = "ddp"
    num_training_gpus: int = 1
    sharded_categories: tuple[str, ...] = ()

    @property
    def statement(self) -> str:
        if not self.sharded_categories:
            ranks = f"each of the {self.num_training_gpus} DDP ranks" if self.num_training_gpus > 1 else "the one GPU"
            return f"one process, one device, nothing sharded: what {ranks} holds"
        return (f"one unsharded replica (one process, one device): {', '.join(self.sharded_categories)} whole; under "
                f"{self.strategy} over {self.num_training_gpus} GPUs each rank holds 1/{self.num_training_gpus} of them "
                "(not traced; the plan shards them)")

    def to_dict(self) -> dict[str, Any]:
        return {"replica": "unsharded", "num_processes": 1, "strategy": self.strategy,
                "num_training_gpus": self.num_training_gpus, "sharded_categories": list(self.sharded_categories),
                "statement": self.statement}


@dataclass(frozen=True)
class TraceSetup:
    model: str
    model_type: str
    num_sequences: int
    logprob_sequences: int
    prompt_len: int
    completion_len: int
    attention: str
    checkpointing: bool
    logits: str
    optimizer: str
    precision: str
    kl_beta: float
    finetune: str = "full"
    lora_rank: int = 8
    lora_alpha: float = 32
    lora_dropout: float = 0.0
    lora_targets: tuple[str, ...] | str = "all-linear"
    algorithm: str = "grpo"
    """The spec's algorithm; the traced step is its policy update (`compare.ALGORITHM_STEPS`)."""
    images_per_sequence: int = 0
    """Images each sequence carries into the vision tower (`trace.vision_plan`); 0: text only."""
    image_grid_thw: tuple[int, int, int] = (0, 0, 0)
    """Each image's patch grid (temporal, height, width), the processor's ``image_grid_thw``."""
    image_tokens_per_sequence: int = 0
    """Language-model tokens the images of one sequence become (prompt positions)."""
    vision_trains: bool = False
    vision_checkpointing: bool = False
    logits_temperature: str = "in_place"
    """How the bf16_flash_ce modes apply the temperature (`spec.enums.TemperatureScaling`)."""
    optimizer_implementation: str = "for_loop"
    """How torch's AdamW steps (`roles.optimizer_implementation`): foreach, fused or for_loop
    (also DeepSpeed's own optimizer, whose fused step keeps no step-wide temporaries)."""

    @property
    def lora(self) -> dict[str, Any] | None:
        if self.finetune == "full":
            return None
        targets = self.lora_targets if isinstance(self.lora_targets, str) else list(self.lora_targets)
        return {"rank": self.lora_rank, "alpha": self.lora_alpha, "dropout": self.lora_dropout, "targets": targets}

    @property
    def seq_len(self) -> int:
        """Positions of one sequence: text prompt + image tokens + completion."""
        return self.prompt_len + self.image_tokens_per_sequence + self.completion_len


@dataclass(frozen=True)
class VisionTrace:
    """The vision tower's traced memory in the step (ACT + TEMP bytes; `trace.vision.measure`)."""

    num_images: int
    """Images of the training micro-batch."""
    num_patches: int
    """Patches per image."""
    trains: bool
    checkpointing: bool
    held_bytes: int
    """Made by the tower (and the join) and alive when the language model's training forward
    returns: what the tower holds while the language model trains."""
    forward_peak_bytes: int
    """Largest total of the tower's own tensors alive during its training forward."""
    logprob_forward_peak_bytes: int
    """The same during the no-grad log-prob forward (log-prob micro-batch)."""
    backward_peak_bytes: int
    """Largest total, while the tower backpropagates, of what the tower made (its held tensors and
    recomputed blocks) and what its backward makes (0 when frozen)."""

    @property
    def charged_bytes(self) -> int:
        """What the plan's train-phase term stands for: the larger of what the tower holds and
        its forward peak."""
        return max(self.held_bytes, self.forward_peak_bytes)

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "charged_bytes": self.charged_bytes}


@dataclass(frozen=True)
class TraceResult:
    setup: TraceSetup
    peak: PeakMoment
    """The largest live total (every category) of the whole step."""
    activation_peak: PeakMoment
    """The largest ACT + TEMP of the training forward/loss/backward."""
    region_peaks: dict[str, PeakMoment]
    """Per region, the moment of its largest live total."""
    saved_at_end_of_forward: dict[str, int] = field(default_factory=dict)
    """ACT + TEMP alive when the training forward returned, by module (what autograd saved)."""
    versions: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    scope: TraceScope = field(default_factory=TraceScope)
    vision: VisionTrace | None = None
    """The vision tower's part, when the step's prompts carry images into a traced tower."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "setup": {**self.setup.__dict__, "seq_len": self.setup.seq_len},
            "scope": self.scope.to_dict(),
            "peak": self.peak.to_dict(),
            "training_activation_peak": self.activation_peak.to_dict(),
            "regions": {name: p.to_dict() for name, p in self.region_peaks.items()},
            "saved_at_end_of_forward": dict(self.saved_at_end_of_forward),
            "vision": self.vision.to_dict() if self.vision is not None else None,
            "versions": dict(self.versions),
            "seconds": round(self.seconds, 3),
        }
