"""Shared test helpers: build specs from small dicts, plan them, find shipped examples."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from oomless.planner.plan import Plan, make_plan
from oomless.spec.load import parse_spec, resolve

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

BASE_SPEC: dict[str, Any] = {
    "model": "Qwen/Qwen2.5-1.5B-Instruct",
    "hardware": {"gpu": "A100-80GB", "gpus_per_node": 4, "host_ram_gib": 512},
    "finetune": {"method": "full"},
    "distribution": {"strategy": "zero3"},
    "batch": {"micro_batch_size": 2, "gradient_accumulation_steps": 4},
    "lengths": {"max_prompt_tokens": 512, "max_completion_tokens": 512},
    "rollout": {"engine": "vllm_colocate", "gpu_memory_utilization": 0.4, "sleep_level": 1},
}


def merged(base: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    """``base`` with dotted-path overrides, e.g. merged(BASE_SPEC, **{"batch.micro_batch_size": 4})."""
    out = copy.deepcopy(base)
    for dotted, value in overrides.items():
        node = out
        *parents, leaf = dotted.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return out


def plan_of(data: dict[str, Any]) -> Plan:
    run = resolve(parse_spec(data))
    return make_plan(run.spec, run.arch, run.gpu, run.archs)


def phase_peak(plan: Plan, phase: str, role: str = "train") -> int:
    group = next(g for g in plan.devices if g.role == role)
    return next(p.peak_bytes for p in group.phases if p.name == phase)


def component(plan: Plan, phase: str, name: str, role: str = "train") -> int:
    group = next(g for g in plan.devices if g.role == role)
    ph = next(p for p in group.phases if p.name == phase)
    return sum(c.num_bytes for c in ph.components if c.name == name)

TINY_CONFIG: dict[str, Any] = {
    "model_type": "qwen2", "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 2,
    "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 32,
    "tie_word_embeddings": False, "max_position_embeddings": 64,
}
"""h=8, I=16, L=2, 2 heads of head_dim 4, 1 KV head, V=32, q/k/v bias (Qwen2): 1736 params
(hand count in tests/memory/test_params.py)."""
