"""What changes across TRL releases 0.14 … 1.x that the reader plans by: defaults (from the
generated key tables, never hand-written), and the behaviours the planner needs, each with the
release that changed it and the file it was read from (the PyPI wheels of those releases).

- `per_device_train_batch_size` counts prompts in TRL 0.14 (each prompt's `num_generations`
  completions are generated and scored in one batch: `torch.repeat_interleave(prompt_ids,
  num_generations)` in 0.14.0 grpo_trainer.py `compute_loss`); from 0.15 it counts completions
  (`RepeatRandomSampler`, 0.15.2 grpo_trainer.py).
- The generation-batch rule (`generation_batch_rule`): none in 0.14; 0.15–0.16 per device batch ×
  processes must be divisible by num_generations (0.16.1 grpo_trainer.py `global_batch_size`);
  0.17 × gradient_accumulation_steps (0.17.0 grpo_trainer.py `effective_batch_size`); from 0.18
  the generation batch per device batch × processes × steps_per_generation (default
  gradient_accumulation_steps; 0.18.2 and 0.19.1 grpo_config.py `__post_init__`).
- vLLM: 0.14–0.15 one engine in the main process on `vllm_device` (0.15.2 grpo_trainer.py: "auto"
  is `cuda:{num_processes}`, or cuda:0 on a one-GPU machine); 0.16–0.17 only a `trl vllm-serve`
  server (0.16.1 grpo_config.py: `vllm_device`, `vllm_gpu_memory_utilization` deprecated, the
  trainer is a `VLLMClient`); from 0.18 `vllm_mode` (default per the key table: server until
  0.29, colocate from 1.0).
- Colocated engine: `max_num_seqs` = per device batch × TP × gradient_accumulation_steps up to
  0.19 (0.18.2, 0.19.1 grpo_trainer.py), × steps_per_generation from 0.23 (0.23.1); 0.20–0.22 are
  taken as 0.23. `max_num_batched_tokens=4096` from 0.19 (absent in 0.18.2: vLLM's default).
  `max_model_len` = max_prompt_length + max_completion_length before 0.26 (0.18.2, 0.23.1), then
  `vllm_max_model_length`. Sleep level 1 in 0.23–0.24 (0.24.0 `self.llm.sleep(level=1)`), 2 from
  0.25 (0.25.1).
- Log-probs: full logits through the LM head, log-softmax row by row in the model dtype, up to
  1.14 (0.14.0 `get_per_token_logps`, `selective_log_softmax` from 0.16); from 1.15 the tiled LM
  head `add_fused_lm_head` (1.15.0 grpo_trainer.py; absent in 1.14.0's).
- bf16: GRPOConfig defaults it (None → not fp16) from 0.19 (key table); before, TrainingArguments'
  False applies unless accelerate's mixed precision sets bf16.
"""

from __future__ import annotations

from typing import Any

from .. import key_tables as KT
from ..common import version_text

MIN_VERSION, MAX_VERSION, LATEST = (0, 14), (2,), (1, 16)
SUPPORTED_VERSIONS = ">=0.14,<2"
COMPLETIONS_PER_DEVICE_BATCH = (0, 15)
GENERATION_BATCH_WITH_ACCUMULATION = (0, 17)
GENERATION_BATCH_WITH_STEPS = (0, 18)
ENGINE_ON_VLLM_DEVICE_UNTIL = (0, 16)
SERVER_ONLY_UNTIL = (0, 18)
MAX_NUM_SEQS_WITH_STEPS = (0, 20)
COLOCATE_BATCHED_TOKENS_FROM = (0, 19)
VLLM_MAX_MODEL_LENGTH_FROM = (0, 26)
SLEEP_LEVEL_2_FROM = (0, 25)
CHUNKED_HEAD_FROM = (1, 15)
BF16_DEFAULTED_FROM = (0, 19)


def table_release(version: tuple[int, ...], table: KT.KeyTable | None = None) -> str:
    """The release of the TRL key table (GRPO's unless ``table``) read for ``version``: the one of
    its minor version, else the newest one before it (a release beyond the table counts as the newest)."""
    table = table or KT.load("trl")
    at = tuple(version[:2])
    candidates = [v for v in table.versions if KT.minor(v) <= at]
    return candidates[-1] if candidates else table.versions[0]


def default(key: str, version: tuple[int, ...], fallback: Any = None, table: KT.KeyTable | None = None) -> Any:
    """The default of ``key`` in TRL ``version``: the trainer's config class's and ModelConfig's
    (``table``, else GRPOConfig's key table) where that release has the key, else
    TrainingArguments' (transformers key table), else ``fallback``."""
    table = table or KT.load("trl")
    if key in table and table.exists_in(key, version):
        value = table.default(key, table_release(version, table))
        return fallback if value is KT.NO_DEFAULT else value
    transformers = KT.transformers_table()
    if key in transformers:
        value = transformers.default(key)
        return fallback if value is KT.NO_DEFAULT else value
    return fallback


def generation_batch_rule(version: tuple[int, ...], micro: int, world: int, accumulation: int,
                          steps: int | None) -> tuple[int, str] | None:
    """(the number TRL ``version`` requires num_generations to divide, how it is formed), or None
    where the release checks nothing (0.14)."""
    if version < COMPLETIONS_PER_DEVICE_BATCH:
        return None
    if version < GENERATION_BATCH_WITH_ACCUMULATION:
        return micro * world, f"per_device_train_batch_size {micro} × processes {world}"
    if version < GENERATION_BATCH_WITH_STEPS:
        return (micro * world * accumulation,
                f"per_device_train_batch_size {micro} × processes {world} × gradient_accumulation_steps {accumulation}")
    return (micro * world * (steps or accumulation), f"per_device_train_batch_size {micro} × processes {world} × "
            + (f"steps_per_generation {steps}" if steps else f"gradient_accumulation_steps {accumulation}"))


def vllm_placement(version: tuple[int, ...]) -> str:
    """How TRL ``version`` runs vLLM: "device" (0.14–0.15), "server" (0.16–0.17), "mode" (vllm_mode)."""
    if version < ENGINE_ON_VLLM_DEVICE_UNTIL:
        return "device"
    return "server" if version < SERVER_ONLY_UNTIL else "mode"


def stated_vllm(rollout: dict[str, Any], vllm: tuple[int, ...], trl_version: tuple[int, ...]) -> None:
    """The vLLM release a directive names, and the request size TRL sends it: `n=num_generations`
    to the in-process engine of 0.14 and to a server (0.16+: `vllm_client.generate(..., n=...)`),
    n=1 to the engine of 0.15 (SamplingParams without n) and every colocated engine (0.18+:
    "vLLM on each GPU generates only 1"). Source: trl v0.14.0-v0.18.0 grpo_trainer.py."""
    if rollout["engine"] == "hf":
        return
    rollout["vllm_version"] = version_text(vllm)
    if rollout["engine"] == "vllm_colocate" or (0, 15) <= trl_version < (0, 16):
        rollout["samples_per_request"] = 1
