"""A run spec → OpenRLHF `train_ppo_ray` launch scripts, dotted (0.11.2) and classic (0.10.1).

The flags are those `openrlhf.py` reads back (same canonical names, `FLAG`); every flag and
value written is checked against the version's flag table in the tests.
Assumes: one optimizer step per rollout (train batch = actor GPUs × micro batch, rollout batch =
that / samples per prompt, rounded up); batch sizes have no effect on the planned memory.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from .. import _native as N
from .. import common as C
from .. import optim_impl as OI
from .liger import liger_flag
from .reader import DEEPSPEED_ADAM, CLASSIC, DOTTED, FLAG


NATIVE_STYLE = "switch_flags"
"""`train_ppo_ray --flag value`; a switch (store_true) is present for True, absent for False."""
NATIVE_DIALECTS = (DOTTED, CLASSIC)
MAIN_FILE = "train_ppo_ray.sh"


def native_settings(spec: Any, dialect: str = DOTTED) -> dict[str, Any]:
    """`train_ppo_ray` flag (with its dashes) → value in the flag spelling of ``dialect`` (0.11
    dotted or 0.10 classic): what `export_spec` writes, and what `fit --from openrlhf --write`
    patches into the user's script (one mapping for both). None: the flag is left out."""
    canon, dotted = _canonical(spec), dialect == DOTTED
    out = {FLAG[key][1 if dotted else 0]: value for key, value in canon.items() if FLAG[key][1 if dotted else 0] is not None}
    world = spec.hardware.num_nodes * canon.get("actor_gpus_per_node", spec.hardware.gpus_per_node)
    train = world * spec.batch.micro_batch_size
    names = ("--train.batch_size", "--rollout.batch_size") if dotted else ("--train_batch_size", "--rollout_batch_size")
    out.update({names[0]: train, names[1]: -(-train // spec.batch.num_generations)})
    return out


def export_spec(spec: Any, out_dir: Path, force: bool) -> list[Path]:
    return [C.write_new_file(out_dir / name, text, force) for name, text in render_files(spec).items()]


def render_files(spec: Any) -> dict[str, str]:
    return {name: _script(spec, version, dotted)
            for name, version, dotted in ((MAIN_FILE, DOTTED, True), ("train_ppo_ray_classic.sh", CLASSIC, False))}


def _script(spec: Any, version: str, dotted: bool) -> str:
    lines = []
    for flag, value in native_settings(spec, DOTTED if dotted else CLASSIC).items():
        if value is True:
            lines.append(flag)
        elif value is not False and value is not None:
            words = value if isinstance(value, list) else [value]
            lines.append(" ".join([flag, *(shlex.quote(str(w)) for w in words)]))
    head = N.header([f"openrlhf=={version}", f"OpenRLHF {version} launch written by `oomless export --to openrlhf` for {spec.model}.",
                     "Add your dataset (--data.prompt_dataset / --prompt_data) and reward before training."])
    body = " \\\n    ".join(["python3 -m openrlhf.cli.train_ppo_ray", *lines])
    return "#!/bin/bash\n" + head + body + "\n"


def _groups(spec: Any) -> list[tuple[str, ...]]:
    from ...planner.roles import placement_groups

    return [tuple(r.value for r in g.roles) for g in placement_groups(spec)]


def _canonical(spec: Any) -> dict[str, Any]:
    fw = "openrlhf"
    strategy = C.require(spec, "distribution.strategy", ("ddp", "zero1", "zero2", "zero3"), fw)
    C.require(spec, "distribution.offload_params", (False,), fw)
    C.require(spec, "precision", ("bf16_mixed", "fp16_mixed"), fw)
    C.require(spec, "optimizer", ("adamw",), fw)
    C.require_merged_lora(spec, fw)
    dist = spec.distribution.model_dump(mode="json")
    if OI.planned(getattr(spec.optimizer_implementation, "value", None), dist) != OI.planned(DEEPSPEED_ADAM, dist):
        C.cannot_express("optimizer_implementation", f"{spec.optimizer_implementation!r} cannot be written for OpenRLHF: "
                         "DeepSpeed's FusedAdam steps every ZeRO stage (CPU Adam with --adam_offload); allowed: fused")
    C.require(spec, "logits", ("fp32_all_positions",), fw)  # what Actor.forward does, whatever the flags
    C.require(spec, "distribution.offload_reference_params", (False,), fw)  # idle models: placement.offload_idle_models
    C.require(spec, "batch.gradient_accumulation_steps", (1,), fw)  # one optimizer step per rollout (module docstring)
    C.require(spec, "batch.steps_per_generation", (None, 1), fw)
    C.require(spec, "placement.process_per_role", (True,), fw)
    C.require(spec, "rollout.offload_model", (False,), fw)
    C.require(spec, "rollout.offload_optimizer", (False,), fw)
    algorithm = C.require(spec, "algorithm", ("grpo", "ppo", "rloo"), fw)
    C.require(spec, "ray.enabled", (True,), fw)
    C.require(spec, "rollout.max_num_batched_tokens", (None,), fw)
    C.require(spec, "rollout.max_num_seqs", (None,), fw)
    ro, hw = spec.rollout, spec.hardware
    engine = ro.engine.value
    if engine != "hf":
        C.require(spec, "rollout.engine_in_trainer_process", (False,), fw)
        C.require(spec, "rollout.engine_starts_first", (True,), fw)
    groups = _groups(spec)
    colocate_all = engine == "vllm_colocate"
    if colocate_all and len(groups) != 1:
        C.cannot_express("placement.groups", "OpenRLHF colocates vLLM only with every model in one group (colocate_all)")
    by_role = {role: g for g in groups for role in g}
    needed = ["actor"] + ["reference"] * (spec.kl_beta > 0) + ["critic"] * (algorithm == "ppo") + ["reward"] * (spec.reward_model.model is not None)
    if sorted(needed) != sorted(r for r in by_role if r != "vllm"):
        C.cannot_express("placement.groups", f"train_ppo_ray places exactly the models the run loads: {', '.join(needed)}")
    per_node = _gpus_per_group(spec)
    c: dict[str, Any] = {"pretrain": spec.model, "colocate_all": colocate_all,
                         "colocate_actor_ref": not colocate_all and by_role.get("reference") == by_role["actor"],
                         "colocate_critic_reward": not colocate_all and "reward" in by_role and by_role.get("critic") == by_role["reward"]}
    for role, key in (("actor", "actor"), ("reference", "ref"), ("critic", "critic"), ("reward", "reward")):
        if role in by_role:
            c[f"{key}_nodes"], c[f"{key}_gpus_per_node"] = hw.num_nodes, per_node[by_role[role]]
    if engine != "hf":
        vllm_gpus = per_node[by_role["vllm"]] * hw.num_nodes
        if vllm_gpus % ro.tensor_parallel_size:
            C.cannot_express("rollout.tensor_parallel_size", f"{ro.tensor_parallel_size} does not divide the {vllm_gpus} vLLM GPUs")
        c.update(vllm_engines=vllm_gpus // ro.tensor_parallel_size, vllm_tp=ro.tensor_parallel_size,
                 vllm_util=ro.gpu_memory_utilization, vllm_sleep=colocate_all and ro.sleep_level > 0,
                 enforce_eager=ro.enforce_eager)
        if not colocate_all or ro.sleep_level == 2:
            C.require(spec, "rollout.sleep_level", (0, 1) if colocate_all else (0,), fw)
    else:
        c["vllm_engines"] = 0
    c.update(ds_sleep=spec.placement.offload_idle_models, ref_reward_offload=spec.placement.offload_idle_models,
             ref_offload=spec.placement.offload_idle_models, reward_offload=spec.placement.offload_idle_models,
             zero_stage=0 if strategy == "ddp" else int(strategy[-1]), adam_offload=spec.distribution.offload_optimizer,
             grad_ckpt=spec.gradient_checkpointing, attn=spec.attention.value,
             param_dtype="fp16" if spec.precision.value == "fp16_mixed" else "bf16", liger=liger_flag(spec))
    c.update(_training_flags(spec, algorithm))
    return c


def _gpus_per_group(spec: Any) -> dict[tuple[str, ...], int]:
    from ...planner.roles import placement_groups

    return {tuple(r.value for r in g.roles): g.gpus_per_node for g in placement_groups(spec)}


def _training_flags(spec: Any, algorithm: str) -> dict[str, Any]:
    ft, b, lengths = spec.finetune, spec.batch, spec.lengths
    c: dict[str, Any] = {"micro_train": b.micro_batch_size, "micro_rollout": spec.logprob_micro_batch_size,
                         "n_samples": b.num_generations, "max_len": lengths.max_prompt_tokens + lengths.max_completion_tokens,
                         "max_new_tokens": lengths.max_completion_tokens, "init_kl": spec.kl_beta,
                         "estimator": {"ppo": "gae", "rloo": "rloo"}.get(algorithm, "group_norm")}
    if spec.rollout.max_model_len not in (None, c["max_len"]):
        C.cannot_express("rollout.max_model_len", f"OpenRLHF 0.9+ sets vLLM's max_model_len to max_len ({c['max_len']})")
    if ft.method.value != "full":
        c.update(lora_rank=ft.lora_rank, lora_alpha=int(ft.lora_alpha), lora_dropout=ft.lora_dropout or None,
                 lora_targets=ft.lora_targets if isinstance(ft.lora_targets, list) else ["all-linear"],
                 load_in_4bit=ft.method.value == "qlora")
    if algorithm == "ppo" and (spec.critic.model is not None or spec.reward_model.model is not None):
        # Without --critic_pretrain, train_ppo_ray starts the critic from the reward model.
        c["critic_pretrain"] = spec.critic.model or spec.model
    if spec.reward_model.model is not None:
        c["reward_pretrain"] = spec.reward_model.model
    if "images_per_prompt" in spec.vision.model_fields_set:
        c["max_images"] = spec.vision.images_per_prompt
    c["freeze_visual"] = spec.vision.freeze_tower
    c["packing"] = b.padding_free
    if b.max_tokens_per_gpu is not None:
        _budget_micro_batches(spec, c["max_len"])
        c.update(dynamic_batch=True, train_max_tokens=b.max_tokens_per_gpu)
        if b.logprob_max_tokens_per_gpu is not None:
            c["rollout_max_tokens"] = b.logprob_max_tokens_per_gpu
    if spec.distribution.sequence_parallel_size > 1:
        c["ring_attn"] = spec.distribution.sequence_parallel_size
    return c


def _budget_micro_batches(spec: Any, sequence: int) -> None:
    """Under `--train.dynamic_batch_enable` the reader takes the micro-batch as the sequences of
    full length the token budget holds (`reader._dynamic_batch`): a patch whose micro-batch is
    not that reads back as another run. Only where a writer patches a file (`C.fallback_spec`);
    an export states both and is read back whole."""
    b = spec.batch
    held = max(1, b.max_tokens_per_gpu // sequence)
    if C.fallback_spec() is not None and b.micro_batch_size != held:
        C.cannot_express("batch.micro_batch_size", f"{b.micro_batch_size} with a token budget of {b.max_tokens_per_gpu}: "
                         f"OpenRLHF's dynamic batch holds {held} sequence(s) of {sequence} tokens per micro-batch")
        C.cannot_express("batch.max_tokens_per_gpu", f"{b.max_tokens_per_gpu} with micro-batch {b.micro_batch_size}: "
                         f"the budget sets the micro-batch under --train.dynamic_batch_enable")
