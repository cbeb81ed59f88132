"""verl: a run spec → a Hydra config over verl's ppo_trainer and its launch script."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...errors import InputError
from .. import _native as N
from ...mappings import flatten
from .. import common as C
from .. import schedule as SCH
from ..round_trip import prompt_bound_with_images
from .keys import DEFAULTS, VERSION
from .reader import R, _compose


CONFIG_NAME = "verl_ppo"


NATIVE_STYLE = "hydra"
"""A launch script's `key=value` overrides (a YAML: the nested keys)."""
MICRO_KEYS = ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
              "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", "critic.ppo_micro_batch_size_per_gpu")
"""The per-GPU micro-batch keys, each of which may come in the older global form instead (verl
0.4-0.8 divide it over the data-parallel ranks: batches `_micro_per_gpu`)."""
GLOBAL_MICRO = "global-micro"
NATIVE_DIALECTS = (VERSION, *(f"{GLOBAL_MICRO}:{mask}" for mask in range(1, 2 ** len(MICRO_KEYS))))
"""verl's own keys, then every mix of global micro-batch keys (bit i: MICRO_KEYS[i] global): the
patch reads a file in the dialect whose keys it sets most (`patch._read_as`), so `fit --write`
keeps each key in the form the file uses, never both forms of one (verl refuses that)."""
MAIN_FILE = f"{CONFIG_NAME}.yaml"


def native_settings(spec: Any, dialect: str = VERSION) -> dict[str, Any]:
    """Dotted verl config key → value: what `export_spec` writes into its Hydra config, and what
    `fit --from verl --write` patches into the user's overrides or YAML (one mapping for both)."""
    config = _spec_to_config(spec)
    values = flatten({k: v for k, v in config.items() if k not in ("hydra", "defaults")})
    if not dialect.startswith(GLOBAL_MICRO):
        return values
    mask = int(dialect.partition(":")[2])
    ranks = spec.hardware.gpus_per_node * spec.hardware.num_nodes // max(spec.distribution.sequence_parallel_size, 1)
    global_keys = {key for i, key in enumerate(MICRO_KEYS) if mask >> i & 1}
    return {(k.removesuffix("_per_gpu") if k in global_keys else k): (v * ranks if k in global_keys and v else v)
            for k, v in values.items()}


def added_override_prefix(path: Path, text: str) -> Callable[[str], str]:
    """The prefix `fit --write` gives a key the user's launch script does not set yet: plain
    `key=value` where the config its command composes has the key (verl's `ppo_trainer` defaults,
    the script's `--config-name` YAML, its own overrides: `reader._compose`), `+key=value` where
    it has not, as under a mapping whose default is `{}` or null (`model.override_config`,
    `optim.override_optimizer_config`, `rollout.engine_kwargs.vllm`).
    Source: hydra-core 1.3.2 `_internal/config_loader_impl.py` `_apply_overrides_to_config`: main_ppo
    composes in struct mode, so `key=v` fails where the key is absent ("Could not override ...
    To append to your config use +key=v") and `+key=v` fails where the key holds a value ("Could not
    append to config. An item is already at ..."); verl's own examples add keys the same way
    (`+actor_rollout_ref.rollout.engine_kwargs.vllm.disable_mm_preprocessor_cache=True`).
    Assumes: the defaults of the verl release the adapter targets (keys.VERSION, keys.DEFAULTS)."""
    try:
        present = set(_compose(path, text, N.Collected()).values)
    except InputError:  # the script does not compose as a whole: verl's defaults alone
        present = set(DEFAULTS)
    return lambda key: "" if key in present else "+"


def export_spec(spec: Any, out_dir: Path, force: bool) -> list[Path]:
    """A Hydra config over verl's `ppo_trainer` with the memory knobs set, and its launch line."""
    return [C.write_new_file(out_dir / name, text, force) for name, text in render_files(spec).items()]


def render_files(spec: Any) -> dict[str, str]:
    config = _spec_to_config(spec)
    head = N.header([
        f"verl {VERSION} config written by `oomless export --to verl` for {spec.model}.",
        f"Launch: bash run_verl.sh (python3 -m verl.trainer.main_ppo --config-path=. --config-name={CONFIG_NAME}).",
        "Batch sizes give one optimizer step per rollout; gradient accumulation has no effect on planned memory.",
        "Fill in data.train_files / data.val_files and the reward function before training.",
        *_vllm_directive(spec),
    ])
    script = ("#!/bin/bash\n" + N.header([f"verl=={VERSION}", *_vllm_directive(spec)]) + 'cd "$(dirname "$0")"\n'
              f"python3 -m verl.trainer.main_ppo --config-path=. --config-name={CONFIG_NAME} \"$@\"\n")
    return {f"{CONFIG_NAME}.yaml": head + N.dump_yaml(config), "run_verl.sh": script}


VLLM_BEFORE_GRAPHS_IN_BUDGET = "0.12.0"
"""The newest vLLM verl 0.4-0.8 allowed (setup.py), named when the spec captures graphs on top of the budget."""


def _vllm_directive(spec: Any) -> list[str]:
    """The spec's vLLM release as the reader reads it back (`reader._stated_vllm`)."""
    ro = spec.rollout
    stated = ro.vllm_version or (None if ro.cuda_graphs_in_budget else VLLM_BEFORE_GRAPHS_IN_BUDGET)
    return [f"oomless: vllm=={stated}"] if stated else []


def _spec_to_config(spec: Any) -> dict[str, Any]:
    fw = "verl"
    C.require(spec, "distribution.strategy", ("fsdp",), fw)
    C.require(spec, "rollout.engine", ("vllm_colocate",), fw)
    C.require(spec, "precision", ("bf16_mixed", "bf16"), fw)
    C.require(spec, "optimizer", ("adamw",), fw)
    C.require(spec, "finetune.method", ("full", "lora"), fw)
    algorithm = C.require(spec, "algorithm", ("grpo", "ppo", "rloo"), fw)
    C.require(spec, "ray.enabled", (True,), fw)
    C.require(spec, "placement.groups", (None,), fw)
    C.require(spec, "placement.process_per_role", (False,), fw)
    dist, ro, lora = spec.distribution, spec.rollout, spec.finetune.method.value == "lora"
    if dist.offload_params != dist.offload_optimizer:
        C.cannot_express("distribution.offload_params", "verl offloads parameters and optimizer together (FSDP2 offload_policy)")
    C.require(spec, "rollout.sleep_level", (0, 1 if lora else 2), fw)
    # chunked: verl 0.9.1 has no chunked log-softmax (entropy_from_logits_with_chunking chunks the entropy alone)
    C.require(spec, "logits", ("full_bf16", "fused_token_chunks", "bf16_flash_ce", "bf16_flash_ce_entropy"), fw)
    if not spec.batch.padding_free and spec.distribution.sequence_parallel_size > 1:
        C.cannot_express("batch.padding_free", "false is verl without use_remove_padding, which its Ulysses sequence "
                         "parallelism requires (workers/config/actor.py)")
    # the reader: use_remove_padding packs rows (written from batch.padding_free); flash-attn's
    # cross-entropy runs on packed rows only, the padded path keeps full logits
    if spec.logits.value in ("bf16_flash_ce", "bf16_flash_ce_entropy"):
        C.require(spec, "batch.padding_free", (True,), fw)
        # the reader: none at rollout.temperature 1 (verl's default, never written), copy otherwise
        if C.require(spec, "logits_temperature", ("none", "copy"), fw) == "copy":
            C.cannot_express("logits_temperature", "copy is verl at a rollout temperature other than 1; oomless does not "
                             "choose one: set actor_rollout_ref.rollout.temperature yourself")
    elif spec.logits.value == "full_bf16":
        C.require(spec, "batch.padding_free", (False,), fw)
    # verl CPU-offloads the separate reference of full fine-tuning whatever its config says (the reader)
    separate_reference = spec.finetune.method.value == "full" and spec.kl_beta > 0
    if spec.distribution.offload_reference_params != separate_reference:
        C.cannot_express("distribution.offload_reference_params",
                         f"{spec.distribution.offload_reference_params} cannot be written for verl: it always keeps the "
                         "reference of full fine-tuning (KL > 0) on the CPU, and there is none otherwise")
    if lora:
        C.require(spec, "finetune.lora_dropout", (0.0,), fw)
        C.require(spec, "rollout.lora_sync", ("adapter", "adapter_layers"), fw)  # verl never merges (the reader)
    else:
        C.require(spec, "rollout.lora_sync", ("merge",), fw)  # the default; LoRA only
    for what in ("offload_model", "offload_optimizer"):
        if getattr(ro, what) and ro.sleep_level == 0:
            C.cannot_express(f"rollout.{what}", "verl offloads the actor around rollouts only with free_cache_engine (sleep_level > 0)")
    C.require(spec, "rollout.engine_in_trainer_process", (False,), fw)
    world = spec.hardware.gpus_per_node * spec.hardware.num_nodes
    micro = spec.batch.micro_batch_size
    rnd = SCH.native_round(spec, world // max(spec.distribution.sequence_parallel_size, 1))
    if rnd.problem:
        C.cannot_express("batch.steps_per_generation", rnd.problem)
    for field, why in rnd.schedule_problems:
        C.cannot_express(field, why)
    model: dict[str, Any] = {"path": spec.model, "enable_gradient_checkpointing": spec.gradient_checkpointing,
                             "use_fused_kernels": spec.logits.value == "fused_token_chunks",
                             "use_remove_padding": spec.batch.padding_free,
                             "override_config": {"attn_implementation": spec.attention.value}}
    if spec.liger_kernels:
        model["use_liger"] = True
    if lora:
        model.update(lora_rank=spec.finetune.lora_rank, lora_alpha=spec.finetune.lora_alpha, target_modules=spec.finetune.lora_targets)
    rollout: dict[str, Any] = {
        "name": "vllm", "mode": "async", "gpu_memory_utilization": ro.gpu_memory_utilization,
        "tensor_model_parallel_size": ro.tensor_parallel_size, "n": spec.batch.num_generations,
        "enforce_eager": ro.enforce_eager, "free_cache_engine": ro.sleep_level > 0,
        "layered_summon": lora and ro.lora_sync.value == "adapter_layers",
        "log_prob_micro_batch_size_per_gpu": spec.logprob_micro_batch_size,
        "max_num_batched_tokens": ro.max_num_batched_tokens or DEFAULTS[f"{R}.max_num_batched_tokens"],
        "max_num_seqs": ro.max_num_seqs or DEFAULTS[f"{R}.max_num_seqs"],
    }
    if ro.max_model_len is not None:
        rollout["max_model_len"] = ro.max_model_len
    if ro.limit_images_per_prompt is not None:
        rollout["engine_kwargs"] = {"vllm": {"limit_mm_per_prompt": {"image": ro.limit_images_per_prompt}}}
    ref: dict[str, Any] = {"log_prob_micro_batch_size_per_gpu": spec.logprob_micro_batch_size}
    actor = {
        "strategy": "fsdp2" if dist.offload_params else "fsdp", "ppo_mini_batch_size": rnd.update_prompts,
        "ppo_micro_batch_size_per_gpu": micro, "use_dynamic_bsz": spec.batch.max_tokens_per_gpu is not None,
        "use_kl_loss": spec.kl_beta > 0, "kl_loss_coef": spec.kl_beta,
        "entropy_from_logits_with_chunking": False,
        # the reader's bf16_flash_ce(_entropy): remove-padding, the entropy computed or not
        "calculate_entropy": spec.logits.value == "bf16_flash_ce_entropy",
        "entropy_from_logits_chunk_size": spec.logits_chunk_rows,
        "fsdp_config": {"param_offload": ro.offload_model and ro.sleep_level > 0,
                        "optimizer_offload": ro.offload_optimizer and ro.sleep_level > 0,
                        "offload_policy": dist.offload_params,
                        "model_dtype": "bf16" if spec.precision.value == "bf16" else "fp32"},
    }
    optim = _optim(spec)
    if optim:
        actor["optim"] = optim
    if spec.batch.max_tokens_per_gpu is not None:
        # under use_dynamic_bsz the token budget alone sets the micro-batch (batches `_dynamic_batch`)
        sequence = prompt_bound_with_images(spec) + spec.lengths.max_completion_tokens
        C.require(spec, "batch.micro_batch_size", (max(1, spec.batch.max_tokens_per_gpu // sequence),), fw)
        actor["ppo_max_token_len_per_gpu"] = spec.batch.max_tokens_per_gpu
        logprob = spec.batch.logprob_max_tokens_per_gpu or spec.batch.max_tokens_per_gpu
        rollout.update(log_prob_use_dynamic_bsz=True, log_prob_max_token_len_per_gpu=logprob)
        # The reference's log-prob budget defaults to the actor's (ppo_trainer.yaml `oc.select`): set it too.
        ref.update(log_prob_use_dynamic_bsz=True, log_prob_max_token_len_per_gpu=logprob)
    if spec.distribution.sequence_parallel_size > 1:
        actor["ulysses_sequence_parallel_size"] = spec.distribution.sequence_parallel_size
    data: dict[str, Any] = {"max_prompt_length": prompt_bound_with_images(spec),
                            "max_response_length": spec.lengths.max_completion_tokens, "train_batch_size": rnd.round_prompts}
    pixels = {k: v for k, v in (("max_pixels", spec.vision.max_pixels), ("min_pixels", spec.vision.min_pixels)) if v is not None}
    if pixels:
        data["mm_processor_kwargs"] = pixels
    config: dict[str, Any] = {
        "hydra": {"searchpath": ["pkg://verl.trainer.config"]},
        "defaults": ["ppo_trainer", "_self_"],
        "actor_rollout_ref": {"model": model, "actor": actor, "rollout": rollout,
                              "ref": ref},
        "data": data,
        "algorithm": {"adv_estimator": {"ppo": "gae"}.get(algorithm, algorithm), "use_kl_in_reward": False},
        "trainer": {"n_gpus_per_node": spec.hardware.gpus_per_node, "nnodes": spec.hardware.num_nodes,
                    "balance_batch": spec.batch.length_sorted_micro_batches,
                    **({"total_training_steps": rnd.max_rounds} if rnd.max_rounds is not None else {}),
                    **({"save_freq": rnd.save_every_rounds} if rnd.save_every_rounds is not None else {})},
    }
    if algorithm == "ppo":
        config["critic"] = {"model": {"path": spec.critic.model or spec.model}, "ppo_micro_batch_size_per_gpu": micro,
                            **({"optim": optim} if optim else {})}
    if spec.reward_model.model is not None:
        config["reward_model"] = {"enable": True, "model": {"path": spec.reward_model.model}}
    return config


IMPLEMENTATION_FLAGS = {"fused": {"fused": True}, "for_loop": {"foreach": False}}
"""`optim.override_optimizer_config` for each AdamW implementation the spec states: verl passes it
to torch AdamW as keyword arguments (verl/workers/config/optimizer.py `build_optimizer`, 0.9.1);
none is foreach, torch's choice. A launch line adds it with `+` (verl's 671B/235B Megatron
examples: `+actor_rollout_ref.actor.optim.override_optimizer_config.optimizer_offload_fraction=...`)."""


def _optim(spec: Any) -> dict[str, Any]:
    """The actor's (and a PPO critic's) `optim` keys for the spec's AdamW implementation."""
    implementation = spec.optimizer_implementation
    if implementation is None or implementation.value not in IMPLEMENTATION_FLAGS:
        return {}
    return {"override_optimizer_config": dict(IMPLEMENTATION_FLAGS[implementation.value])}
