"""OpenRLHF's `--use_liger_kernel` (classic flags, 0.8.0–0.10.1) / `--ds.use_liger_kernel`
(dotted flags, 0.10.2–0.11.2): the spec's `liger_kernels`, never a `logits` mode.

What the flag does, per the PyPI wheels (0.8.0, 0.8.11, 0.9.0, 0.9.10, 0.10.0, 0.10.1, 0.11.2):
- `train_ppo_ray.py` declares it (store_true, default false) in every one of them.
- `openrlhf/models/actor.py` `Actor.__init__` then loads the model with liger-kernel's
  `AutoLigerKernelForCausalLM.from_pretrained` instead of `AutoModelForCausalLM`. That calls
  `_apply_liger_kernel(model_type, **kwargs)` with none of the `apply_liger_kernel_to_<type>`
  keywords, so each takes its defaults: rope, rms_norm, swiglu and fused_linear_cross_entropy
  on (liger-kernel 0.8.5 transformers/auto_model.py, monkey_patch.py `apply_liger_kernel_to_llama`).
  The spec's `liger_kernels` is that pair of RMSNorm and SwiGLU kernels (`memory/activation_liger.py`).
- The logits are unchanged: `Actor.forward` calls the model without labels, upcasts
  `output["logits"]` to fp32 and takes `log_probs_from_logits` over them (0.11.2
  models/actor.py, models/utils.py); Liger's patched forward computes logits as usual when
  no labels are given (0.8.5 model/llama.py `lce_forward`: `skip_logits` only in training with
  labels). So no fused loss, and the reader sets no `logits`.
- Roles: the actor (ppo_actor.py `ActorModelRayActor` / `PolicyModelActor`) and the reference
  (trainer/ray/launcher.py `ReferenceModelRayActor` / `ReferenceModelActor`) are both `Actor`s
  built with the flag; the critic and the reward model (`get_llm_for_sequence_regression`,
  models/model.py) never use Liger. The spec's `liger_kernels` is the actor's: the reference's
  Liger load is noted, not planned (it runs no backward, so nothing it keeps for backward changes).
- Vision-language models: from 0.10.0 (the first release that loads them) `Actor.__init__`
  raises ValueError when the flag is set and the model's config has a `vision_config`
  (0.10.0, 0.10.1, 0.11.2 models/actor.py, utils/utils.py `is_vlm_model`).
"""

from __future__ import annotations

from typing import Any

from ...errors import InputError
from .. import common as C

VLM_REFUSAL = ("OpenRLHF refuses it for a vision-language model (models/actor.py from 0.10.0: Liger's "
               "AutoLigerKernelForCausalLM loads causal LMs only)")


def _is_vision_model(model: str) -> bool | None:
    """Whether ``model``'s architecture has a vision tower; None when it cannot be resolved here."""
    from ...catalog.resolve import load_model

    try:
        return load_model(model).vision is not None
    except InputError:
        return None


def read_liger(on: bool, flag: str, model: str, roles: list[str], out: Any) -> None:
    """The spec fields a run's `--use_liger_kernel` sets (``out``: the reader's `Collected`)."""
    if not on:
        return
    if _is_vision_model(model):
        raise InputError(flag, f"{model} is a vision-language model; {VLM_REFUSAL}; allowed: leave the flag out")
    out.set("liger_kernels", True)
    if "reference" in roles:
        out.notes.append(f"{flag} also loads the reference model with Liger's kernels: not planned (it runs no "
                         "backward); the spec's liger_kernels is the actor's")


def liger_flag(spec: Any) -> bool:
    """Whether the written command has `--use_liger_kernel`: the spec's `liger_kernels`; a vision
    model with it cannot be written (`common.cannot_express`, field liger_kernels)."""
    if spec.liger_kernels and _is_vision_model(spec.model):
        C.cannot_express("liger_kernels", f"true cannot be written for {spec.model}: {VLM_REFUSAL}; allowed: false")
        return False
    return bool(spec.liger_kernels)
