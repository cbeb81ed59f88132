"""Real training steps on real CPU tensors, measured with the tracer's `StorageTracker`.

Two steps of small random-weight models (bf16 weights, pure bf16 AdamW: `precision: bf16`),
each with two micro-batches per optimizer step (`NUM_MICRO_BATCHES`) and measured on its
*second* optimizer step, so the optimizer states and the first micro-batch's gradients exist
while the second micro-batch runs: the moment the plan's steady-state train phase describes.

- ``plain``: the step `trace/step.py` traces on fake tensors (log-prob pass, training forward
  with ``logits_to_keep = c + 1``, GRPO loss, backward, `torch.optim.AdamW(foreach=False)`).
- ``trl``: a real `trl.GRPOTrainer` step (`use_vllm=False`, `use_cpu=True`): generation with
  transformers `generate`, rewards, the fused LM head's chunked log-prob kernel, backward, the
  HF Trainer's AdamW step. The tokenizer is built locally (`train.tiny` + filler tokens).

Choices that keep the CPU measurement a measurement of the GPU step (Assumes:):
- attention ``eager``: its operators are the same on CPU and GPU; CPU SDPA runs other kernels
  than CUDA's (the tracer's `oomless_sdpa` calls CUDA-only ATen kernels).
- TRL step: positions are selected as on CUDA (`trl.trainer.utils._use_triton` → True, so the
  LM head scores only completion positions, the "compact" path); the kernel's per-tile folds
  run TRL's torch fallback, whose fp32 temporaries are [positions, vocab] — negligible with the
  small tokenizer vocabulary (they would not be with a real one: Known limitation).
- TRL's chunk width is TRL's own (32,768), whatever `oomless train` patched in this process.

Measured quantity: the largest live PARAM + BUFFER + GRAD + OPT + ACT + TEMP (every tensor
but OTHER: inputs, rollout outputs) during forward, loss and backward of the second step.

Known limitations: CPU tensors only (no CUDA context, allocator fragmentation, cuBLAS
workspaces); SDPA/flash attention and TRL's Triton tiles are not run for real; the TRL step's
vocabulary is small (64), so its vocabulary-sized terms (the fp32 weight gradient of the LM
head) are checked only by hand-derived tests; one process, no vLLM, no KL reference model.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from ..memory.components import Category
from .logprobs import per_token_logps
from .model import hf_config, mark_checkpointed_layers
from .step import grpo_loss
from .tracker import StorageTracker

TRAINING_REGIONS = ("forward", "loss", "backward")
MEASURED_CATEGORIES = (Category.PARAM, Category.BUFFER, Category.GRAD, Category.OPT, Category.ACT, Category.TEMP)
LEARNING_RATE = 1e-6
NUM_MICRO_BATCHES = 2
"""Micro-batches per optimizer step (gradient accumulation): the second one's forward and
backward run with the first one's gradients resident, the moment the plan's train phase
describes (weights + optimizer states + gradients + one micro-batch's work)."""
TRL_CHUNK_SIZE = 32768
"""trl 1.16.0 `trl/trainer/utils.py::_CHUNKED_LOGPROB_CHUNK_SIZE`."""


class RealStepTracker(StorageTracker):
    """The tracer's tracker, with tensors made outside the training step (rollout, data
    collation, set-up) filed as OTHER instead of ACT."""

    def _category_now(self) -> Category:
        if self.region in ("setup", "rollout", "done"):
            return Category.OTHER
        return super()._category_now()

    def training_peak(self, regions: tuple[str, ...] = TRAINING_REGIONS) -> dict[str, int]:
        """By category, the live bytes at the moment of the largest MEASURED_CATEGORIES total
        among allocations made in ``regions``."""
        live: dict[Category, int] = dict.fromkeys(Category, 0)
        best: dict[Category, int] = {}
        best_total = -1
        for _, sign, r in self.timeline():
            live[r.category] += sign * r.num_bytes
            if sign > 0 and r.region in regions:
                total = sum(live[c] for c in MEASURED_CATEGORIES)
                if total > best_total:
                    best_total, best = total, dict(live)
        return {c.value: best.get(c, 0) for c in MEASURED_CATEGORIES}


@dataclass(frozen=True)
class RealSetup:
    kind: str
    """``plain`` or ``trl``."""
    family: str
    config: dict[str, Any]
    num_sequences: int
    prompt_len: int
    completion_len: int
    checkpointing: bool
    logits: str
    attention: str = "eager"
    precision: str = "bf16"
    optimizer: str = "adamw"
    kl_beta: float = 0.0


@dataclass
class Measurement:
    setup: RealSetup
    peak_by_category: dict[str, int]
    num_parameters: int
    seconds: float
    versions: dict[str, str] = field(default_factory=dict)

    @property
    def peak_bytes(self) -> int:
        return sum(self.peak_by_category.values())


def _versions() -> dict[str, str]:
    import transformers

    out = {"torch": torch.__version__, "transformers": transformers.__version__}
    with contextlib.suppress(ImportError):
        import trl

        out["trl"] = trl.__version__
    return out


def build_real_model(setup: RealSetup, seed: int = 0) -> torch.nn.Module:
    """Random weights in bf16, eager attention, checkpointing as TRL/HF Trainer enable it."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(hf_config(setup.config, setup.attention), dtype=torch.bfloat16,
                                             attn_implementation=setup.attention)
    model.train()
    if setup.checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        mark_checkpointed_layers(model)
    return model


# --- the plain step -------------------------------------------------------------------------------

def _plain_batch(setup: RealSetup, vocab: int) -> dict[str, torch.Tensor]:
    b, s, c = setup.num_sequences, setup.prompt_len + setup.completion_len, setup.completion_len
    return {
        "input_ids": torch.randint(0, vocab, (b, s)),
        "attention_mask": torch.ones(b, s, dtype=torch.long),
        "completion_mask": torch.ones(b, c, dtype=torch.long),
        "advantages": torch.randn(b, dtype=torch.float32),
        "ref_logps": torch.zeros(b, c, dtype=torch.float32),
    }


def _plain_step(model: torch.nn.Module, opt: torch.optim.Optimizer, batch: dict[str, torch.Tensor], setup: RealSetup,
                tracker: StorageTracker | None) -> None:
    from ..spec.run import LogitsMode

    mode, c = LogitsMode(setup.logits), setup.completion_len

    def region(name: str) -> None:
        if tracker is not None:
            tracker.set_region(name)

    region("logprob")
    with torch.no_grad():
        per_token_logps(model, batch["input_ids"], batch["attention_mask"], c, mode, chunk_rows=2048)
    for _ in range(NUM_MICRO_BATCHES):
        region("forward")
        logps = per_token_logps(model, batch["input_ids"], batch["attention_mask"], c, mode, chunk_rows=2048)
        region("loss")
        loss = grpo_loss(logps, batch["ref_logps"], batch["advantages"], batch["completion_mask"], setup.kl_beta)
        loss = loss / NUM_MICRO_BATCHES
        del logps
        region("backward")
        loss.backward()
        del loss
    region("optimizer")
    opt.step()
    opt.zero_grad(set_to_none=True)
    region("done")


def measure_plain_step(setup: RealSetup) -> Measurement:
    """One untracked step (creates AdamW's states), then the measured step."""
    started = time.perf_counter()
    model = build_real_model(setup)
    vocab = model.config.vocab_size
    opt = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, foreach=False, fused=False)
    _plain_step(model, opt, _plain_batch(setup, vocab), setup, None)
    batch = _plain_batch(setup, vocab)
    tracker = RealStepTracker()
    tracker.register_model(model)
    _register_optimizer_states(tracker, opt)
    for t in batch.values():
        tracker.register(t, Category.OTHER, "inputs")
    with tracker:
        _plain_step(model, opt, batch, setup, tracker)
    return Measurement(setup, tracker.training_peak(), _num_parameters(model), time.perf_counter() - started, _versions())


def _register_optimizer_states(tracker: StorageTracker, opt: torch.optim.Optimizer) -> None:
    for state in opt.state.values():
        for name, value in state.items():
            if isinstance(value, torch.Tensor) and not (name == "step" and value.dim() == 0):
                tracker.register(value, Category.OPT, "optimizer_states")


def _num_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


# --- the TRL step ---------------------------------------------------------------------------------

FILLER_PREFIX = "<t"


def build_tokenizer(vocab_size: int) -> Any:
    """`train.tiny`'s character tokenizer, padded with filler tokens to ``vocab_size``."""
    from ..train.tiny import build_tokenizer as tiny_tokenizer

    tok = tiny_tokenizer()
    fillers = [f"{FILLER_PREFIX}{i}>" for i in range(vocab_size - len(tok))]
    if fillers:
        tok.add_tokens(fillers)
    assert len(tok) == vocab_size, (len(tok), vocab_size)
    return tok


@contextlib.contextmanager
def _trl_as_on_cuda() -> Iterator[None]:
    """Compact position selection as on CUDA; TRL's own chunk width."""
    import trl.trainer.utils as trl_utils

    saved = trl_utils._use_triton, trl_utils._CHUNKED_LOGPROB_CHUNK_SIZE
    trl_utils._use_triton = lambda device: True
    trl_utils._CHUNKED_LOGPROB_CHUNK_SIZE = TRL_CHUNK_SIZE
    try:
        yield
    finally:
        trl_utils._use_triton, trl_utils._CHUNKED_LOGPROB_CHUNK_SIZE = saved


def _reward_length(completions: list[Any], **_: Any) -> list[float]:
    return [float(len(str(c))) for c in completions]


def measure_trl_step(setup: RealSetup) -> Measurement:
    """Two steps of `trl.GRPOTrainer`; the second is measured (tracker entered at its start)."""
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    started = time.perf_counter()
    model = build_real_model(setup)
    tokenizer = build_tokenizer(model.config.vocab_size)
    model.config.pad_token_id = model.generation_config.pad_token_id = tokenizer.pad_token_id
    b = setup.num_sequences
    prompt = ("12+34=" * setup.prompt_len)[: setup.prompt_len]
    dataset = Dataset.from_dict({"prompt": [prompt] * (4 * NUM_MICRO_BATCHES * b)})
    tracker = RealStepTracker()

    class Regions(TrainerCallback):
        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if state.global_step == 1:
                tracker.register_model(trainer.model)
                _register_optimizer_states(tracker, trainer.optimizer)
                if setup.checkpointing:
                    mark_checkpointed_layers(trainer.model)
                tracker.set_region("rollout")
                tracker.__enter__()

        def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            tracker.set_region("optimizer")

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if state.global_step == 2:
                tracker.set_region("done")
                tracker.__exit__(None, None, None)

    with tempfile.TemporaryDirectory() as out, warnings.catch_warnings(), _trl_as_on_cuda():
        warnings.simplefilter("ignore")
        config = GRPOConfig(
            output_dir=out, max_steps=2, learning_rate=LEARNING_RATE, per_device_train_batch_size=b,
            gradient_accumulation_steps=NUM_MICRO_BATCHES, steps_per_generation=NUM_MICRO_BATCHES, num_generations=b,
            generation_kwargs={"min_new_tokens": setup.completion_len},
            max_completion_length=setup.completion_len, beta=setup.kl_beta, temperature=1.0,
            gradient_checkpointing=setup.checkpointing,
            gradient_checkpointing_kwargs={"use_reentrant": False} if setup.checkpointing else None,
            optim="adamw_torch", bf16=False, fp16=False, use_cpu=True, use_vllm=False, report_to="none",
            disable_tqdm=True, save_strategy="no", logging_steps=1, dataloader_num_workers=0, seed=0,
        )
        trainer = GRPOTrainer(model=model, reward_funcs=_reward_length, args=config, train_dataset=dataset,
                              processing_class=tokenizer, callbacks=[Regions()])
        _wrap_regions(trainer, tracker)
        trainer.train()
    return Measurement(setup, tracker.training_peak(), _num_parameters(model), time.perf_counter() - started, _versions())


def _wrap_regions(trainer: Any, tracker: StorageTracker) -> None:
    """Rollout in `_prepare_inputs`, forward + loss in `compute_loss`, then backward."""
    prepare, compute_loss = trainer._prepare_inputs, trainer.compute_loss

    def prepare_inputs(*args: Any, **kwargs: Any) -> Any:
        tracker.set_region("rollout")
        out = prepare(*args, **kwargs)
        tracker.set_region("forward")
        return out

    def loss(*args: Any, **kwargs: Any) -> Any:
        tracker.set_region("forward")
        out = compute_loss(*args, **kwargs)
        tracker.set_region("backward")
        return out

    trainer._prepare_inputs, trainer.compute_loss = prepare_inputs, loss


def measure(setup: RealSetup) -> Measurement:
    return measure_plain_step(setup) if setup.kind == "plain" else measure_trl_step(setup)


# --- the validated cases ----------------------------------------------------------------------------

QWEN2_CONFIG: dict[str, Any] = {
    "model_type": "qwen2", "hidden_size": 512, "intermediate_size": 1792, "num_hidden_layers": 6,
    "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 16384, "tie_word_embeddings": True,
    "max_position_embeddings": 4096,
}
"""Qwen2.5-shaped: GQA 8:2, q/k/v biases, tied embeddings (29 M parameters)."""
LLAMA_CONFIG: dict[str, Any] = {
    "model_type": "llama", "hidden_size": 512, "intermediate_size": 1408, "num_hidden_layers": 8,
    "num_attention_heads": 8, "num_key_value_heads": 8, "vocab_size": 8192, "tie_word_embeddings": False,
    "max_position_embeddings": 4096,
}
"""Llama-shaped: full multi-head attention, untied LM head (34 M parameters)."""
TRL_VOCAB_SIZE = 64
"""The TRL step's vocabulary: the locally built tokenizer's (keeps TRL's CPU tile fallback,
whose fp32 temporaries are [positions, vocab], negligible; the work buffer is 32,768 wide anyway)."""
FAMILIES = {"qwen2": QWEN2_CONFIG, "llama": LLAMA_CONFIG}
PLAIN_SHAPE = (2, 96, 32)
"""(sequences per micro-batch, prompt tokens, completion tokens) of the plain step."""
TRL_SHAPE = (4, 96, 32)


def validation_cases() -> list[RealSetup]:
    """Every case `scripts/validate_real.py` measures: both families, both steps, with and
    without gradient checkpointing."""
    out = []
    for family, config in FAMILIES.items():
        for gc in (False, True):
            b, p, c = PLAIN_SHAPE
            out.append(RealSetup("plain", family, config, b, p, c, gc, "full_bf16"))
            b, p, c = TRL_SHAPE
            out.append(RealSetup("trl", family, {**config, "vocab_size": TRL_VOCAB_SIZE}, b, p, c, gc, "chunked_head"))
    return out
