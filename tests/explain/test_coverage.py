"""`oomless explain` covers every component a plan can contain: each has a formula and a
source, and the formula, evaluated from its own text, gives the planned bytes.

Three nets: the shipped examples (and their typical-batch plans), hand-picked specs that reach
the rarer components (PPO critic and reward model, HF generate, offloads, Ulysses, sleep
level 1, per-role processes, every logits mode), and fuzzed specs over the whole spec
surface (`tests/fuzz/strategies.py`). A fourth test reads the planner's source: every
component name it can emit (`_c("...")`, `_c(f"...")`) must match a registry entry, so a new
component fails here before any spec reaches it.
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given

from oomless.errors import InputError
from oomless.explain import Explained, explain_plan, registry
from oomless.explain.checks import explain_checks
from oomless.planner import gpu_phases
from oomless.planner.plan import Plan
from oomless.spec.load import load_run
from tests.fuzz.strategies import fuzz_settings, valid_specs
from tests.helpers import BASE_SPEC, EXAMPLES, merged, plan_of

EXAMPLE_SPECS = sorted(p for p in EXAMPLES.rglob("*.yaml") if "native" not in p.parts)

RARE = {
    "ppo-critic-reward-separate": {"algorithm": "ppo", "reward_model.model": "Qwen/Qwen2.5-0.5B-Instruct",
                                   "rollout.engine": "vllm_separate", "rollout.num_gpus": 1, "rollout.sleep_level": 0},
    "hf-generate-zero3": {"rollout.engine": "hf", "rollout.sleep_level": 0},
    "offload-optimizer-params-ray": {"distribution.offload_optimizer": True, "distribution.offload_params": True,
                                     "ray.enabled": True},
    "zero2-offload-optimizer": {"distribution.strategy": "zero2", "distribution.offload_optimizer": True},
    "fsdp-reference-offloaded": {"distribution.strategy": "fsdp", "kl_beta": 0.04, "distribution.offload_reference_params": True},
    "ulysses-padding-free": {"distribution.sequence_parallel_size": 2, "batch.padding_free": True},
    "token-budget": {"batch.max_tokens_per_gpu": 4096, "lengths.typical_prompt_tokens": 100, "lengths.typical_completion_tokens": 200},
    "lora-sleep1-offload-model": {"finetune.method": "lora", "rollout.offload_model": True, "rollout.offload_optimizer": True},
    "qlora-ddp-no-checkpointing": {"finetune.method": "qlora", "distribution.strategy": "ddp", "gradient_checkpointing": False},
    "process-per-role-idle-offload": {"algorithm": "ppo", "placement.process_per_role": True, "placement.offload_idle_models": True,
                                      "distribution.strategy": "zero3"},
    "tied-embeddings-full-bf16-8bit": {"model": "Qwen/Qwen2.5-0.5B-Instruct", "optimizer": "adamw_8bit", "precision": "bf16"},
    "weight-sync-batches-sgd": {"rollout.weight_sync_batches": 4, "optimizer": "sgd", "rollout.sleep_level": 2},
    "host-leak-over-steps": {"rollout.vllm_version": "0.7.3", "batch.num_generations": 8, "schedule.max_steps": 100000,
                             "schedule.save_steps": 50, "hardware.host_ram_gib": 64, "ray.enabled": True},
    "ppo-wrapped-lora-critic-hf-zero3": {"algorithm": "ppo", "finetune.method": "lora", "critic.lora": True,
                                         "critic.wrapped_with_actor": True, "rollout.engine": "hf", "rollout.sleep_level": 0,
                                         "distribution.strategy": "zero3", "batch.num_generations": 1,
                                         "rollout.keeps_generation_scores": True},
    "vision-frozen-tower-transformers-5": {"model": "Qwen/Qwen2.5-VL-3B-Instruct", "vision.images_per_prompt": 1,
                                           "vision.freeze_tower": True, "transformers_version": "5.2",
                                           "vision.data_max_pixels": 200_704},
    "vision": {"model": "Qwen/Qwen2.5-VL-3B-Instruct", "vision.images_per_prompt": 2, "vision.max_pixels": 1_003_520},
    "vision-trained-tower-eager": {"model": "Qwen/Qwen2.5-VL-3B-Instruct", "vision.images_per_prompt": 1,
                                   "vision.freeze_tower": False, "attention": "eager"},
    **{f"logits-{m}": {"logits": m} for m in ("full_bf16", "full_fp32", "chunked", "fused", "chunked_head", "fp32_all_positions",
                                                 "bf16_all_positions")},
    **{f"logits-{m}-lora": {"logits": m, "finetune.method": "lora"}
       for m in ("full_fp32", "chunked", "chunked_head", "fp32_all_positions", "bf16_all_positions")},
    **{f"logits-{m}-packed-tied": {"logits": m, "batch.padding_free": True, "model": "Qwen/Qwen2.5-0.5B-Instruct"}
       for m in ("fp32_all_positions", "bf16_all_positions")},
}


def problems(plan: Plan) -> list[str]:
    """Every component without a formula, without a source, or whose formula gives another
    number; every check whose formulas give other numbers than it compares."""
    out = []
    for p in [plan] + ([plan.typical] if plan.typical is not None else []):
        out += [f"check {ch.constraint.phase} {ch.constraint.message}: {ch.required.value} / {ch.available.value}"
                for ch in explain_checks(p) if not ch.agrees or not (ch.required.source and ch.available.source)]
        entries = explain_plan(p)
        planned = sum(len(ph.components) for d in p.devices for ph in d.phases) + sum(len(ph.components) for ph in p.host.phases)
        assert len(entries) == planned
        out += [f"{e.device} {e.group} {e.phase} {e.name}: {why}" for e in entries if (why := _problem(e))]
    return out


def _problem(e: Explained) -> str:
    if e.formula is None:
        return e.error or "no formula"
    if not e.formula.source.strip():
        return "no source"
    if not e.formula.code:
        return "no code location"
    if not e.agrees:
        return f"formula {e.formula.expression} = {e.formula.value}, planned {e.num_bytes}"
    return ""


@pytest.mark.parametrize("path", EXAMPLE_SPECS, ids=lambda p: p.stem)
def test_every_component_of_the_examples_is_explained(path: Path) -> None:
    run = load_run(path)
    from oomless.planner.plan import make_plan

    assert problems(make_plan(run.spec, run.arch, run.gpu, run.archs)) == []


@pytest.mark.parametrize("overrides", RARE.values(), ids=RARE.keys())
def test_rare_components_are_explained(overrides: dict[str, Any]) -> None:
    plan = plan_of(merged(BASE_SPEC, **overrides))
    assert problems(plan) == []


def test_the_rare_specs_reach_the_rare_components() -> None:
    """The hand-picked specs are worth their time only if they reach what the examples do not."""
    seen = {e.name for o in RARE.values() for e in explain_plan(plan_of(merged(BASE_SPEC, **o)))}
    for name in ("critic.optimizer_states", "reward.weights", "generate.kv_cache", "offload.actor.optimizer_pinned",
                 "offload.reference.params_pinned", "ulysses.all_to_all", "moved_to_cpu.actor.weights",
                 "vllm.sleep_weights_pinned", "ray.object_store", "policy.cuda_context", "vision.activations",
                 "critic.activations", "generate.gathered_weights", "generate.scores", "generate.scores_padded_copy",
                 "generate.previous_scores"):
        assert name in seen, name
    phases = {c.phase for o in RARE.values() for c in plan_of(merged(BASE_SPEC, **o)).constraints}
    assert "steps" in phases


@fuzz_settings()
@given(valid_specs())
def test_fuzzed_specs_are_explained(data: dict[str, Any]) -> None:
    try:
        plan = plan_of(data)
    except InputError:
        return
    assert problems(plan) == []


VISION_MODELS = ["Qwen/Qwen2.5-VL-3B-Instruct", "Qwen/Qwen2.5-VL-7B-Instruct", "OpenGVLab/InternVL3-2B", "google/gemma-3-4b-it"]


@fuzz_settings()
@given(valid_specs(models=VISION_MODELS))
def test_fuzzed_vision_specs_are_explained(data: dict[str, Any]) -> None:
    test_fuzzed_specs_are_explained.hypothesis.inner_test(data)


# --- static: every name the planner can emit has an entry -------------------------------------

SUBSTITUTES = ("policy", "reference", "critic", "reward", "actor", "vllm", "policy.", "critic.", "")
"""What an f-string's replacement field in a component name can be: a role's prefix or value,
with or without its dot, or nothing."""


PLANNER = Path(gpu_phases.__file__).parent


def emitted_names(path: Path) -> list[tuple[str, list[str]]]:
    """(template, its possible names) for each component the module at ``path`` names: every
    `_c(name, ...)` call (whose name must be a literal or an f-string) and every
    `Component(name, ...)` whose name is one (a merge passes an existing component's name on)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("_c", "Component") and node.args):
            continue
        arg = node.args[0]
        if isinstance(arg, ast.Constant):
            out.append((arg.value, [arg.value]))
        elif isinstance(arg, ast.JoinedStr):
            parts = [[p.value] if isinstance(p, ast.Constant) else list(SUBSTITUTES) for p in arg.values]
            out.append((ast.unparse(arg), ["".join(c) for c in itertools.product(*parts)]))
        else:
            assert node.func.id == "Component", f"{path.name}: a component name that is not a literal: {ast.unparse(arg)}"
    return out


@pytest.mark.parametrize("path", sorted(PLANNER.glob("*.py")), ids=lambda p: p.stem)
def test_every_component_name_in_the_planner_has_a_formula(path: Path) -> None:
    registry.load()
    entries = registry.HOST if path.stem.startswith("host") else registry.GPU
    missing = [t for t, names in emitted_names(path) if not any(registry.find(entries, n) for n in names)]
    assert missing == []


def test_the_planner_scan_finds_the_components() -> None:
    assert len(emitted_names(PLANNER / "gpu_phases.py")) >= 25 and len(emitted_names(PLANNER / "host_phases.py")) >= 8


def test_a_name_without_an_entry_is_reported_not_hidden() -> None:
    plan = plan_of(BASE_SPEC)
    registry.load()
    saved = list(registry.GPU)
    registry.GPU[:] = [(p, f) for p, f in saved if not p.fullmatch("policy.weights")]
    try:
        missing = [e for e in explain_plan(plan) if e.name == "policy.weights"]
    finally:
        registry.GPU[:] = saved
    assert missing and all(e.formula is None and "no formula" in e.error for e in missing)


def test_a_new_component_without_a_formula_is_caught(tmp_path: Path) -> None:
    module = tmp_path / "new_phase.py"
    module.write_text('def f(p):\n    return [_c("brand_new_buffer", 0, 1), _c(f"{p}.weights", 0, 1)]\n', encoding="utf-8")
    registry.load()
    found = {t: any(registry.find(registry.GPU, n) for n in names) for t, names in emitted_names(module)}
    assert found == {"brand_new_buffer": False, "f'{p}.weights'": True}
