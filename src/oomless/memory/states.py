"""Model states of the policy (and reference) per GPU: weights, gradients, optimizer states.

Notation: Ψ = parameters, Ψ_t = trainable parameters, N = data-parallel (shard) degree.
Mixed precision follows the ZeRO paper (Rajbhandari et al. 2020, arXiv 1910.02054, §3.1):
2Ψ bf16 weights + 2Ψ_t bf16 grads + KΨ_t optimizer states with K = 12 for Adam (fp32 master,
m, v). ZeRO-1 shards the optimizer states, ZeRO-2 also the grads, ZeRO-3/FSDP also the
weights. Pure bf16 keeps no master copy and its Adam states in bf16.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from ..catalog.models import ModelArch
from ..spec.run import Finetune, FinetuneMethod, Optimizer, OptimizerImplementation, Precision, Strategy
from . import constants as C
from . import params as P

# --- sharding ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sharding:
    """Which model states are split over the N data-parallel ranks."""

    weights: bool
    grads: bool
    optimizer: bool


SHARDING = {
    Strategy.ddp: Sharding(weights=False, grads=False, optimizer=False),
    Strategy.zero1: Sharding(weights=False, grads=False, optimizer=True),
    Strategy.zero2: Sharding(weights=False, grads=True, optimizer=True),
    Strategy.zero3: Sharding(weights=True, grads=True, optimizer=True),
    Strategy.fsdp: Sharding(weights=True, grads=True, optimizer=True),
}
"""Source: ZeRO paper §5 (P_os, P_os+g, P_os+g+p); PyTorch FSDP FULL_SHARD docs."""


def sharded_bytes(total_bytes: int, sharded: bool, num_shards: int) -> int:
    """Bytes one rank holds of ``total_bytes`` split evenly (rounded up) over ``num_shards``."""
    return math.ceil(total_bytes / num_shards) if sharded else total_bytes


# --- parameter counts ------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)  # pure on a frozen arch (its hash is cached: catalog.arch)
def linear_shapes_with_layer_counts(arch: ModelArch) -> tuple[tuple[P.LinearShape, int], ...]:
    """Every decoder linear shape with the number of layers that have it (dense and MoE
    layers of a model differ)."""
    return tuple(
        (shape, num_layers)
        for kind, num_layers in P.layer_kinds(arch)
        for shape in P.decoder_linear_shapes(arch, kind)
    )


def is_lora_target(name: str, targets: list[str] | str) -> bool:
    """Whether a decoder linear named ``name`` (HF module name) carries a LoRA adapter.

    `all-linear` follows PEFT: every linear layer except the output head; MoE routers are
    excluded too (PEFT skips them when they are not nn.Linear; we assume they are not
    adapted). A list matches on the last name component, as PEFT's target_modules does.
    """
    leaf = name.rsplit(".", 1)[-1]
    if targets == "all-linear":
        return "router" not in name and name not in ("mlp.gate", "gate")
    return leaf in targets or name in targets


def num_lora_parameters(arch: ModelArch, rank: int, targets: list[str] | str) -> int:
    """LoRA adapter parameters: r·(d_in + d_out) per adapted linear (A is r×d_in, B d_out×r).

    Source: Hu et al. 2021, LoRA (arXiv 2106.09685) §4.1; PEFT `LoraLayer.update_layer`.
    Assumes: adapters on decoder linears only (not lm_head/embeddings, PEFT's all-linear).
    """
    return sum(
        rank * (s.in_features + s.out_features) * s.num_per_layer * num_layers
        for s, num_layers in linear_shapes_with_layer_counts(arch)
        if is_lora_target(s.name, targets)
    )


def num_trainable_parameters(arch: ModelArch, finetune: Finetune) -> int:
    """Ψ_t: all parameters for full fine-tuning, the adapters for LoRA/QLoRA."""
    if finetune.method == FinetuneMethod.full:
        return P.num_parameters(arch)
    return num_lora_parameters(arch, finetune.lora_rank, finetune.lora_targets)


def num_quantizable_parameters(arch: ModelArch) -> int:
    """Parameters in decoder linear weights, the ones bitsandbytes quantises for QLoRA.

    Source: transformers `integrations/bitsandbytes.py` replaces nn.Linear modules and keeps
    the output head (and embeddings, norms, biases) in 16 bit.
    """
    return sum(
        s.in_features * s.out_features * s.num_per_layer * num_layers
        for s, num_layers in linear_shapes_with_layer_counts(arch)
    )


# --- bytes per parameter ---------------------------------------------------------------------


def weight_bytes_per_trainable_param(precision: Precision) -> int:
    """Working (compute) copy of a trainable weight: 16-bit in every supported precision."""
    return C.BF16_BYTES


def grad_bytes_per_param(precision: Precision) -> int:
    """Gradients are kept in the compute dtype (bf16/fp16) on the GPU. Source: ZeRO paper §3.1."""
    return C.BF16_BYTES


def master_bytes_per_param(precision: Precision) -> int:
    """fp32 master weights for mixed precision, none for pure bf16. Source: ZeRO paper §3.1."""
    return 0 if precision == Precision.bf16 else C.FP32_BYTES


def optimizer_state_bytes(
    arch: ModelArch, finetune: Finetune, optimizer: Optimizer, precision: Precision, num_trainable: int | None = None
) -> int:
    """Optimizer states (without master weights) for all trainable parameters, unsharded.

    - AdamW: m and v in fp32, or bf16 under pure bf16 (torch keeps states in param dtype).
    - 8-bit AdamW: m and v in int8 plus one fp32 absmax per 2048-value block (bitsandbytes).
    - Adafactor: factored second moment, rows+cols fp32 values per matrix, full for vectors,
      no first moment (transformers Adafactor default beta1=None). Shazeer & Stern 2018
      (arXiv 1804.04235) §3.
    - SGD: no state (torch default momentum=0).
    ``num_trainable`` overrides Ψ_t (a frozen vision tower, a critic's value model).
    """
    if num_trainable is None:
        num_trainable = num_trainable_parameters(arch, finetune)
    state_dtype = C.BF16_BYTES if precision == Precision.bf16 else C.FP32_BYTES
    if optimizer == Optimizer.adamw:
        return num_trainable * C.ADAM_NUM_STATES * state_dtype
    if optimizer == Optimizer.adamw_8bit:
        absmax = math.ceil(num_trainable / C.ADAM_8BIT_BLOCK_SIZE) * C.FP32_BYTES
        return num_trainable * C.ADAM_NUM_STATES * C.INT8_BYTES + C.ADAM_NUM_STATES * absmax
    if optimizer == Optimizer.adafactor:
        return adafactor_state_elements(arch, finetune) * C.FP32_BYTES
    return 0


def largest_trainable_tensor_elements(arch: ModelArch, finetune: Finetune) -> int:
    """Elements of the largest parameter tensor an optimizer steps: the embedding or LM head
    (V×h) or the widest decoder linear in full fine-tuning, the larger LoRA factor (r×in or
    out×r) of a targeted linear under LoRA/QLoRA."""
    shapes = linear_shapes_with_layer_counts(arch)
    if finetune.method != FinetuneMethod.full:
        r = finetune.lora_rank
        return max((max(r * s.in_features, s.out_features * r) for s, _ in shapes
                    if is_lora_target(s.name, finetune.lora_targets)), default=0)
    return max([arch.vocab_size * arch.hidden_size] + [s.in_features * s.out_features for s, _ in shapes])


def optimizer_step_temporary_bytes(optimizer: Optimizer, precision: Precision, implementation: OptimizerImplementation | None,
                                   stepped_elements: int, largest_elements: int) -> int:
    """What torch's AdamW allocates inside `step()` beyond its states, on the GPU.

    - foreach (`_multi_tensor_adamw`): ``exp_avg_sq_sqrt = torch._foreach_sqrt(exp_avg_sqs)``
      makes a new tensor for every parameter of the device/dtype group at once, then divides
      and adds eps in place and feeds it to ``_foreach_addcdiv_``: one copy of the stepped
      parameters in the state dtype.
    - for_loop (`_single_tensor_adamw`): ``(exp_avg_sq.sqrt() / bias_correction2_sqrt)`` one
      parameter at a time, the square root alive until the quotient exists: twice the largest
      parameter.
    - fused (`_fused_adamw_`): one kernel updates in place, nothing.
    Source: torch/optim/adamw.py (torch 2.x; from 2.6 adam.py with decoupled_weight_decay).
    Measured: real TRL 1.16 GRPO steps on an H200 (`optim="adamw_torch"`, foreach), the
    optimizer phase's allocated peak exceeds weights + grads + m + v by one fp32 copy of the
    parameters (0.5B +1.94 GiB, 1.5B +5.88, 3B +11.59; benchmarks/results/gpu/); traced on
    CPU for all three (tests/trace/test_tracker.py).
    Other optimizers (bitsandbytes 8-bit, Adafactor, SGD) are not counted here.
    """
    if optimizer != Optimizer.adamw or implementation in (None, OptimizerImplementation.fused):
        return 0
    state_dtype = C.BF16_BYTES if precision == Precision.bf16 else C.FP32_BYTES
    if implementation == OptimizerImplementation.for_loop:
        return 2 * largest_elements * state_dtype
    return stepped_elements * state_dtype


def autocast_weight_cache_bytes(arch: ModelArch) -> int:
    """bf16 casts torch.autocast keeps of fp32 weights for the rest of the autocast region:
    every decoder linear weight and the LM head (tied or not) by the end of a forward. Only
    leaf tensors that require grad are cached, so a frozen vision tower and frozen bases are
    not; embedding lookups and norms are not autocast ops. Freed when the outermost autocast
    region exits. Source: aten/src/ATen/autocast_mode.cpp (`cached_cast`, `clear_cache`).
    Measured: TRL 1.16 HF generation under AMP on an H200, the rollout's allocated peak over
    weights + Adam states (benchmarks/results/gpu/)."""
    return (num_quantizable_parameters(arch) + arch.vocab_size * arch.hidden_size) * C.BF16_BYTES


def adafactor_state_elements(arch: ModelArch, finetune: Finetune) -> int:
    """Elements of Adafactor's factored second moment: r + c per r×c matrix, n per vector."""
    shapes = linear_shapes_with_layer_counts(arch)
    if finetune.method != FinetuneMethod.full:
        r = finetune.lora_rank
        return sum(
            ((r + s.in_features) + (s.out_features + r)) * s.num_per_layer * n
            for s, n in shapes
            if is_lora_target(s.name, finetune.lora_targets)
        )
    matrices = [(s.out_features, s.in_features, s.num_per_layer * n) for s, n in shapes]
    num_embedding_matrices = 1 if arch.tie_word_embeddings else 2
    matrices.append((arch.vocab_size, arch.hidden_size, num_embedding_matrices))
    matrix_params = sum(r * c * k for r, c, k in matrices)
    vector_params = P.num_parameters(arch) - matrix_params
    return sum((r + c) * k for r, c, k in matrices) + max(vector_params, 0)


# --- per-GPU state terms -----------------------------------------------------------------------


def prequantized_weight_bytes(arch: ModelArch) -> int | None:
    """Bytes of a pre-quantized checkpoint's weights as stored (None when not quantized): its
    decoder linears at the format's bits per weight with scales and zero points
    (``catalog.checkpoint.Quantization.bits_per_weight``), the rest in bf16 — embeddings, norms
    and the LM head stay unquantized in GPTQ/AWQ/bitsandbytes/FP8 checkpoints by default.
    Source: transformers quantizers (``modules_to_not_convert`` defaults: lm_head), AutoGPTQ/AWQ
    QuantLinear layouts."""
    quant = arch.checkpoint.quantization if arch.checkpoint is not None else None
    if quant is None:
        return None
    total, quantized = P.num_parameters(arch), num_quantizable_parameters(arch)
    return math.ceil(quantized * quant.bits_per_weight / 8) + (total - quantized) * C.BF16_BYTES


def frozen_weight_bytes(arch: ModelArch, finetune: Finetune) -> int:
    """Bytes of the frozen base model under LoRA/QLoRA (0 for full fine-tuning), unsharded.

    A pre-quantized checkpoint keeps its stored format (``prequantized_weight_bytes``); else
    QLoRA: decoder linears in NF4 (double quantisation unless `finetune.double_quant` is false), the
    rest in bf16 (QLoRA paper §3).
    """
    if finetune.method == FinetuneMethod.full:
        return 0
    stored = prequantized_weight_bytes(arch)
    if stored is not None:
        return stored
    total = P.num_parameters(arch)
    if finetune.method == FinetuneMethod.lora:
        return total * C.BF16_BYTES
    quantized = num_quantizable_parameters(arch)
    bits = C.NF4_BITS_PER_PARAM_TOTAL if finetune.double_quant else C.NF4_BITS_PER_PARAM + C.NF4_SINGLE_QUANT_OVERHEAD_BITS
    return math.ceil(quantized * bits / 8) + (total - quantized) * C.BF16_BYTES


def policy_weight_bytes(arch: ModelArch, finetune: Finetune, precision: Precision) -> int:
    """All policy weights on one unsharded replica: frozen base + trainable working copy."""
    trainable = num_trainable_parameters(arch, finetune) * weight_bytes_per_trainable_param(precision)
    return frozen_weight_bytes(arch, finetune) + trainable


def fp32_grad_partition_bytes(arch: ModelArch, finetune: Finetune, precision: Precision) -> int:
    """fp32 copy of the gradient partition the optimizer step reads, unsharded.

    DeepSpeed's ZeRO optimizer converts the 16-bit gradient partition to fp32 before the
    step; that is the "4 fp32 grads" in its 18 bytes/param (2 fp16 grads + 4 fp32 grads + 4
    fp32 params + 8 Adam). Source: deepspeed/runtime/zero/stage_1_and_2.py
    (`single_partition_of_fp32_groups[i].grad`), `estimate_zero2_model_states_mem_needs`.
    Assumes: mixed precision; pure bf16 steps on the bf16 grads directly.
    """
    if precision == Precision.bf16:
        return 0
    return num_trainable_parameters(arch, finetune) * C.FP32_BYTES


def zero_paper_model_state_bytes(num_params: int, stage: int, num_shards: int, k: int = C.ZERO_PAPER_MIXED_ADAM_K) -> int:
    """Model states per GPU exactly as the ZeRO paper's Figure 1 / §5.1 formulas.

    Baseline 16Ψ = (2 + 2 + K)Ψ; P_os: 4Ψ + KΨ/N; P_os+g: 2Ψ + (2 + K)Ψ/N; P_os+g+p:
    (2 + 2 + K)Ψ/N. Kept as the published reference the composed terms are tested against.
    """
    weights, grads = C.BF16_BYTES * num_params, C.BF16_BYTES * num_params
    states = k * num_params
    if stage == 0:
        return weights + grads + states
    if stage == 1:
        return weights + grads + states // num_shards
    if stage == 2:
        return weights + (grads + states) // num_shards
    if stage == 3:
        return (weights + grads + states) // num_shards
    raise ValueError(f"ZeRO stage must be 0..3, got {stage}")
