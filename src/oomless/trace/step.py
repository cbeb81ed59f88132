"""Trace one GRPO step of a real Hugging Face model on fake tensors.

The step is TRL 0.19–0.2x `GRPOTrainer`'s for one micro-batch of ``b`` sequences of
``prompt + completion`` tokens, in time order:

1. ``logprob``: a no-grad forward of the log-prob micro-batch (reference / old-policy
   log-probs) through the same model, `logprobs.per_token_logps`.
2. ``forward``: the training forward with ``logits_to_keep = c + 1``.
3. ``loss``: per-token log-probs in the spec's `logits` mode, then `_compute_loss`: ratio
   ``exp(logp − old_logp)`` with ``old_logp = logp.detach()`` (one iteration per batch),
   clipping to [1 − 0.2, 1 + 0.2], advantages, and when ``kl_beta > 0`` the k3 KL estimate to
   the reference log-probs (an fp32 input tensor); masked mean per sequence, mean over the batch.
4. ``backward``: `loss.backward()` (gradients accumulate into ``.grad``: GRAD).
5. ``optimizer``: the first step of the spec's optimizer (`optim.OptimizerStep`).

Inputs are built as the trainer has them: int64 token ids and attention mask [b, s], an int64
completion mask [b, c], fp32 advantages [b] and reference log-probs [b, c] (OTHER).

Known limitations: one process and one GPU (no ZeRO/FSDP sharding, no gathered parameters, no
reduce buckets); one copy of the weights (a separate reference model of full fine-tuning is not
built); LoRA is traced through PEFT, QLoRA is not (bitsandbytes' 4-bit kernels have no fake
implementation).

Images: when the setup carries them (`TraceSetup.images_per_sequence`), each sequence's prompt
holds their tokens and the vision tower runs inside both forwards, joined to the token
embeddings as transformers joins it (`vision.ImageJoin`); its weights, gradients and optimizer
states count like the language model's, and its own part is measured (`vision.measure`).
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch

from ..errors import InputError
from ..memory.components import Category
from ..spec.run import FinetuneMethod, LogitsMode, Optimizer, Precision
from .logprobs import check_traceable, per_token_logps
from .model import build_model
from .optim import OptimizerStep
from .result import TRAINING_REGIONS, PeakMoment, TraceResult, TraceSetup
from .tracker import ACTIVATION_CATEGORIES, Moment, StorageTracker
from .vision import ImageJoin, RealIndexOps, attach, build_tower, image_batch, measure, register_inputs

CLIP_EPSILON = 0.2
"""TRL `epsilon` (and `epsilon_high` default): the PPO clip range."""
NUM_TOP_MODULES = 8
DTYPES = {Precision.bf16_mixed: torch.bfloat16, Precision.bf16: torch.bfloat16, Precision.fp16_mixed: torch.float16}


def grpo_loss(
    logps: torch.Tensor, ref_logps: torch.Tensor | None, advantages: torch.Tensor, completion_mask: torch.Tensor, beta: float,
) -> torch.Tensor:
    """TRL 0.19 `GRPOTrainer._compute_loss` (loss_type "grpo")."""
    old_logps = logps.detach()
    coef_1 = torch.exp(logps - old_logps)
    coef_2 = torch.clamp(coef_1, 1 - CLIP_EPSILON, 1 + CLIP_EPSILON)
    per_token_loss = -torch.min(coef_1 * advantages.unsqueeze(1), coef_2 * advantages.unsqueeze(1))
    if beta != 0.0 and ref_logps is not None:
        per_token_kl = torch.exp(ref_logps - logps) - (ref_logps - logps) - 1
        per_token_loss = per_token_loss + beta * per_token_kl
    return ((per_token_loss * completion_mask).sum(-1) / completion_mask.sum(-1).clamp(min=1.0)).mean()


def _batch(num_sequences: int, seq_len: int, completion_len: int, vocab: int) -> dict[str, torch.Tensor]:
    return {
        "input_ids": torch.randint(0, vocab, (num_sequences, seq_len)),
        "attention_mask": torch.ones(num_sequences, seq_len, dtype=torch.long),
        "completion_mask": torch.ones(num_sequences, completion_len, dtype=torch.long),
        "advantages": torch.zeros(num_sequences, dtype=torch.float32),
        "ref_logps": torch.zeros(num_sequences, completion_len, dtype=torch.float32),
    }


def _peak(tracker: StorageTracker, moment: Moment) -> PeakMoment:
    modules = sorted(tracker.by_module_at(moment.clock).items(), key=lambda kv: -kv[1])[:NUM_TOP_MODULES]
    return PeakMoment(
        region=moment.region, module=moment.module, op=moment.op,
        by_category={c.value: b for c, b in moment.by_category.items() if b},
        top_modules=tuple(modules),
    )


def _check(setup: TraceSetup) -> None:
    check_traceable(LogitsMode(setup.logits))
    if setup.finetune == FinetuneMethod.qlora.value:
        raise InputError("finetune.method", "qlora (bitsandbytes 4-bit kernels) is not traced; trace full or lora")


def forward_end(model: torch.nn.Module, mode: LogitsMode) -> torch.nn.Module:
    """The module whose return ends the training forward: the whole model, or the backbone when
    the tiled head (`chunked_head`) projects its hidden states in the loss."""
    if mode == LogitsMode.chunked_head:
        from .tiled_head import backbone

        return backbone(model)
    return model


def run_trace(config: dict[str, Any], setup: TraceSetup, chunk_rows: int = 2048,
              inspect: Callable[[StorageTracker], None] | None = None) -> TraceResult:
    """Build the model from ``config`` on fake tensors and trace one step of ``setup``
    (``inspect`` receives the tracker afterwards, for tests and debugging)."""
    with warnings.catch_warnings():
        # transformers 5.x renames gradient checkpointing to "activation checkpointing" (v6).
        warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")
        return _run_trace(config, setup, chunk_rows, inspect)


def _run_trace(config: dict[str, Any], setup: TraceSetup, chunk_rows: int,
               inspect: Callable[[StorageTracker], None] | None) -> TraceResult:
    from torch._subclasses.fake_tensor import FakeTensorMode

    _check(setup)
    started = time.perf_counter()
    precision, mode = Precision(setup.precision), LogitsMode(setup.logits)
    fake = FakeTensorMode()
    model = build_model(config, setup.attention, setup.checkpointing, DTYPES[precision], fake, setup.lora)
    join: ImageJoin | None = None
    if setup.images_per_sequence:
        tower = build_tower(config, setup, DTYPES[precision], fake)
        images = {"train": image_batch(tower, setup, setup.num_sequences, fake),
                  "logprob": image_batch(tower, setup, setup.logprob_sequences, fake)}
        join = ImageJoin(tower, _image_token_id(config))
    with fake:
        vocab = model.config.get_text_config().vocab_size
        train = _batch(setup.num_sequences, setup.seq_len, setup.completion_len, vocab)
        probe = _batch(setup.logprob_sequences, setup.seq_len, setup.completion_len, vocab)
        tracker = StorageTracker()
        tracker.model = model
        tracker.register_model(model)
        for t in (*train.values(), *probe.values()):
            tracker.register(t, Category.OTHER, "inputs")
        trained: torch.nn.Module = model
        if join is not None:
            join.tracker = tracker
            tracker.register_model(join)
            register_inputs(tracker, *images.values())
            handles = attach(model, join)
            trained = torch.nn.ModuleList([model, join])
        opt = OptimizerStep(trained, Optimizer(setup.optimizer), precision, tracker, setup.optimizer_implementation)
        opt.setup()
        end_of_forward: dict[str, int] = {}

        def forward_done(module: Any, args: Any, out: Any) -> None:
            tracker.mark("end_of_forward")
            end_of_forward.update(tracker.by_module_at(tracker.clock, ACTIVATION_CATEGORIES))
            tracker.set_region("loss")

        with tracker, (RealIndexOps() if join is not None else contextlib.nullcontext()):
            tracker.set_region("logprob")
            if join is not None:
                join.batch = images["logprob"]
            with torch.no_grad():
                per_token_logps(model, probe["input_ids"], probe["attention_mask"], setup.completion_len, mode, chunk_rows,
                                temperature=setup.logits_temperature)
            tracker.set_region("forward")
            if join is not None:
                join.batch = images["train"]
            hook = forward_end(model, mode).register_forward_hook(forward_done)
            kept: list[torch.Tensor] = []  # held by the trainer until backward ends (OpenRLHF's output)
            logps = per_token_logps(model, train["input_ids"], train["attention_mask"], setup.completion_len, mode, chunk_rows,
                                    kept, temperature=setup.logits_temperature)
            hook.remove()
            loss = grpo_loss(logps, train["ref_logps"], train["advantages"], train["completion_mask"], setup.kl_beta)
            del logps
            tracker.set_region("backward")
            loss.backward()
            del loss
            kept.clear()
            tracker.set_region("optimizer")
            opt.step()
            tracker.set_region("done")
        if join is not None:
            for handle in handles:
                handle.remove()
    if inspect is not None:
        inspect(tracker)
    peaks = tracker.peaks()
    regions = {name: _peak(tracker, p.total) for name, p in peaks.items() if p.total is not None and name not in ("setup", "done")}
    overall = max(regions.values(), key=lambda p: p.total_bytes)
    act = max((peaks[r].activation for r in TRAINING_REGIONS if r in peaks and peaks[r].activation is not None),
              key=lambda m: m.activation_bytes)
    import transformers

    return TraceResult(
        setup=setup, peak=overall, activation_peak=_peak(tracker, act), region_peaks=regions,
        saved_at_end_of_forward=end_of_forward,
        versions={"torch": torch.__version__, "transformers": transformers.__version__},
        seconds=time.perf_counter() - started,
        vision=measure(tracker, setup) if join is not None else None,
    )


def _image_token_id(config: dict[str, Any]) -> int:
    """The placeholder token of an image in the prompt (config.json ``image_token_id``)."""
    for source in (config, config.get("text_config") or {}):
        if isinstance(source.get("image_token_id"), int):
            return source["image_token_id"]
    raise InputError("model", "config.json has no image_token_id; cannot place the image tokens")
