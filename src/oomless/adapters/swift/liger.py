"""ms-swift's `--use_liger_kernel`: which of the spec's `liger_kernels` (Liger's RMSNorm/SwiGLU/
RoPE model kernels) and `logits: fused` (Liger's fused GRPO loss) it switches, per release, and
which pairs the writer can say.

- The model kernels: `use_liger_kernel` is transformers' TrainingArguments key (ms-swift's
  `TrainArgumentsMixin`, swift/trainers/arguments.py), so transformers' `Trainer.__init__`
  calls liger's `_apply_liger_kernel_to_instance` on the model, in every release read
  (3.2–4.x); ms-swift's PPOTrainer reaches `Trainer.__init__` too, through `SwiftMixin`
  (v3.8.0 swift/trainers/rlhf_trainer/ppo_trainer.py).
- The fused loss: GRPOTrainer (RLOO is its `advantage_estimator`) sets
  `self.use_liger_loss = self.args.use_liger_kernel` and builds `LigerFusedLinearGRPOLoss` from
  3.5 (v3.5.0 and v3.8.0 swift/trainers/rlhf_trainer/grpo_trainer.py, v4.0.0
  swift/rlhf_trainers/grpo_trainer.py); v3.2.0–v3.4.1.post1's grpo_trainer.py has no Liger
  loss, and PPO never has one.
- No other `logits` mode can be written: GRPO's log-probs are TRL's `selective_log_softmax` over
  the model's whole [tokens, vocab] logits in the model's dtype (v3.2.0, v3.4.1, v3.8.0, v3.12.0
  swift/trainers/rlhf_trainer/grpo_trainer.py `_get_per_token_logps`; v4.0.0 and v4.6.0
  swift/rlhf_trainers/grpo_trainer.py); PPO subclasses TRL's PPOTrainer (v4.6.0
  swift/rlhf_trainers/ppo_trainer.py), whose log-probs are the same function (TRL 0.26.0 and
  1.12 trl/experimental/ppo/ppo_trainer.py). No release read has a chunked or tiled log-prob option:
  the `chunk` code there splits samples (`_compute_loss_chunked`, steps_per_generation), the
  batch rows of `entropy_from_logits` or a KL sum, never the vocabulary log-softmax. So
  `chunked`, `chunked_head` and `full_fp32` are refused (field `logits`): written, the script
  would read back as `full_bf16`.
"""

from __future__ import annotations

from typing import Any

from ..common import version_text

LOSS_FROM = (3, 5)
"""ms-swift's GRPOTrainer uses Liger's fused GRPO loss under --use_liger_kernel from 3.5.0."""


def _has_loss(version: tuple[int, ...], ppo: bool) -> bool:
    return not ppo and version >= LOSS_FROM


def liger_fields(use_liger_kernel: bool, version: tuple[int, ...], ppo: bool) -> dict[str, Any]:
    """The spec fields `--use_liger_kernel` sets in ms-swift ``version`` (PPO or GRPO/RLOO)."""
    if not use_liger_kernel:
        return {}
    return {"liger_kernels": True, **({"logits": "fused"} if _has_loss(version, ppo) else {})}


def sayable_logits(version: tuple[int, ...], ppo: bool) -> tuple[str, ...]:
    """The `logits` modes a script of ms-swift ``version`` reads back as (module docstring)."""
    return ("full_bf16", "fused") if _has_loss(version, ppo) else ("full_bf16",)


def unsayable(spec: Any, version: tuple[int, ...]) -> tuple[str, str] | None:
    """(field, why) when no ms-swift flags read back as the spec's `logits` and `liger_kernels`; else None."""
    fused, kernels, ppo = spec.logits.value == "fused", spec.liger_kernels, spec.algorithm.value == "ppo"
    release = f"ms-swift {version_text(version)}{' PPO' if ppo else ''}"
    if spec.logits.value not in ("full_bf16", "fused"):
        return "logits", (f"{spec.logits.value!r} cannot be written for {release}: its log-probs are TRL's "
                          "selective_log_softmax over the whole logits, with no chunked option; allowed: "
                          + ", ".join(sayable_logits(version, ppo)))
    if fused and not _has_loss(version, ppo):
        return "logits", (f"'fused' cannot be written for {release}: its --use_liger_kernel has no fused loss "
                          f"(GRPO's Liger loss is in ms-swift >= {version_text(LOSS_FROM)})")
    if _has_loss(version, ppo) and kernels != fused:
        if kernels:
            return "liger_kernels", ("liger_kernels without logits: fused (--use_liger_kernel applies Liger's model "
                                     f"kernels and its fused loss together in {release})")
        return "liger_kernels", (f"False cannot be written with logits: fused for {release}: --use_liger_kernel "
                                 "applies Liger's model kernels with its fused loss (set liger_kernels: true)")
    return None


def liger_flags(spec: Any) -> list[tuple[str, str]]:
    """`--use_liger_kernel true` where the spec has either of the pair (`unsayable` checked first)."""
    return [("use_liger_kernel", "true")] if spec.liger_kernels or spec.logits.value == "fused" else []
