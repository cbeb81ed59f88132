"""Comparing a spec with what an exported config reads back to (the exporters' self-check).

Two specs can say the same thing in two spellings: a None that the planner fills in, or a
value written out. `same_spec_dict` writes those defaults out so `first_difference` compares
meanings; used by the swift and trl exporters and their tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def image_tokens(spec: Any, arch: Any) -> int:
    """LLM tokens the images of one prompt add, worst case (as the planner counts them)."""
    from ..planner.vision_terms import image_tokens_per_prompt

    return image_tokens_per_prompt(spec, arch)


def prompt_bound_with_images(spec: Any) -> int:
    """The prompt bound of a framework whose bound counts the image tokens (verl, EasyR1: the
    readers set `lengths.max_prompt_counts_images`): a spec whose images come on top of its
    text bound is written as text + the worst image tokens, which plans the same prompt."""
    if spec.lengths.max_prompt_counts_images or spec.vision.images_per_prompt == 0:
        return spec.lengths.max_prompt_tokens
    from ..catalog.resolve import load_model

    return spec.lengths.max_prompt_tokens + image_tokens(spec, load_model(spec.model))


def same_spec_dict(spec: Any, arch: Any) -> dict[str, Any]:
    """A spec (RunSpec or dict) as a JSON dict with defaults that mean the same written out:
    `rollout.max_model_len` None is prompt + image + completion tokens (planner.shape), and
    `rollout.weight_sync_batches` None is 1 (the whole model) when LoRA is merged for the sync
    (planner.gpu_phases.sync_gather_bytes); `optimizer_implementation` as the readers state it
    (`optim_impl.planned`: None where the unset field plans the same); `batch.logprob_max_tokens_per_gpu`
    None is the training budget."""
    from ..spec.load import parse_spec
    from .optim_impl import planned

    run = parse_spec(spec) if isinstance(spec, Mapping) else spec
    out = run.model_dump(mode="json")
    rollout = out["rollout"]
    if rollout["max_model_len"] is None:
        rollout["max_model_len"] = run.max_sequence_tokens + image_tokens(run, arch)
    if rollout.get("weight_sync_batches", 0) is None and out["finetune"]["method"] != "full":
        rollout["weight_sync_batches"] = 1
    out["optimizer_implementation"] = planned(out.get("optimizer_implementation"), out["distribution"])
    if out["batch"]["logprob_max_tokens_per_gpu"] is None:  # its default: the training budget (spec.run.Batch)
        out["batch"]["logprob_max_tokens_per_gpu"] = out["batch"]["max_tokens_per_gpu"]
    return out


def unstated_releases(wanted: dict[str, Any], got: dict[str, Any]) -> None:
    """A release the written files had to name (their `# oomless: vllm==X` directive) for a spec
    that names none: ``got`` (a `same_spec_dict` read back) takes ``wanted``'s None, and with it
    the request size that release's reader states (`rollout.samples_per_request`), so a spec with
    no vLLM version is not refused for the version its files say. The release's own rules (its
    profile sampler, the n > 1 leak) can then plan the written files slightly differently (a
    profile peak of 234 vs 244 MiB on a 0.5B model); `scripts/writeback_scan.py` checks that the
    peaks stay within 1 %."""
    for key in ("vllm_version", "samples_per_request"):
        if wanted["rollout"].get("vllm_version") is None and wanted["rollout"].get(key) is None:
            got["rollout"][key] = None


def first_difference(expected: Mapping[str, Any], actual: Mapping[str, Any], prefix: str = "") -> str | None:
    """The dotted name of the first key whose values differ, or None."""
    for key in list(expected) + [k for k in actual if k not in expected]:
        left, right = expected.get(key), actual.get(key)
        if isinstance(left, Mapping) and isinstance(right, Mapping):
            found = first_difference(left, right, f"{prefix}{key}.")
            if found:
                return found
        elif left != right:
            return f"{prefix}{key}"
    return None


def all_differences(expected: Mapping[str, Any], actual: Mapping[str, Any], prefix: str = "") -> list[str]:
    """The dotted names of every key whose values differ (`first_difference`, all of them)."""
    out: list[str] = []
    for key in list(expected) + [k for k in actual if k not in expected]:
        left, right = expected.get(key), actual.get(key)
        if isinstance(left, Mapping) and isinstance(right, Mapping):
            out += all_differences(left, right, f"{prefix}{key}.")
        elif left != right:
            out.append(f"{prefix}{key}")
    return out


def value_at(tree: Mapping[str, Any], dotted: str) -> Any:
    node: Any = tree
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return node
