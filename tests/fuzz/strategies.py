"""Generators for the fuzz suite (issue 15): valid run specs across the whole spec surface,
malformed specs made from them, and mutations of text files (scripts, configs, logs).

The number of examples per test comes from `OOMLESS_FUZZ_EXAMPLES` (default: the CI slice);
`docs/fuzz.md` gives the long run's command and what it found.
"""

from __future__ import annotations

import copy
import os
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from oomless.catalog.gpus import gpu_ids
from oomless.catalog.resolve import catalog_ids

CI_EXAMPLES = 40
"""Examples per property in CI; the whole fuzz folder stays under ~60 s on 2 cores."""


def fuzz_settings(ci_examples: int = CI_EXAMPLES) -> settings:
    examples = int(os.environ.get("OOMLESS_FUZZ_EXAMPLES", ci_examples))
    return settings(max_examples=examples, deadline=None, derandomize="OOMLESS_FUZZ_EXAMPLES" not in os.environ,
                    suppress_health_check=list(HealthCheck))


MODELS = sorted(catalog_ids())
GPUS = sorted(gpu_ids())

ENUMS: dict[str, list[Any]] = {
    "algorithm": ["grpo", "ppo", "dapo", "rloo"],
    "finetune.method": ["full", "lora", "qlora"],
    "precision": ["bf16_mixed", "bf16", "fp16_mixed"],
    "optimizer": ["adamw", "adamw_8bit", "adafactor", "sgd"],
    "distribution.strategy": ["ddp", "zero1", "zero2", "zero3", "fsdp"],
    "attention": ["sdpa", "flash_attention_2", "eager"],
    "logits": ["full_bf16", "full_fp32", "chunked", "fused", "chunked_head", "bf16_flash_ce", "bf16_flash_ce_entropy",
               "fused_token_chunks"],
    "logits_temperature": ["in_place", "copy", "none"],
}


@st.composite
def valid_specs(draw: st.DrawFn, models: list[str] | None = None) -> dict[str, Any]:
    """A spec over every section: any catalog model and GPU, strategies, offloads, LoRA,
    rollout engines and their knobs, vision, Ray, PPO. Most are valid; the cross-field rules
    of the spec may still refuse some (which the tests accept as an InputError)."""
    gpus_per_node = draw(st.sampled_from([1, 2, 4, 8]))
    engine = draw(st.sampled_from(["hf", "vllm_colocate", "vllm_separate"]))
    spec: dict[str, Any] = {
        "model": draw(st.sampled_from(models or MODELS)),
        "hardware": {"gpu": draw(st.sampled_from(GPUS)), "gpus_per_node": gpus_per_node,
                     "num_nodes": draw(st.sampled_from([1, 1, 2, 4])),
                     "host_ram_gib": draw(st.sampled_from([None, 64.0, 256.0, 1024.0, 2048.0]))},
        "gradient_checkpointing": draw(st.booleans()),
        "kl_beta": draw(st.sampled_from([0.0, 0.001, 0.04])),
        "finetune": {"lora_rank": draw(st.sampled_from([4, 8, 16, 64, 256]))},
        "distribution": {"offload_params": draw(st.booleans()), "offload_optimizer": draw(st.booleans())},
        "batch": {"micro_batch_size": draw(st.integers(1, 32)),
                  "gradient_accumulation_steps": draw(st.integers(1, 16)),
                  "num_generations": draw(st.sampled_from([1, 2, 4, 8, 16, 64]))},
        "lengths": {"max_prompt_tokens": draw(st.integers(1, 32_768)),
                    "max_completion_tokens": draw(st.integers(1, 32_768))},
        "rollout": {"engine": engine, "gpu_memory_utilization": draw(st.sampled_from([0.1, 0.3, 0.5, 0.7, 0.9])),
                    "tensor_parallel_size": draw(st.sampled_from([1, 1, 2, 4]))},
        "vision": {"images_per_prompt": draw(st.integers(0, 8)),
                   "max_pixels": draw(st.sampled_from([None, 200_704, 1_003_520, 12_845_056])),
                   "freeze_tower": draw(st.booleans())},
        "ray": {"enabled": draw(st.booleans())},
    }
    for dotted, values in ENUMS.items():
        _set(spec, dotted, draw(st.sampled_from(values)))
    spec["batch"].update(padding_free=draw(st.booleans()), length_sorted_micro_batches=draw(st.booleans()))
    if draw(st.booleans()):  # what the data holds: typical lengths, a percentile, means, the clipped share
        spec["lengths"].update(_data_lengths(draw, spec["lengths"]["max_prompt_tokens"], spec["lengths"]["max_completion_tokens"]))
        spec["schedule"] = {"max_steps": draw(st.integers(1, 10_000))}
    _within_cross_field_rules(spec)
    engine = spec["rollout"]["engine"]
    if engine == "vllm_separate":
        spec["rollout"]["num_gpus"] = draw(st.integers(1, max(1, gpus_per_node - 1)))
        spec["rollout"]["tensor_parallel_size"] = min(spec["rollout"]["tensor_parallel_size"], spec["rollout"]["num_gpus"])
    if engine != "hf":
        spec["rollout"]["sleep_level"] = draw(st.sampled_from([0, 1, 2]))
        spec["rollout"]["offload_model"] = draw(st.booleans())
    return spec


def _data_lengths(draw: st.DrawFn, prompt: int, completion: int) -> dict[str, Any]:
    """Typical (p50) ≤ p90 ≤ the limit, means within the limits, a clipped share the mean allows."""
    typical_c = draw(st.integers(1, completion))
    p90 = draw(st.integers(typical_c, completion))
    mean_c = draw(st.floats(1, completion))
    clip = draw(st.sampled_from([None, 0.0, 0.01])) if p90 == completion or mean_c >= 0.01 * completion else None
    out = {"typical_prompt_tokens": draw(st.integers(1, prompt)), "mean_prompt_tokens": draw(st.floats(1, prompt)),
           "typical_completion_tokens": typical_c, "completion_percentiles": {90: p90}, "mean_completion_tokens": mean_c}
    if clip is not None and (clip == 0 or p90 == completion):
        out["completion_clip_fraction"] = clip
    return out


def _within_cross_field_rules(spec: dict[str, Any]) -> None:
    """Keep a drawn spec inside the spec's cross-field rules, so most draws plan (malformed
    specs test the refusals): parameter offload only under ZeRO-3/FSDP, optimizer offload not
    under DDP, a separate vLLM only with a GPU left to train, vLLM TP within a node."""
    d, ro, gpus = spec["distribution"], spec["rollout"], spec["hardware"]["gpus_per_node"]
    d["offload_params"] = d["offload_params"] and d["strategy"] in ("zero3", "fsdp")
    d["offload_optimizer"] = d["offload_optimizer"] and d["strategy"] != "ddp"
    if ro["engine"] == "vllm_separate" and gpus == 1:
        ro["engine"] = "vllm_colocate"
    ro["tensor_parallel_size"] = min(ro["tensor_parallel_size"], gpus)


JUNK = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**30), 10**30), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40), st.sampled_from(["", "auto", "~nosuchuser/m", "x" * 300, "../../etc", "1e400", "-1"]),
    st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=8), st.integers(), max_size=3),
)
"""Values a careless or hostile spec might hold in any field."""


@st.composite
def malformed_specs(draw: st.DrawFn) -> dict[str, Any]:
    """A valid spec with one to three leaves (or whole sections) replaced by junk, or a junk
    key added."""
    spec = draw(valid_specs())
    leaves = list(_leaves(spec))
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.booleans()):
            _set(spec, draw(st.sampled_from(leaves)), draw(JUNK))
        else:
            section = draw(st.sampled_from(sorted(spec)))
            spec[section] = draw(JUNK) if draw(st.booleans()) else spec[section]
            if isinstance(spec.get(section), dict):
                spec[section][draw(st.text(min_size=1, max_size=12))] = draw(JUNK)
    return spec


@st.composite
def mutated_text(draw: st.DrawFn, text: str) -> str:
    """``text`` with lines deleted, duplicated, swapped or cut, junk inserted, or truncated."""
    lines = text.split("\n")
    for _ in range(draw(st.integers(1, 4))):
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        action = draw(st.sampled_from(["delete", "duplicate", "swap", "cut", "junk", "truncate", "numbers", "value",
                                       "quote", "nest"]))
        if action == "delete":
            del lines[i]
        elif action == "duplicate":
            lines.insert(i, lines[i])
        elif action == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif action == "cut":
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
        elif action == "junk":
            lines.insert(i, draw(st.sampled_from(JUNK_LINES)) if draw(st.booleans()) else draw(st.text(max_size=80)))
        elif action == "numbers":
            lines[i] = _replace_numbers(lines[i], draw(st.sampled_from(EXTREME_VALUES)))
        elif action == "value":
            lines[i] = _replace_value(lines[i], draw(st.sampled_from(EXTREME_VALUES)))
        elif action == "quote":
            j = draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:j] + draw(st.sampled_from(["'", '"', "`", "$(", "${", "\\"])) + lines[i][j:]
        elif action == "nest":
            lines.insert(i, _nested(draw(st.sampled_from(["[]", "{}", "yaml", "json"])), draw(st.sampled_from([50, 1000, 3000]))))
        else:
            lines = lines[:i]
    return "\n".join(lines)


JUNK_LINES = [
    "$((" + "1+" * 3000 + "1))", "x = " + " + ".join(["1"] * 3000), "x = 'a' * 10000000000000000000",
    "${UNSET_VARIABLE}", "`rm -rf /`", "$(touch /tmp/oomless-fuzz-was-executed)", "import os; os.system('true')",
    "!!python/object/apply:os.system ['true']", "{" * 500, "[" * 500, "--model", "--", "\\", "'unclosed", '"unclosed',
    "for i in 1 2 3; do", "done", "if true; then", "fi", "<<EOF", "EOF",
]
"""Lines that break naive parsers: deep arithmetic and expressions, huge literals, code a
config must never run, unbalanced brackets and quotes, stray shell keywords."""


EXTREME_VALUES = ["0", "-1", "1e400", "9" * 40, "nan", "inf", "-inf", "0.0", "1e-400", "99999999999", "2147483648",
                  "18446744073709551616", "''", '""', "true", "null", "[]", "{}", "~", "x" * 300, "1_000", "0x10", "٣"]
"""What a flag or key may be given instead of its value: zero, negatives, overflowing and
underflowing floats, int32/int64 edges, empty strings, the wrong type, a 300-character word,
Python-only literal forms, a non-ASCII digit."""


def _replace_value(line: str, value: str) -> str:
    """The value of the line's first ``--flag value``, ``--flag=value``, ``key: value`` or
    ``key=value`` replaced by ``value`` (the line itself when it has none)."""
    import re

    pattern = r"(--[\w.-]+[ =]|[\w.-]+\s*[:=]\s*)([^\s\\]+)"
    return re.sub(pattern, lambda m: m.group(1) + value, line, count=1)


def _nested(kind: str, depth: int) -> str:
    """A line nesting ``depth`` levels: brackets, braces, an indented YAML mapping, JSON objects."""
    if kind == "[]":
        return "x: " + "[" * depth + "1" + "]" * depth
    if kind == "{}":
        return "x = " + "{" * depth + "}" * depth
    if kind == "yaml":
        return "\n".join("  " * level + "a:" for level in range(depth)) + " 1"
    return '{"a": ' * depth + "1" + "}" * depth


def _replace_numbers(line: str, value: str) -> str:
    import re

    return re.sub(r"\b\d+(\.\d+)?\b", value, line, count=1)


def _leaves(data: dict[str, Any], prefix: str = "") -> list[str]:
    out = []
    for key, value in data.items():
        if isinstance(value, dict) and value:
            out.extend(_leaves(value, f"{prefix}{key}."))
        else:
            out.append(f"{prefix}{key}")
    return out


def _set(data: dict[str, Any], dotted: str, value: Any) -> None:
    node = data
    *parents, leaf = dotted.split(".")
    for key in parents:
        child = node.get(key)
        if not isinstance(child, dict):
            child = node[key] = {}
        node = child
    node[leaf] = copy.deepcopy(value)
