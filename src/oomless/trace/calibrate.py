"""Measure a family's activation coefficients and compare traced points with the analytic model.

Each coefficient of `memory.activation_calibration.FamilyCoefficients` is measured on a traced
step of a small config of the family: the bytes a module keeps (or holds at its backward peak)
divided by the elements it covers. Every measurement must come out an integer number of bytes
per element (`CoefficientError` otherwise): a fraction would mean the structure was not
understood, and such a number is not calibrated in.

Used by `scripts/calibrate_activations.py` and `tests/trace/`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from ..catalog.models import ModelArch, arch_from_config
from ..memory.activation_norms import post_norms_only
from ..memory.components import Category
from ..spec.run import AttentionImpl
from .compare import predict, relative_difference, spec_for_setup
from .result import TraceResult, TraceSetup
from .step import run_trace
from .tracker import StorageRecord, StorageTracker

PROBE_CONFIGS: dict[str, dict[str, Any]] = {
    "qwen2": {"model_type": "qwen2", "hidden_size": 128, "intermediate_size": 448, "num_hidden_layers": 3,
              "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 4096, "tie_word_embeddings": True,
              "max_position_embeddings": 4096},
    "llama": {"model_type": "llama", "hidden_size": 128, "intermediate_size": 384, "num_hidden_layers": 3,
              "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 4096, "tie_word_embeddings": False,
              "max_position_embeddings": 4096},
    "mistral": {"model_type": "mistral", "hidden_size": 128, "intermediate_size": 384, "num_hidden_layers": 3,
                "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 4096,
                "sliding_window": None, "tie_word_embeddings": False, "max_position_embeddings": 4096},
    "qwen3": {"model_type": "qwen3", "hidden_size": 128, "intermediate_size": 384, "num_hidden_layers": 3,
              "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 4096,
              "tie_word_embeddings": True, "max_position_embeddings": 4096},
    "qwen3_moe": {"model_type": "qwen3_moe", "hidden_size": 128, "intermediate_size": 384, "moe_intermediate_size": 64,
                  "num_experts": 8, "num_experts_per_tok": 2, "num_hidden_layers": 3, "num_attention_heads": 4,
                  "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 4096, "tie_word_embeddings": False,
                  "max_position_embeddings": 4096},
    "gemma2": {"model_type": "gemma2", "hidden_size": 128, "intermediate_size": 384, "num_hidden_layers": 3,
               "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 4096,
               "max_position_embeddings": 4096, "sliding_window": 64, "query_pre_attn_scalar": 32,
               "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0},
    "phi3": {"model_type": "phi3", "hidden_size": 128, "intermediate_size": 384, "num_hidden_layers": 3,
             "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 4096, "pad_token_id": None,
             "tie_word_embeddings": False, "max_position_embeddings": 4096},
    "olmo2": {"model_type": "olmo2", "hidden_size": 128, "intermediate_size": 384, "num_hidden_layers": 3,
              "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 4096, "pad_token_id": None,
              "tie_word_embeddings": False, "max_position_embeddings": 4096},
    "gpt_neox": {"model_type": "gpt_neox", "hidden_size": 128, "intermediate_size": 512, "num_hidden_layers": 3,
                 "num_attention_heads": 4, "vocab_size": 4096, "rotary_pct": 0.25, "use_parallel_residual": True,
                 "tie_word_embeddings": False, "max_position_embeddings": 4096},
    "starcoder2": {"model_type": "starcoder2", "hidden_size": 128, "intermediate_size": 512, "num_hidden_layers": 3,
                   "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 4096, "sliding_window": None,
                   "tie_word_embeddings": False, "max_position_embeddings": 4096},
    "gemma3_text": {"model_type": "gemma3_text", "hidden_size": 128, "intermediate_size": 384, "num_hidden_layers": 3,
                    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 4096,
                    "max_position_embeddings": 4096, "sliding_window": 64, "sliding_window_pattern": 2,
                    "query_pre_attn_scalar": 32},
}
"""One small config per family (h = 128 so that per-element sizes fill 512-B blocks exactly):
the same modules, norms, attention and MLP code as the family's real models, in seconds."""
PROBE = {"num_sequences": 2, "prompt_len": 96, "completion_len": 32}
"""The probe step the coefficients are read from: s = 128 (a multiple of 16 and 32)."""
NORM_PROBE_TOKENS = 4096


class CoefficientError(AssertionError):
    """A measured coefficient is not an integer number of bytes per element."""


def _exact(total: int, elements: int, what: str) -> int:
    if elements <= 0 or total % elements:
        raise CoefficientError(f"{what}: {total} B over {elements} elements is not an integer")
    return total // elements


def _alive_at_end_of_forward(tracker: StorageTracker) -> list[StorageRecord]:
    clock = tracker.marks["end_of_forward"]
    return [r for r in tracker.alive_at(clock) if r.category in (Category.ACT, Category.TEMP)]


def _norm_backward_peak(norm_class: type, hidden: int) -> int:
    """Bytes per element at the peak of a fresh ``norm_class`` backward over a [tokens, h] bf16
    input, less its output (which the caller would have kept or freed)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    default = torch.get_default_dtype()
    with FakeTensorMode():
        torch.set_default_dtype(torch.bfloat16)
        try:
            norm = norm_class(hidden)
        finally:
            torch.set_default_dtype(default)
        tracker = StorageTracker()
        x = torch.randn(NORM_PROBE_TOKENS, hidden, dtype=torch.bfloat16, requires_grad=True)
        tracker.register(x, Category.OTHER)
        with tracker:
            tracker.set_region("forward")
            y = norm(x)
            grad = torch.ones_like(y)
            tracker.register(grad, Category.OTHER)
            tracker.set_region("backward")
            torch.autograd.grad(y, x, grad)
        peak = tracker.peaks()["backward"].activation
    out_bytes = NORM_PROBE_TOKENS * hidden * 2
    per_token = peak.activation_bytes - out_bytes
    elements = NORM_PROBE_TOKENS * hidden
    return round(per_token / elements)


def measure_coefficients(config: dict[str, Any]) -> dict[str, int]:
    """The family's `FamilyCoefficients`, read from an eager trace of ``config``'s probe step."""
    arch = arch_from_config(config, "probe")
    setup = TraceSetup(model="probe", model_type=arch.text_model_type, logprob_sequences=PROBE["num_sequences"],
                       attention="eager", checkpointing=False, logits="full_bf16", optimizer="sgd",
                       precision="bf16_mixed", kl_beta=0.0, **PROBE)
    box: dict[str, Any] = {}
    run_trace(config, setup, inspect=lambda tr: box.update(tracker=tr))
    alive = _alive_at_end_of_forward(box["tracker"])
    b, s, c = setup.num_sequences, setup.seq_len, setup.completion_len
    h, d, n_h, v = arch.hidden_size, arch.head_dim, arch.num_attention_heads, arch.vocab_size
    layer = next(r.module for r in alive if ".layers.0." in r.module).split(".layers.0.")[0] + ".layers.0"
    norm = f"{layer}.{arch.layer_norm_names[0]}"
    # a pre-norm's bf16 output is kept by the linear after it; a post-norm's feeds an add (OLMo2)
    output = 0 if post_norms_only(arch) else 2
    big = sum(r.num_bytes for r in alive if r.module == norm and r.shape[-1] == h and len(r.shape) == 3)
    weight_copy = sum(r.num_bytes for r in alive if r.module == norm and r.shape == (h,))
    attn = f"{layer}.{arch.attention_module}"
    scores = sum(r.num_bytes for r in alive if r.module == attn and r.shape == (b, n_h, s, s))
    logits = sum(r.num_bytes for r in alive if math.prod(r.shape) == b * (c + 1) * v)
    rotary_dim = int(d * arch.partial_rotary_factor)
    rotary = sum(r.num_bytes for r in alive if r.shape == (1, s, rotary_dim) and r.dtype in ("bfloat16", "float32"))
    decoder = box["tracker"].model.get_decoder()
    final_norm = type(getattr(decoder, "norm", None) or decoder.final_layer_norm)
    return {
        "norm_saved_bytes_per_element": _exact(big, b * s * h, "norm saved") - output,
        "norm_weight_copy_bytes_per_element": _exact(weight_copy, h, "norm weight copy") if weight_copy else 0,
        "norm_backward_peak_bytes_per_element": _norm_backward_peak(final_norm, h),
        "eager_score_saved_bytes": _exact(scores, b * n_h * s * s, "eager scores"),
        "final_logit_softcap_bytes_per_logit": _exact(logits, b * (c + 1) * v, "kept logits") - 2,
        "rotary_tables": _exact(rotary, 2 * 2 * s * rotary_dim, "rotary tables (bf16 pairs)"),
    }


@dataclass(frozen=True)
class Agreement:
    setup: TraceSetup
    traced_bytes: int
    predicted_bytes: int
    predicted_components: dict[str, int]
    trace: TraceResult

    @property
    def relative_difference(self) -> float:
        return relative_difference(self.predicted_bytes, self.traced_bytes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "setup": {**self.setup.__dict__},
            "traced_activation_peak_bytes": self.traced_bytes,
            "predicted_activation_bytes": self.predicted_bytes,
            "predicted_components": dict(self.predicted_components),
            "relative_difference": round(self.relative_difference, 5),
            "peak_moment": {k: v for k, v in self.trace.activation_peak.to_dict().items() if k in ("region", "module", "op")},
            "trace_seconds": round(self.trace.seconds, 2),
        }


def agreement(config: dict[str, Any], setup: TraceSetup, arch: ModelArch | None = None, chunk_rows: int = 2048) -> Agreement:
    """Trace ``setup`` and plan it; the traced training activation peak next to the plan's."""
    arch = arch or arch_from_config(config, setup.model)
    traced = run_trace(config, setup, chunk_rows=chunk_rows)
    predicted = predict(spec_for_setup(setup, chunk_rows), arch)
    return Agreement(setup, traced.activation_peak.activation_bytes, predicted.activation_bytes, predicted.components, traced)


def attention_for(arch: ModelArch, wanted: AttentionImpl) -> AttentionImpl:
    """sdpa cannot run a soft-capped family (transformers raises); such a family is traced eager."""
    return AttentionImpl.eager if wanted == AttentionImpl.sdpa and arch.text_model_type == "gemma2" else wanted

