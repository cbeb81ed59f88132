"""`OomlessGRPOTrainer`: TRL's `GRPOTrainer` with phases measured, rollout offload, and
out-of-memory recovery by re-splitting the micro-batch.

- Phases (`Telemetry.phase`): `weight_sync` (vLLM only), `rollout` (generation and rewards),
  `logprob` (no-grad old/reference log-probs), `train` (forward + backward of every
  micro-batch), `optimizer` (the optimizer step; entered from `PhaseCallback`).
- Offload: `RolloutOffload` moves the optimizer states (and, when vLLM generates, the weights)
  off the device before generation and back after it.
- One optimizer step's completions arrive whole (`settings.grpo_config_kwargs` sets TRL's
  gradient accumulation to 1); `training_step` splits them into micro-batches. An
  `OutOfMemoryError` there zeroes the step's gradients, halves the micro-batch (doubling the
  accumulation) and redoes the step on the same samples; every sample is used exactly once in
  the step that counts. In the no-grad log-prob pass it halves that pass's micro-batch.

Source: trl 1.16.0 `GRPOTrainer` (`_generate_single_turn`, `_calculate_rewards`,
`_get_per_token_logps_and_entropies`, `training_step`), transformers 5.23 `Trainer`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback
from trl import GRPOTrainer

from .batching import halve, loss_weight, micro_batch_ranges
from .files import append_jsonl, write_text
from .offload import RolloutOffload
from .telemetry import Telemetry, memory_metrics

STATE_FILE = "oomless_state.json"
"""Saved in every checkpoint: the micro-batch sizes after any out-of-memory re-split."""


@dataclass
class RunHooks:
    """What `OomlessGRPOTrainer` needs beyond TRL's arguments."""

    telemetry: Telemetry
    micro_batch_size: int
    logprob_micro_batch_size: int
    events_path: Path
    offload_model: bool = False
    offload_optimizer: bool = False
    spill_file: Path | None = None
    on_restore: Callable[[list[torch.Tensor]], None] | None = None
    on_micro_batch: Callable[[dict[str, Any]], None] | None = None
    """Called with each micro-batch before its forward (tests inject errors and count samples)."""
    rewards: list[dict[str, Any]] = field(default_factory=list)
    """Per rollout: the step, the mean summed reward and each function's mean."""


def slice_batch(inputs: dict[str, Any], start: int, stop: int) -> dict[str, Any]:
    """Rows [start, stop) of a TRL step batch: tensors with a batch dimension and lists are
    sliced, scalars (`num_items_in_batch`) and None kept (as trl `split_tensor_dict`)."""
    out: dict[str, Any] = {}
    for key, value in inputs.items():
        if isinstance(value, list) or (isinstance(value, torch.Tensor) and value.dim() > 0):
            out[key] = value[start:stop]
        else:
            out[key] = value
    return out


class OomlessGRPOTrainer(GRPOTrainer):
    def __init__(self, *args: Any, hooks: RunHooks, **kwargs: Any) -> None:
        self.hooks = hooks
        super().__init__(*args, **kwargs)
        self.micro_batch_size = hooks.micro_batch_size
        self.logprob_micro_batch_size = hooks.logprob_micro_batch_size
        self.add_callback(PhaseCallback(self))

    # --- bookkeeping --------------------------------------------------------------------------

    def step_number(self) -> int:
        """The optimizer step being made (1-based), the `step` of telemetry records."""
        return self.state.global_step + 1

    def record_event(self, **event: Any) -> None:
        append_jsonl(self.hooks.events_path, [{"step": self.step_number(), "time": time.time(), **event}])

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        """TRL's log, with the plan-vs-measured memory of each phase's last step added: the
        loggers of `report_to` (TensorBoard, wandb) chart them beside the loss and reward."""
        if self.model.training:
            logs = {**logs, **memory_metrics(self.hooks.telemetry.latest)}
        super().log(logs, start_time)

    def _free_device_cache(self) -> None:
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    # --- rollout --------------------------------------------------------------------------------

    def _rollout_offload(self) -> RolloutOffload | None:
        offload_model = self.hooks.offload_model and self.use_vllm  # HF generate needs the weights
        if not (offload_model or self.hooks.offload_optimizer) or not self.model.training:
            return None
        return RolloutOffload(
            self.model, self.optimizer, self.accelerator.device, model_too=offload_model,
            optimizer_too=self.hooks.offload_optimizer, spill_file=self.hooks.spill_file, on_restore=self.hooks.on_restore,
        )

    def _generate_single_turn(self, prompt_ids: Any, images: Any, multimodal_fields: Any, num_generations: int, has_tool_images: bool = False) -> Any:
        telemetry, step = self.hooks.telemetry, self.step_number()
        if self.use_vllm and self.state.global_step != self._last_loaded_step:
            with telemetry.phase("weight_sync", step):
                self.vllm_generation.sync_weights()
            self._last_loaded_step = self.state.global_step
        offload = self._rollout_offload()
        moved = offload.offload() if offload is not None else None
        try:
            with telemetry.phase("rollout", step) as extras:
                if moved is not None:
                    extras.update(moved.as_dict("offload"))
                return super()._generate_single_turn(prompt_ids, images, multimodal_fields, num_generations, has_tool_images)
        finally:
            if offload is not None:
                telemetry.annotate(step, "rollout", offload.reload().as_dict("reload"))

    def _calculate_rewards(self, inputs: Any, prompts: Any, completions: Any, completion_ids_list: Any) -> torch.Tensor:
        with self.hooks.telemetry.phase("rollout", self.step_number()):
            per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        weights = self.reward_weights.to(per_func.device)
        self.hooks.rewards.append({
            "step": self.step_number(),
            "reward": float(torch.nansum(per_func * weights, dim=1).mean()),
            "rewards": {name: float(torch.nanmean(per_func[:, i])) for i, name in enumerate(self.reward_func_names)},
        })
        return per_func

    # --- log-probs --------------------------------------------------------------------------------

    def _get_per_token_logps_and_entropies(self, model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                                           logits_to_keep: int, batch_size: int | None = None, **kwargs: Any) -> Any:
        if torch.is_grad_enabled():  # the training forward, inside the `train` phase
            return super()._get_per_token_logps_and_entropies(model, input_ids, attention_mask, logits_to_keep, batch_size, **kwargs)
        with self.hooks.telemetry.phase("logprob", self.step_number()):
            while True:
                size = min(batch_size or input_ids.size(0), self.logprob_micro_batch_size)
                try:
                    return super()._get_per_token_logps_and_entropies(model, input_ids, attention_mask, logits_to_keep, size, **kwargs)
                except torch.OutOfMemoryError:
                    if size <= 1:
                        raise
                    self._free_device_cache()
                    self.logprob_micro_batch_size = size // 2
                    self.record_event(event="oom_recovered", phase="logprob", micro_batch_size_before=size,
                                      micro_batch_size_after=size // 2)

    # --- training -----------------------------------------------------------------------------------

    def training_step(self, model: torch.nn.Module, inputs: Any, num_items_in_batch: Any = None) -> torch.Tensor:
        start = time.perf_counter()
        model.train()
        inputs = self._prepare_inputs(inputs)
        with self.hooks.telemetry.phase("train", self.step_number()) as extras:
            loss, retries = self._train_step_with_recovery(model, inputs)
            extras.update(micro_batch_size=self.micro_batch_size, oom_retries=retries)
        self._step += 1  # as trl's training_step: selects the next slice of the rollout buffer
        self._metrics["train"]["step_time"].append(time.perf_counter() - start)
        return loss

    def _train_step_with_recovery(self, model: torch.nn.Module, inputs: dict[str, Any]) -> tuple[torch.Tensor, int]:
        num_samples, retries = inputs["prompt_ids"].size(0), 0
        while True:
            try:
                return self._accumulate(model, inputs, num_samples), retries
            except torch.OutOfMemoryError:
                resplit = halve(self.micro_batch_size, num_samples)
                if resplit is None:
                    raise
                model.zero_grad(set_to_none=True)  # drop the failed attempt's partial gradients
                self._free_device_cache()
                self.micro_batch_size, retries = resplit.micro_batch_size_after, retries + 1
                self.record_event(event="oom_recovered", phase="train", samples=num_samples,
                                  micro_batch_size_before=resplit.micro_batch_size_before,
                                  micro_batch_size_after=resplit.micro_batch_size_after,
                                  gradient_accumulation_before=resplit.gradient_accumulation_before,
                                  gradient_accumulation_after=resplit.gradient_accumulation_after)

    def _accumulate(self, model: torch.nn.Module, inputs: dict[str, Any], num_samples: int) -> torch.Tensor:
        """Forward and backward of every micro-batch of the step; gradients sum to the step's."""
        ranges = micro_batch_ranges(num_samples, self.micro_batch_size)
        if len(ranges) > 1 and inputs.get("pixel_values") is not None:
            raise RuntimeError(
                "image batches are not split into micro-batches yet (pixel_values are not per sample); "
                "set batch.gradient_accumulation_steps: 1 for vision-language models"
            )
        mask = inputs["completion_mask"]
        batch_tokens = int(mask.sum())
        total = torch.zeros((), device=self.accelerator.device)
        for i, (lo, hi) in enumerate(ranges):
            chunk = slice_batch(inputs, lo, hi)
            if self.hooks.on_micro_batch is not None:
                self.hooks.on_micro_batch(chunk)
            last = i == len(ranges) - 1
            self.accelerator.gradient_state._set_sync_gradients(last)  # DeepSpeed steps on the last only
            sync: AbstractContextManager[Any] = nullcontext() if last or len(ranges) == 1 else self.accelerator.no_sync(model)
            weight = loss_weight(self.loss_type, hi - lo, num_samples, int(mask[lo:hi].sum()), batch_tokens)
            with sync, self.compute_loss_context_manager():
                loss = self.compute_loss(model, chunk) * weight
            kwargs = {"scale_wrt_gas": False} if self.accelerator.distributed_type == "DEEPSPEED" else {}
            self.accelerator.backward(loss, **kwargs)
            total += loss.detach()
        return total


class PhaseCallback(TrainerCallback):
    """The `optimizer` phase, the end-of-step flush of telemetry, and the checkpoint state file."""

    def __init__(self, trainer: OomlessGRPOTrainer) -> None:
        self.trainer = trainer
        self._optimizer_phase: AbstractContextManager[Any] | None = None

    def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._optimizer_phase = self.trainer.hooks.telemetry.phase("optimizer", state.global_step + 1)
        self._optimizer_phase.__enter__()

    def on_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._optimizer_phase is not None:
            self._optimizer_phase.__exit__(None, None, None)
            self._optimizer_phase = None

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.trainer.hooks.telemetry.flush()

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if folder.is_dir():
            write_text(folder / STATE_FILE, json.dumps({
                "micro_batch_size": self.trainer.micro_batch_size,
                "logprob_micro_batch_size": self.trainer.logprob_micro_batch_size,
            }))
