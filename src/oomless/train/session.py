"""One training session: model, tokenizer, data, rewards and the trainer, run with telemetry."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..errors import EXIT_FITS, EXIT_INTERRUPTED, InputError
from ..planner.plan import Plan
from ..spec.run import RunSpec
from . import settings as S
from .data import drop_long_prompts, load_prompts
from .files import append_jsonl, replace_folder
from .devices import cpu_probe, cuda_probe, host_probe, resident_probe
from .live_bytes import LiveTensorBytes
from .rewards import build_reward
from .telemetry import Telemetry, planned_phases, read_jsonl
from .trainer import STATE_FILE, OomlessGRPOTrainer, RunHooks

SPILL_FILE = "offload-spill.pt"


@dataclass(frozen=True)
class SessionOptions:
    max_steps: int
    checkpoint: Path | None = None
    """The checkpoint to resume from (None: a fresh run)."""
    progress: bool = True
    report_to: tuple[str, ...] = ("none",)
    """TRL/transformers loggers (`report_to`); they also receive the plan-vs-measured metrics."""


def load_tokenizer(location: str, chat_template: str | None, base_dir: Path) -> Any:
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(location)
    except (OSError, ValueError) as err:
        raise InputError("train.tokenizer", f"cannot load a tokenizer from {location!r}: {str(err).splitlines()[0]}") from None
    if chat_template is not None:
        path = base_dir / chat_template
        tokenizer.chat_template = path.read_text(encoding="utf-8") if path.is_file() else chat_template
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def prompt_token_counts(dataset: Any, tokenizer: Any) -> list[int]:
    counts = []
    for prompt in dataset["prompt"]:
        if isinstance(prompt, str):
            counts.append(len(tokenizer(prompt)["input_ids"]))
        else:
            counts.append(len(tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]))
    return counts


def _model_path(spec: RunSpec, base_dir: Path, out_dir: Path, say: Callable[[str], None]) -> tuple[str, str]:
    """The model's location and where its tokenizer is, unless `train.tokenizer` names one."""
    from .run import model_location

    train = spec.train
    assert train is not None
    location = model_location(spec, base_dir)
    if train.build_model is None:
        return location, location
    from .tiny import build_model, tokenizer_dir

    built = build_model(Path(location), train.build_model, out_dir / "model")
    say(f"model: built locally from {location} into {built}")
    return str(built), str(tokenizer_dir(built))


def fit_logprob_chunk_to_vocabulary(vocab_size: int) -> int:
    """TRL 1.16 scores completions through its chunked log-prob kernel with a work buffer of
    min(tokens, 4096) × 32768 logits, however small the vocabulary (32 MiB in fp32 for a
    17-token tiny model). A vocabulary-wide chunk gives the same log-probs with a buffer of
    the vocabulary's width; vocabularies of 32768 tokens or more are unchanged.
    Source: trl 1.16.0 `trl/trainer/utils.py` (`_CHUNKED_LOGPROB_CHUNK_SIZE`, read at each call),
    `trl/kernels/chunked_logprob.py` (`mm_buf`). Returns the chunk width in force."""
    import trl.trainer.utils as trl_utils

    default = getattr(trl_utils, "_oomless_default_chunk", trl_utils._CHUNKED_LOGPROB_CHUNK_SIZE)
    trl_utils._oomless_default_chunk = default
    trl_utils._CHUNKED_LOGPROB_CHUNK_SIZE = min(default, vocab_size)
    return trl_utils._CHUNKED_LOGPROB_CHUNK_SIZE


def _probes(machine: S.Machine, tracker: LiveTensorBytes | None) -> tuple[Callable[[], dict[str, Any]], Callable[[], None]]:
    if machine.device == "cuda":
        return cuda_probe(torch.cuda.current_device())
    assert tracker is not None
    return cpu_probe(tracker)


def build_trainer(spec: RunSpec, plan: Plan, base_dir: Path, out_dir: Path, max_steps: int, machine: S.Machine,
                  say: Callable[[str], None], tracker: LiveTensorBytes | None = None,
                  report_to: tuple[str, ...] = ("none",)) -> OomlessGRPOTrainer:
    """Everything set up, nothing trained. ``tracker`` measures a CPU run."""
    from trl import GRPOConfig

    train = spec.train
    assert train is not None
    model_path, tokenizer_path = _model_path(spec, base_dir, out_dir, say)
    tokenizer = load_tokenizer(train.tokenizer or tokenizer_path, train.data.chat_template, base_dir)
    dataset = load_prompts(train.data, base_dir)
    dataset, dropped = drop_long_prompts(dataset, prompt_token_counts(dataset, tokenizer), spec.lengths.max_prompt_tokens)
    if dropped:
        say(f"note: {dropped} prompts longer than lengths.max_prompt_tokens={spec.lengths.max_prompt_tokens} were left out")
    rewards = [build_reward(r, spec.lengths.max_completion_tokens, base_dir) for r in train.rewards]
    config = GRPOConfig(**S.grpo_config_kwargs(spec, train, machine, str(out_dir), max_steps, report_to))
    lora = S.lora_kwargs(spec)
    peft_config = None
    if lora is not None:
        from peft import LoraConfig

        peft_config = LoraConfig(**lora)
    layout = S.batch_layout(spec)
    measure, reset = _probes(machine, tracker)
    telemetry = Telemetry(out_dir / "telemetry.jsonl", planned_phases(plan, machine.device), measure, reset,
                          host=host_probe(), warn=lambda line: say(f"warning: {line}"))
    hooks = RunHooks(
        telemetry=telemetry, micro_batch_size=layout.micro_batch_size, logprob_micro_batch_size=layout.logprob_micro_batch_size,
        events_path=out_dir / "events.jsonl",
        offload_model=spec.rollout.offload_model and spec.rollout.sleep_level > 0,
        offload_optimizer=train.offload_optimizer_in_rollout or (spec.rollout.offload_optimizer and spec.rollout.sleep_level > 0),
        spill_file=out_dir / SPILL_FILE, on_restore=tracker.track if tracker is not None else None,
    )
    try:
        trainer = OomlessGRPOTrainer(model=model_path, reward_funcs=rewards, args=config, train_dataset=dataset,
                                     processing_class=tokenizer, peft_config=peft_config, hooks=hooks)
    except OSError as err:
        raise InputError("model", f"cannot load {model_path!r}: {str(err).splitlines()[0]}") from None
    fit_logprob_chunk_to_vocabulary(trainer.model.get_output_embeddings().weight.shape[0])
    telemetry.resident = resident_probe(trainer.model, lambda: trainer.optimizer, machine.device)
    if tracker is not None:
        for model in (trainer.model, getattr(trainer, "ref_model", None)):
            if model is not None:
                tracker.track(list(model.parameters()) + list(model.buffers()))
    return trainer


def restore_micro_batches(trainer: OomlessGRPOTrainer, checkpoint: Path) -> None:
    state = checkpoint / STATE_FILE
    if state.exists():
        saved = json.loads(state.read_text(encoding="utf-8"))
        trainer.micro_batch_size = saved["micro_batch_size"]
        trainer.logprob_micro_batch_size = saved["logprob_micro_batch_size"]


def quiet_libraries() -> None:
    """No per-map / per-shard progress bars and no warnings about deprecated names that TRL
    itself passes to transformers: the run's own progress bar and warnings stay readable."""
    import warnings

    import datasets
    from transformers.utils import logging as hf_logging

    datasets.disable_progress_bars()
    hf_logging.disable_progress_bar()
    warnings.filterwarnings("ignore", message=r".*(gradient_checkpointing|is_gradient_checkpointing).* is deprecated", category=FutureWarning)


class RewardLog:
    """Appends each rollout's rewards to ``rewards.jsonl`` at the end of every step."""

    def __init__(self, hooks: RunHooks, path: Path) -> None:
        self.hooks, self.path, self.written = hooks, path, 0

    def flush(self) -> None:
        new = self.hooks.rewards[self.written:]
        if new:
            append_jsonl(self.path, new)
            self.written = len(self.hooks.rewards)


def run_session(spec: RunSpec, plan: Plan, base_dir: Path, out_dir: Path, options: SessionOptions,
                machine: S.Machine, say: Callable[[str], None]) -> Any:
    """Train; returns the outcome (exit code 0, or `EXIT_INTERRUPTED` after Ctrl-C saved a checkpoint)."""
    from transformers import TrainerCallback
    from transformers.trainer_callback import PrinterCallback

    from .interrupt import StopOnSignal
    from .progress import ProgressBar
    from .run import TrainOutcome, finish, write_summary

    start = time.perf_counter()
    quiet_libraries()
    if machine.device == "cpu" and spec.train is not None and spec.train.cpu_threads is not None:
        torch.set_num_threads(spec.train.cpu_threads)
    bar = ProgressBar(enabled=options.progress, fallback=say)
    tracker = LiveTensorBytes() if machine.device == "cpu" else None
    trainer = build_trainer(spec, plan, base_dir, out_dir, options.max_steps, machine, bar.say, tracker, options.report_to)
    hooks = trainer.hooks
    bar.hooks = hooks
    rewards_log = RewardLog(hooks, out_dir / "rewards.jsonl")

    class FlushRewards(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            rewards_log.flush()

    stop = StopOnSignal(bar.say)
    trainer.remove_callback(PrinterCallback)  # the log dicts; the progress bar shows the reward
    for callback in (FlushRewards(), bar, stop):
        trainer.add_callback(callback)
    checkpoint = options.checkpoint
    if checkpoint is None:
        hooks.telemetry.record_now("load", 0)
        hooks.telemetry.flush()
    else:
        restore_micro_batches(trainer, checkpoint)
        say(f"resuming from {checkpoint}")
    with stop.installed(), tracker if tracker is not None else nullcontext():
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    interrupted = stop.stopped_at_step is not None and stop.stopped_at_step < options.max_steps
    if not interrupted:
        replace_folder(out_dir / "final", lambda folder: trainer.save_model(str(folder)))
    outcome = TrainOutcome(EXIT_INTERRUPTED if interrupted else EXIT_FITS, plan, out_dir, seconds=time.perf_counter() - start)
    if interrupted:
        outcome.interrupted_at_step = stop.stopped_at_step
        outcome.notes.append(f"stopped at step {stop.stopped_at_step} of {options.max_steps}; checkpoint-{stop.stopped_at_step} "
                             "saved (`oomless train SPEC --resume` continues)")
    outcome.events = read_jsonl(hooks.events_path)
    outcome = finish(outcome, hooks.rewards, hooks.telemetry.summaries)
    write_summary(outcome)
    return outcome
