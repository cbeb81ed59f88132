"""Enumerations of the run spec: the allowed values of its choice fields."""

from __future__ import annotations

from enum import Enum


class FinetuneMethod(str, Enum):
    full = "full"
    lora = "lora"
    qlora = "qlora"


class Precision(str, Enum):
    bf16_mixed = "bf16_mixed"
    """bf16 weights/grads for compute, fp32 master weights in the optimizer (DeepSpeed bf16,
    FSDP MixedPrecision). The ZeRO paper's mixed-precision model states."""
    bf16 = "bf16"
    """Pure bf16: weights, grads and optimizer states all bf16, no master copy
    (EasyR1 `adamw_bf16`, LLaMA-Factory `pure_bf16`)."""
    fp16_mixed = "fp16_mixed"
    """fp16 compute with fp32 master weights and a loss scaler (same bytes as bf16_mixed)."""


class Optimizer(str, Enum):
    adamw = "adamw"
    adamw_8bit = "adamw_8bit"
    adafactor = "adafactor"
    sgd = "sgd"


class OptimizerImplementation(str, Enum):
    """How a torch optimizer's step runs over the parameters (torch.optim `foreach=` / `fused=`)."""

    foreach = "foreach"
    fused = "fused"
    for_loop = "for_loop"


class Strategy(str, Enum):
    ddp = "ddp"
    zero1 = "zero1"
    zero2 = "zero2"
    zero3 = "zero3"
    fsdp = "fsdp"
    """FSDP full shard (FSDP1 FULL_SHARD or FSDP2 fully_shard): params, grads and optimizer
    states sharded like ZeRO-3."""


class LogitsMode(str, Enum):
    full_bf16 = "full_bf16"
    """[tokens, vocab] bf16 logits, log-softmax row by row in bf16 (TRL `selective_log_softmax`,
    used by TRL 0.16 to 1.14 and ms-swift 3.x)."""
    full_fp32 = "full_fp32"
    """[tokens, vocab] logits upcast to fp32 for one log-softmax (transformers < 4.45 `logits.float()`,
    hand-written GRPO/PPO losses)."""
    chunked = "chunked"
    """bf16 logits materialised once, fp32 log-softmax over row chunks (hand-written GRPO losses;
    verl 0.9.1's entropy_from_logits_with_chunking chunks its entropy alone, read as bf16_flash_ce_entropy)."""
    fused = "fused"
    """Liger's fused linear GRPO loss (TRL `use_liger_kernel`): logits exist one sequence at a time."""
    fp32_all_positions = "fp32_all_positions"
    """Every position's logits (the model is called without logits_to_keep), upcast to fp32 and
    kept until backward ends, log-probs by flash-attn's Triton cross-entropy (OpenRLHF 0.7-0.11
    `Actor.forward`, whose output the trainer holds through `backward`)."""
    bf16_all_positions = "bf16_all_positions"
    """Every position's bf16 logits, one `log_softmax` over all of them kept for backward, and a
    second, no-grad one for the entropy whose completion part stays alive (Open-Reasoner-Zero
    `orz/ppo/models.py` Actor.forward, `orz/ppo/actors.py` training_step)."""
    bf16_flash_ce = "bf16_flash_ce"
    """Every position's bf16 logits scaled by the temperature, log-probs by flash-attn's Triton
    cross-entropy writing its gradient into the logits (``inplace_backward``): verl with
    remove-padding when no entropy is computed (0.4-0.8 `workers/actor/dp_actor.py`, 0.9
    `workers/engine/fsdp/transformer_impl.py`; `utils/torch_functional.py` `logprobs_from_logits`),
    EasyR1 with padding_free."""
    bf16_flash_ce_entropy = "bf16_flash_ce_entropy"
    """As bf16_flash_ce with the entropy computed in training (verl `entropy_coeff` ≠ 0 or
    `calculate_entropy`): the cross-entropy's gradient is a separate tensor and the entropy
    (`entropy_from_logits`, torch.compile'd by default) gives one more in backward."""
    fused_token_chunks = "fused_token_chunks"
    """verl `use_fused_kernels` (torch backend): the LM head, log-probs and entropy in chunks of
    512 packed tokens, fp32 work for one chunk at a time and the head's input and weight
    gradients in full (verl/utils/experimental/torch_functional.py `FusedLinearForPPO`)."""
    chunked_head = "chunked_head"
    """TRL >= 1.15 `add_fused_lm_head` (absent in 1.0-1.14 per the wheels): the LM head runs in [4096 positions × 32,768 vocab] tiles
    of one work buffer (trl/kernels/chunked_logprob.py); logits never exist in full."""


class TemperatureScaling(str, Enum):
    """How the trainer applies the sampling temperature to the logits of the `bf16_flash_ce`
    modes before their log-probs (other modes count their own division)."""

    in_place = "in_place"
    """Divided in place (verl 0.4-0.8 `logits_rmpad.div_(temperature)`, dp_actor.py; EasyR1): one
    tensor in the no-grad pass; in training the division's backward makes a second."""
    copy = "copy"
    """A scaled copy beside the raw logits (verl 0.9.0 always, 0.9.1 at a temperature other than 1,
    workers/engine/fsdp/transformer_impl.py `_scale_logits_by_temperature`): two in both passes."""
    none = "none"
    """Not scaled (verl 0.9.1 at temperature 1, the same function returns the logits): one in both
    passes, the cross-entropy's gradient written over them."""


class AttentionImpl(str, Enum):
    sdpa = "sdpa"
    flash_attention_2 = "flash_attention_2"
    eager = "eager"


class RolloutEngine(str, Enum):
    hf = "hf"
    """transformers `generate` inside the training processes (TRL/VLM-R1 use_vllm false)."""
    vllm_colocate = "vllm_colocate"
    """A vLLM engine inside or beside each training process, on the same GPUs."""
    vllm_separate = "vllm_separate"
    """vLLM on its own GPUs (TRL/ms-swift server mode, OpenRLHF without colocation)."""


class LoraSync(str, Enum):
    merge = "merge"
    """The adapters merged into the gathered base weights, which go to the engine (TRL, ms-swift)."""
    adapter = "adapter"
    """The whole model summoned, the adapters sent to the engine unmerged (verl without
    `layered_summon`: `FSDP.summon_full_params(module)`, `collect_lora_params`)."""
    adapter_layers = "adapter_layers"
    """One FSDP unit summoned at a time, the adapters sent unmerged (verl `rollout.layered_summon`:
    `layered_summon_lora_params`)."""


class Algorithm(str, Enum):
    grpo = "grpo"
    """Group-relative advantages, no critic (TRL, ms-swift, verl, EasyR1, VLM-R1)."""
    ppo = "ppo"
    """Actor + critic (value model) + reference (+ reward model) (OpenRLHF, ORZ, verl)."""
    dapo = "dapo"
    """GRPO without KL (no reference model) and with dynamic sampling that over-generates."""
    rloo = "rloo"
    """Leave-one-out baseline: GRPO's memory (no critic)."""


class Role(str, Enum):
    actor = "actor"
    reference = "reference"
    critic = "critic"
    reward = "reward"
    vllm = "vllm"
