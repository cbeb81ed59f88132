"""Steps and phases from a training job's own log lines.

A line can say which optimizer step the job is on, and which phase of the step it is in.
Patterns, most specific first (the first that matches a line decides):

- oomless's own marks (`[oomless] step 12 phase rollout`), printed by the drop-in callback;
- the HF Trainer's progress bar (TRL, ms-swift, VLM-R1): an unlabelled tqdm bar
  `" 12%|██      | 12/100 [00:30<03:40, ..."`, or ms-swift's `Train:  12%|...| 12/100 [`;
  the second number is the run's step count. Bars with another label (vLLM's
  `Processed prompts:`, `Loading checkpoint shards:`) are not steps;
- verl's metrics line `step:12 - actor/...` (verl/trainer/ppo/ray_trainer.py logs
  `step:{global_steps}` through its console backend at the end of the step), OpenRLHF/HF
  logging dicts `'global_step': 12`: these, like the bar, count finished steps;
- any program's plain `step 12` / `Step: 12/300` / `step=12`.

Phases (the planner's names) from the lines frameworks print when they enter one: vLLM's
`Processed prompts` bar and `generate_sequences` → rollout; `compute_log_prob`, `ref_log_prob`,
`old_log_prob` → logprob; `update_actor`, `update_policy`, `backward` → train;
`Saving model checkpoint`, `save_checkpoint` → save; `sync_weights`, `_move_model_to_vllm` →
weight_sync. A phase lasts until the next phase or step line.

verl has no trainer callback or hook (checked at volcengine/verl b178a3c, 2026-01: `RayPPOTrainer.fit`
is one loop; its phases are `marked_timer` blocks that print nothing); its workers' memory lines
(`GPUMemoryLogger`, "Before update_policy, memory allocated (GB): ...", printed with
`VERL_LOGGING_LEVEL=DEBUG`) name the phase, and the console logger's `step:N` lines the step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SCANNED_CHARS = 2048
"""Characters of a line searched (a progress bar or a marker fits; a dump does not matter)."""


@dataclass(frozen=True)
class LineEvent:
    step: int | None = None
    total_steps: int | None = None
    phase: str | None = None


_MARK = re.compile(r"\[oomless\] step (\d+)(?: phase (\w+))?")
_STEP_PATTERNS = (
    re.compile(r"^\s*(?:\[[^\]]{0,40}\]\s*)?(?:Train:\s*)?\d{1,3}%\|[^|]{0,200}\|\s*(\d+)/(\d+)\s*\["),
    re.compile(r"(?<![\w/])step:(\d+)\b"),
    re.compile(r"'global_step':\s*(\d+)"),
    re.compile(r"(?i)(?<![\w/])(?:global[_ ])?step\b\s*[:=#]?\s*(\d+)(?:\s*/\s*(\d+))?"),
)
AFTER_THE_STEP = (0, 1, 2)
"""Patterns printed when a step has finished (a tqdm bar's count; verl's metrics line, logged
after `global_steps` work and before it is incremented; the HF logging dict)."""
_PHASES = (
    ("save", re.compile(r"Saving model checkpoint|save_checkpoint|Saving checkpoint|saving checkpoint")),
    ("weight_sync", re.compile(r"_move_model_to_vllm|sync_weights|update_weights|broadcast_to_vllm")),
    ("rollout", re.compile(r"Processed prompts:|generate_sequences|Generating rollouts|\brollout\b", re.I)),
    ("logprob", re.compile(r"compute_(?:ref_)?log_prob|old_log_prob|ref_log_prob")),
    ("train", re.compile(r"update_actor|update_policy|\.backward\(|Update policy")),
)


def read_line(line: str) -> LineEvent | None:
    """What one log line says about the step and phase, or None."""
    text = line[:SCANNED_CHARS]
    mark = _MARK.search(text)
    if mark:
        return LineEvent(step=int(mark.group(1)), phase=mark.group(2))
    for index, pattern in enumerate(_STEP_PATTERNS):
        m = pattern.search(text)
        if m:
            groups = m.groups()
            total = int(groups[1]) if len(groups) > 1 and groups[1] else None
            step = int(groups[0])
            if index in AFTER_THE_STEP and (total is None or step < total):
                step += 1  # counts finished steps: the one running is the next
            return LineEvent(step=step, total_steps=total)
    for phase, pattern in _PHASES:
        if pattern.search(text):
            return LineEvent(phase=phase)
    return None
