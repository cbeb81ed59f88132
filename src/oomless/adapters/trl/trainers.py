"""Which TRL trainer a launch runs (GRPO, PPO, RLOO), the releases that have it, and the key
table its config is read with.

The trainer is the one of the script the command starts, as TRL ships them: `trl grpo` and
`trl rloo`; `examples/scripts/ppo/ppo.py` and `ppo_tldr.py` (PPOTrainer); `examples/scripts/
rloo.py`, `rloo_vlm.py`, `trl/scripts/rloo.py` (RLOOTrainer). A script or module whose name
has the word `ppo` or `rloo` (`run_ppo.py`, not `dppo.py`), or that sits in a `ppo/` or `rloo/`
folder, is read as that trainer, every other one as GRPO; a `# oomless: trainer=ppo` directive
says it for a file that does not name its script (a YAML).

Releases, from the PyPI wheels (`data/ppo_key_table.json`, `data/rloo_key_table.json`):
- PPOTrainer: `trl/trainer/ppo_trainer.py` in 0.14–0.28 (from 0.26 a shim that warns and
  subclasses the experimental one), `trl/experimental/ppo/ppo_trainer.py` in 0.26–1.12; the
  1.13.0 wheel has neither, so PPO scripts run TRL 0.14–1.12 (the examples import
  `trl.experimental.ppo` from 0.26: examples/scripts/ppo/ppo.py at v0.26.0).
- RLOOTrainer: `RLOOConfig(OnPolicyConfig)` with `rloo_k`, `sft_model_path`,
  `reward_model_path`, HF generation, up to 0.21 (0.21.0 rloo_config.py); rewritten on GRPO's
  design from 0.22 (0.22.2 rloo_config.py: `RLOOConfig(TrainingArguments)` with
  `num_generations`, `use_vllm`, `beta`). The old one is read like PPO without a value model
  (`ppo.py`), the new one like GRPO with RLOOConfig's keys (`read_rloo_keys`).
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any

from ...errors import InputError
from .. import key_tables as KT
from ..common import version_text

GRPO, PPO, RLOO = "grpo", "ppo", "rloo"
TRAINERS = (GRPO, PPO, RLOO)
CONFIG_CLASS = {GRPO: "GRPOConfig", PPO: "PPOConfig", RLOO: "RLOOConfig"}
PPO_FIRST, PPO_LAST = (0, 14), (1, 12)
"""The releases with a PPOTrainer (the key table's: PPOConfig in every wheel read 0.14.0–1.12.0, none from 1.13.0)."""
RLOO_REWRITTEN, OLD_RLOO_LAST = (0, 22), (0, 21)
"""RLOOConfig on GRPO's design (num_generations, use_vllm) from 0.22.2; OnPolicyConfig (rloo_k) up to 0.21.0."""
PPO_EXAMPLES_PASS_MODEL_KWARGS = (0, 26)
"""examples/scripts/ppo/ppo.py and ppo_tldr.py pass ModelConfig's dtype, attn_implementation and
quantization to from_pretrained from v0.26.0 (trl PR #4630); before, they built them and loaded all
four models with from_pretrained(path, trust_remote_code=...) only (v0.14.0-v0.25.0): fp32 weights,
transformers' default attention, no 4-bit base."""
PPO_PROMPT_FILTER = {"ppo_tldr.py": 512, "rloo_tldr.py": 512}
"""Prompts the example script keeps: ppo_tldr.py drops prompts longer than 512 tokens
(`train_dataset.filter(lambda x: x["lengths"] <= 512)`, v0.14.0 to v1.12.0), as rloo_tldr.py does
(v0.14.0 to v0.21.0); ppo.py and rloo.py keep every prompt (no truncation or filter)."""


def trainer_of(script: str, directive: str | None) -> str:
    """The trainer a launch runs: the `trainer=` directive, else the script's name (module doc)."""
    if directive is not None:
        if directive not in TRAINERS:
            raise InputError("oomless directive trainer", f"{directive!r} is not allowed; allowed: {', '.join(TRAINERS)}")
        return directive
    if script in ("trl grpo", "trl rloo"):
        return script.split()[1]
    path = PurePosixPath(script.replace(".", "/") if not script.endswith(".py") else script)
    words = set(re.split(r"[_\-]", (path.stem if script.endswith(".py") else path.name).lower()))
    for trainer in (PPO, RLOO):
        if trainer in words or path.parent.name.lower() == trainer:
            return trainer
    return GRPO


def key_table(trainer: str) -> KT.KeyTable:
    """The config keys of ``trainer`` per release (GRPOConfig's is `data/key_table.json`)."""
    return KT.load("trl", {GRPO: "key_table.json", PPO: "ppo_key_table.json", RLOO: "rloo_key_table.json"}[trainer])


def check_release(trainer: str, version: tuple[int, ...]) -> None:
    """Refuse a release that has no such trainer."""
    if trainer == PPO and not PPO_FIRST <= tuple(version[:2]) <= PPO_LAST:
        raise InputError("trl version", f"{version_text(version)} has no PPOTrainer (TRL 0.14–1.12 have it; the 1.13.0 "
                         "wheel has no trl/experimental/ppo); allowed: trl==0.14 … 1.12")


def on_policy(trainer: str, version: tuple[int, ...]) -> bool:
    """Whether the run is PPOTrainer's or the old RLOOTrainer's design (`ppo.ppo_spec` reads both)."""
    return trainer == PPO or (trainer == RLOO and version < RLOO_REWRITTEN)


def default_release(trainer: str, latest: tuple[int, ...], config: Any = ()) -> tuple[int, ...]:
    """The release read when no `trl==` directive states one: the newest with the trainer (for
    RLOO with the old trainer's keys, sft_model_path or reward_model_path: 0.21)."""
    if trainer == RLOO and any(name in config for name in OLD_RLOO_KEYS):
        return OLD_RLOO_LAST
    return PPO_LAST if trainer == PPO else latest


def example_script(script: str) -> str:
    """The file name of the script (`ppo_tldr.py`), for the example-specific rules above."""
    return PurePosixPath(script).name


OLD_RLOO_KEYS = ("sft_model_path", "reward_model_path")
"""RLOOConfig(OnPolicyConfig) keys of TRL <= 0.21 that the rewritten RLOOTrainer (0.22+) dropped
(rloo key table: both last in 0.21.0)."""


RLOO_DEPRECATED = {"rloo_k": "num_generations", "kl_coef": "beta", "num_mini_batches": "steps_per_generation",
                   "response_length": "max_completion_length"}
"""Old RLOOConfig names the rewritten one maps onto its own in 0.22–0.24, the old value winning
(0.22.2 rloo_config.py `__post_init__` `_DEPRECATED_PARAMS`: `setattr(self, new_param, old_value)`);
dropped in 0.25 (rloo key table), where they are read with that meaning, noted."""
GRPO_READER_EXTRA = ("padding_free",)
"""Keys the GRPO reader knows that no GRPOConfig in the key table has (padding_free is SFTConfig's:
the reader notes it and plans padded batches)."""


def read_rloo_keys(keys: Any, notes: list[str]) -> None:
    """RLOO (`trl rloo`, rloo*.py) is read as GRPO's design with RLOOConfig's keys and defaults
    (beta 0.05, num_generations 2 in 1.16: rloo key table); ``keys`` is the reader's `Keys`. A
    key of GRPOConfig that RLOOConfig of the release lacks is ignored (RLOOTrainer never reads
    it); keys of the old RLOOTrainer are refused, naming the key."""
    for name in OLD_RLOO_KEYS:
        if name in keys.values and not keys.table.exists_in(name, keys.version):
            raise InputError(name, f"a key of TRL <= 0.21's RLOOTrainer, not of TRL {version_text(keys.version)}'s; "
                             "allowed: trl<=0.21 with it, or the rewritten RLOOConfig (model_name_or_path, num_generations)")
    for name, new_name in RLOO_DEPRECATED.items():
        if name in keys.values:
            keys.values[new_name] = keys.values.pop(name)
            notes.append(f"{name}: read as {new_name} (RLOOConfig's deprecated name in TRL 0.22–0.24)")
    grpo, transformers = key_table(GRPO), KT.transformers_table()
    for name in list(keys.values):
        if (name in grpo or name in GRPO_READER_EXTRA) and name not in transformers \
                and not keys.table.exists_in(name, keys.version):
            keys.ignore(name, f"not an RLOOConfig key in TRL {version_text(keys.version)}: RLOOTrainer does not read it")
            del keys.values[name]
