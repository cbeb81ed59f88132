"""The worst batch the run's data can form: `oomless fit` sizes configurations by it.

`lengths.data_max_prompt_tokens` (the data's longest prompt, `oomless plan --data`) below the
prompt limit bounds every batch the run meets, so fit plans each configuration with the limit
lowered to it. The vLLM engine is still built from the configured limits (the frameworks size
`max_model_len` from them, not from the data), so its length is pinned to what the limits give
(`shape.run_shape`'s `limit_seq`). `oomless plan` keeps reporting the limits' worst case beside
its verdict.
"""

from __future__ import annotations

from ..catalog.models import ModelArch
from ..spec.run import RolloutEngine, RunSpec
from . import vision_terms as VT


def data_capped(spec: RunSpec, arch: ModelArch) -> RunSpec:
    ln = spec.lengths
    if ln.data_max_prompt_tokens is None or ln.data_max_prompt_tokens >= ln.max_prompt_tokens or \
            ln.max_prompt_counts_images:  # verl/EasyR1 pad every prompt to max_prompt_length: no cap
        return spec
    update = {"lengths": ln.model_copy(update={"max_prompt_tokens": ln.data_max_prompt_tokens, "data_max_prompt_tokens": None})}
    if spec.rollout.engine != RolloutEngine.hf and spec.rollout.max_model_len is None:
        engine_len = (VT.prompt_tokens_with_images(spec, ln.max_prompt_tokens, VT.image_tokens_per_prompt(spec, arch))
                      + ln.max_completion_tokens)
        update["rollout"] = spec.rollout.model_copy(update={"max_model_len": engine_len})
    return spec.model_copy(update=update)
