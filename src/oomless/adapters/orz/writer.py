"""Open-Reasoner-Zero: a run spec → a playground experiment file."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from .. import common as C
from .. import optim_impl as OI
from .keys import DEFAULTS
from .reader import DEEPSPEED_ADAM


NATIVE_STYLE = "python"
"""Fields of the experiment's `PPOExpConfig` dataclass: `name: type = literal`."""
NATIVE_DIALECTS = ("0.1.0",)
MAIN_FILE = "orz_ppo_exp.py"


def native_settings(spec: Any, dialect: str = NATIVE_DIALECTS[0]) -> dict[str, Any]:
    """`PPOExpConfig` field → value: what `export_spec` writes, and what `fit --from orz --write`
    patches into the user's experiment file (one mapping for both)."""
    return _spec_to_fields(spec)


def export_spec(spec: Any, out_dir: Path, force: bool) -> list[Path]:
    """A playground script whose `PPOExpConfig` sets the memory knobs (ORZ's own layout)."""
    return [C.write_new_file(out_dir / name, text, force) for name, text in render_files(spec).items()]


def render_files(spec: Any) -> dict[str, str]:
    fields = _spec_to_fields(spec)
    body = "".join(f"    {k}: {_annotation(k, v)} = {v!r}\n" for k, v in fields.items())
    text = (
        f"# orz==0.1.0\n# Open-Reasoner-Zero experiment config written by `oomless export --to orz` for {spec.model}.\n"
        "# Put it in playground/ and run `python -m playground.<name>`; add prompt_data and the reward before training.\n"
        "import asyncio\nfrom dataclasses import dataclass\nfrom typing import Optional\n\n"
        "from orz.exps.examples.ppo.ppo_base_exp import BasePPOExpConfig\nfrom playground.orz_7b_ppo import PPOExp\n\n\n"
        "@dataclass\nclass PPOExpConfig(BasePPOExpConfig):\n" + body +
        '\n\nif __name__ == "__main__":\n    exp = PPOExp().set_cfg(PPOExpConfig())\n    asyncio.run(exp.run())\n'
    )
    return {MAIN_FILE: text}


def _annotation(key: str, value: Any) -> str:
    if value is None:
        return "Optional[int]" if key == "max_len" else "Optional[str]"
    return {bool: "bool", int: "int", float: "float"}.get(type(value), "Optional[str]")


def _spec_to_fields(spec: Any) -> dict[str, Any]:
    fw = "orz"
    strategy = C.require(spec, "distribution.strategy", ("ddp", "zero1", "zero2", "zero3"), fw)
    C.require(spec, "distribution.offload_params", (False,), fw)
    dist = spec.distribution.model_dump(mode="json")
    if OI.planned(getattr(spec.optimizer_implementation, "value", None), dist) != OI.planned(DEEPSPEED_ADAM, dist):
        C.cannot_express("optimizer_implementation", f"{spec.optimizer_implementation!r} cannot be written for ORZ: "
                         "DeepSpeed's FusedAdam steps every ZeRO stage (CPU Adam with adam_offload); allowed: fused")
    C.require(spec, "precision", ("bf16_mixed", "fp16_mixed"), fw)
    C.require(spec, "attention", ("flash_attention_2", "eager"), fw)
    C.require(spec, "finetune.method", ("full",), fw)
    C.require(spec, "logits", ("bf16_all_positions",), fw)  # what ORZ's actor does, whatever the config
    C.require(spec, "batch.gradient_accumulation_steps", (1,), fw)  # the reader plans one optimizer step per rollout
    C.require(spec, "batch.steps_per_generation", (None, 1), fw)
    C.require(spec, "distribution.sequence_parallel_size", (1,), fw)
    C.require(spec, "batch.max_tokens_per_gpu", (None,), fw)  # the reader plans fixed micro-batches
    C.require(spec, "batch.padding_free", (False,), fw)
    C.require(spec, "distribution.offload_reference_params", (False,), fw)  # idle models: placement.offload_idle_models
    C.require(spec, "rollout.offload_model", (False,), fw)
    C.require(spec, "rollout.offload_optimizer", (False,), fw)
    algorithm = C.require(spec, "algorithm", ("ppo", "grpo"), fw)
    C.require(spec, "placement.process_per_role", (True,), fw)
    C.require(spec, "rollout.engine_in_trainer_process", (False,), fw)
    C.require(spec, "rollout.engine_starts_first", (True,), fw)
    engine = C.require(spec, "rollout.engine", ("vllm_colocate", "vllm_separate"), fw)
    C.require(spec, "ray.enabled", (True,), fw)
    C.require(spec, "rollout.max_num_seqs", (None,), fw)
    from ...planner.roles import placement_groups

    groups = [(tuple(r.value for r in g.roles), g.gpus_per_node) for g in placement_groups(spec)]
    nodes, ro = spec.hardware.num_nodes, spec.rollout
    roles = {r: (g, n) for g, n in groups for r in g}
    needed = ["actor", "reference"] + ["critic"] * (algorithm == "ppo") + ["reward"] * (spec.reward_model.model is not None)
    if sorted(needed) != sorted(r for r in roles if r != "vllm"):
        C.cannot_express("placement.groups", f"ORZ places exactly the models it loads (always a reference): {', '.join(needed)}")
    colocate = engine == "vllm_colocate"
    C.require(spec, "placement.offload_idle_models", (colocate,), fw)
    C.require(spec, "rollout.sleep_level", (1 if colocate else 0,), fw)
    tp = C.require(spec, "rollout.tensor_parallel_size", (1,), fw) if colocate else ro.tensor_parallel_size
    if colocate and len(groups) != 1:
        C.cannot_express("placement.groups", "ORZ colocate_all puts every role and one engine (TP 1) on each GPU: one group")
    f: dict[str, Any] = {"colocate_all": colocate}
    for role, key in (("actor", "actor"), ("reference", "ref"), ("critic", "critic"), ("reward", "reward")):
        if role in roles:
            f[f"{key}_num_nodes"], f[f"{key}_num_gpus_per_node"] = roles[role][1] * nodes, 1
    f["colocate_actor_ref"] = colocate or roles["actor"][0] == roles.get("reference", (None,))[0]
    f["colocate_critic_reward"] = "reward" in roles and roles.get("critic", (None,))[0] == roles["reward"][0]
    f["vllm_num_engines"] = roles["vllm"][1] * nodes // tp if "vllm" in roles else 0
    f["vllm_tensor_parallel_size"] = tp
    f.update(pretrain=spec.model, critic_pretrain=(spec.critic.model or spec.model) if algorithm == "ppo" else "",
             reward_pretrain=spec.reward_model.model, use_grpo=algorithm == "grpo",
             zero_stage=0 if strategy == "ddp" else int(strategy[-1]), adam_offload=spec.distribution.offload_optimizer,
             bf16=spec.precision.value == "bf16_mixed", flash_attn=spec.attention.value == "flash_attention_2",
             gradient_checkpointing=spec.gradient_checkpointing, gpu_memory_utilization=ro.gpu_memory_utilization,
             max_num_batched_tokens=ro.max_num_batched_tokens or DEFAULTS["max_num_batched_tokens"],
             enforce_eager=ro.enforce_eager, prompt_max_len=spec.lengths.max_prompt_tokens,
             generate_max_len=spec.lengths.max_completion_tokens, max_len=ro.max_model_len,
             micro_train_batch_size=spec.batch.micro_batch_size, micro_forward_batch_size=spec.logprob_micro_batch_size,
             n_samples_per_prompt=spec.batch.num_generations, init_kl_coef=spec.kl_beta)
    return f
