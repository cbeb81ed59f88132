"""verl (volcengine/verl): its Hydra YAML and dotted command-line overrides ↔ a run spec.

Input: a YAML config (a full dump, or a Hydra config with `defaults: [ppo_trainer, _self_]`),
or a launch script `python3 -m verl.trainer.main_ppo [--config-path D --config-name N] k=v ...`
whose overrides are applied over the named YAML and verl's defaults.

Source: verl 0.9.1 (PyPI), `verl/trainer/config/_generated_ppo_trainer.yaml` (every key and
default, in `verl/keys.py`); `verl/workers/config/model.py` (attn_implementation from
`override_config`, default flash_attention_2); `verl/workers/rollout/vllm_rollout/
vllm_async_server.py` (vLLM in its own `mp` worker processes beside the FSDP worker; sleep level
2 after rollout for full weights, 1 for LoRA, when `free_cache_engine`); `verl/utils/config.py`
(`validate_config`: micro batches must be set unless `use_dynamic_bsz`).
Assumes: the hybrid engine (actor, reference, critic and vLLM share every GPU), FSDP; the
actor recomputes old log-probs (not expressible in the spec, see `notes`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ... import safe_paths as SP
from ...errors import InputError
from .. import HardwareFlags, ImportResult
from .. import _native as N
from .. import common as C
from .. import optim_impl as OI
from ...frontends import hydra as H
from ...memory.vllm import GRAPHS_IN_BUDGET_FROM
from ...spec.releases import in_releases
from . import batches as B
from .keys import DEFAULTS, VERSION

SUPPORTED_VERSIONS = f"verl 0.9.0 to {VERSION} (keys and defaults of {VERSION}; older configs are read with them)"
LOWEST, HIGHEST = "0.9.0", VERSION

A, R, M = "actor_rollout_ref.actor", "actor_rollout_ref.rollout", "actor_rollout_ref.model"
MAPPED = {
    f"{M}.path", f"{A}.strategy", f"{A}.fsdp_config.param_offload", f"{A}.fsdp_config.optimizer_offload",
    f"{A}.fsdp_config.offload_policy", f"{A}.fsdp_config.model_dtype", f"{A}.ppo_micro_batch_size_per_gpu",
    f"{A}.use_dynamic_bsz", f"{A}.ppo_max_token_len_per_gpu", f"{R}.log_prob_micro_batch_size_per_gpu",
    f"{A}.ppo_micro_batch_size", f"{R}.log_prob_micro_batch_size", "actor_rollout_ref.ref.log_prob_micro_batch_size",
    f"{R}.log_prob_use_dynamic_bsz", f"{R}.log_prob_max_token_len_per_gpu", "actor_rollout_ref.ref.log_prob_use_dynamic_bsz",
    "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu", f"{A}.ulysses_sequence_parallel_size",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", f"{M}.enable_gradient_checkpointing",
    f"{M}.lora_rank", f"{M}.lora_alpha", f"{M}.target_modules", f"{M}.use_fused_kernels", f"{M}.use_liger",
    f"{M}.override_config.attn_implementation", f"{A}.entropy_from_logits_with_chunking",
    f"{A}.entropy_from_logits_chunk_size", f"{M}.use_remove_padding", f"{A}.entropy_coeff", f"{A}.calculate_entropy",
    f"{R}.temperature",
    f"{R}.name", f"{R}.layered_summon", f"{R}.mode", f"{R}.gpu_memory_utilization",
    f"{R}.tensor_model_parallel_size", f"{R}.max_num_batched_tokens", f"{R}.max_num_seqs", f"{R}.max_model_len",
    f"{R}.enforce_eager", f"{R}.free_cache_engine", f"{R}.n", f"{R}.engine_kwargs.vllm.limit_mm_per_prompt.image",
    "data.max_prompt_length", "data.max_response_length", "data.mm_processor_kwargs.max_pixels",
    "data.mm_processor_kwargs.min_pixels", f"{A}.use_kl_loss", f"{A}.kl_loss_coef", "algorithm.use_kl_in_reward",
    "algorithm.kl_ctrl.kl_coef", "algorithm.adv_estimator", "critic.model.path", "trainer.n_gpus_per_node",
    "trainer.nnodes", "reward_model.enable", "reward_model.model.path",
    "data.train_batch_size", f"{A}.ppo_mini_batch_size", "trainer.total_training_steps", "trainer.save_freq",
    *(f"{role}.optim.{key}" for role in (A, "critic") for key in ("optimizer_impl", "optimizer", "override_optimizer_config.fused",
                                                                     "override_optimizer_config.foreach")),
}
OPTIM_FLAGS = ("fused", "foreach")
"""Keys of `optim.override_optimizer_config` read as torch AdamW's implementation flags."""
NO_MEMORY_EFFECT = (
    f"{A}.ppo_epochs",
)
ADVANTAGE_TO_ALGORITHM = {"gae": "ppo", "rloo": "rloo"}
UNPLANNED = {"critic.model.use_liger": "the spec's liger_kernels is the actor's: the critic is planned with HF's layers, "
             "which keep more for backward than the Liger ones verl 0.9.1's FSDP engine gives it "
             "(workers/engine/fsdp/transformer_impl.py); verl <= 0.7's CriticWorker (fsdp_workers.py) applies none"}
"""Keys that change the planned memory in a way the spec cannot say: named, never silently dropped."""


UNSCALED_AT_ONE_FROM = ">=0.9.1"
"""verl 0.9.1 `_scale_logits_by_temperature` returns the logits unscaled at a scalar temperature 1;
0.9.0 divides out of place always (workers/engine/fsdp/transformer_impl.py of the two wheels).
Files without a `# verl==X` comment are read as 0.9.1."""


def import_config(path: Path, hardware: HardwareFlags) -> ImportResult:
    text = C.read_text(path)
    release = C.check_version(text, "verl", LOWEST, HIGHEST, str(path))
    out = N.Collected()
    composed = _compose(path, text, out)
    out.notes.extend(composed.notes)
    _to_spec(_Config(composed.values), hardware, out)
    if release is not None and not in_releases(C.version_text(release), UNSCALED_AT_ONE_FROM) \
            and out.spec.get("logits_temperature") == "none":
        out.set("logits_temperature", "copy")  # 0.9.0 divides out of place whatever the temperature
    _stated_vllm(C.read_directives(text, str(path)), out)
    _report_unused(composed.user, out)
    values = composed.values
    # verl's RLHFDataset (verl/utils/dataset/rl_dataset.py) reads the parquet files' prompt_key
    # column of chat messages and applies the chat template
    data = N.data_ref("data.train_files", values.get("data.train_files"), prompt_field=values.get("data.prompt_key"),
                      image_field=values.get("data.image_key"), chat=True,
                      chat_template=values.get(f"{M}.custom_chat_template"))
    return ImportResult(out.spec, tuple(out.ignored), tuple(out.notes), data=data)


def _stated_vllm(directives: dict[str, str], out: N.Collected) -> None:
    """`# oomless: vllm==X` names the vLLM release the run uses. Unstated, the release verl 0.9.1
    installs (its `vllm` extra pins vllm==0.24.0: graphs inside the budget). verl 0.4 to 0.8
    allowed vllm 0.7.3 to 0.12.0 (setup.py `VLLM_REQUIRES`), which capture CUDA graphs on top
    of the budget, so the KV cache gets their share."""
    stated = directives.get("vllm")
    if stated is None:
        return
    release = C.parse_version("vllm version", stated)
    out.set("rollout.vllm_version", stated)
    out.set("rollout.cuda_graphs_in_budget", release >= GRAPHS_IN_BUDGET_FROM)


MAIN = ("verl.trainer.main_ppo", "main_ppo.py", "main_ppo")
OWN_CONFIGS = ("ppo_trainer", "_generated_ppo_trainer")


def _compose(path: Path, text: str, out: N.Collected) -> H.Composed:
    """The YAML, or the script's `main_ppo` command with its `--config-name` YAML and overrides,
    over verl's defaults, interpolations resolved."""
    is_script = path.suffix not in (".yaml", ".yml") and re.search(r"main_ppo", text)
    if not is_script:
        return H.compose(DEFAULTS, text, str(path), folder=path.parent, own_configs=OWN_CONFIGS)
    command, notes = C.pick_command(C.read_script(text, str(path)), lambda c: C.command_with([c], MAIN) is not None, str(path),
                                    "python3 -m verl.trainer.main_ppo key=value ...")
    out.notes.extend(notes)
    args = C.command_with([command], MAIN)[1]
    where = f"{path}:{command.line}"
    options, tokens = _split_hydra_args(args)
    overrides = [H.Override(t, where) for t in tokens]
    if "--config-name" not in options:
        return H.compose(DEFAULTS, None, where, overrides, own_configs=OWN_CONFIGS)
    folder = path.parent / options.get("--config-path", ".")
    name = options["--config-name"]
    SP.checked_path(options.get("--config-path", "."), f"{where}: --config-path")
    SP.checked_path(name, f"{where}: --config-name")
    file = folder / (name if name.endswith((".yaml", ".yml")) else f"{name}.yaml")
    if name in OWN_CONFIGS and not file.is_file():
        return H.compose(DEFAULTS, None, where, overrides, own_configs=OWN_CONFIGS)
    if name.removesuffix(".yaml") == "ppo_megatron_trainer" and not file.is_file():
        raise InputError(where, "--config-name ppo_megatron_trainer: verl's Megatron backend is not planned; "
                                "allowed: FSDP configs (ppo_trainer, actor_rollout_ref.actor.strategy fsdp or fsdp2)")
    if not file.is_file():
        raise InputError(f"{where}", f"--config-name {name}: {file} not found next to {path.name}")
    return H.compose(DEFAULTS, C.read_text(file), str(file), overrides, folder=file.parent, own_configs=OWN_CONFIGS)


def _split_hydra_args(args: list[str]) -> tuple[dict[str, str], list[str]]:
    options, overrides, i = {}, [], 0
    while i < len(args):
        word = args[i]
        if word.startswith("-"):
            name, _, value = word.partition("=")
            name = {"-cn": "--config-name", "-cp": "--config-path"}.get(name, name)
            if not value and i + 1 < len(args):
                i, value = i + 1, args[i + 1]
            options[name] = value
        elif not word.startswith("$"):  # "$@" and other arguments of the script set nothing readable
            overrides.append(word)
        i += 1
    return options, overrides


class _Config:
    """verl's defaults overlaid with the user's values, interpolations resolved."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values

    def get(self, key: str) -> Any:
        return self.values.get(key)


def _to_spec(cfg: _Config, flags: HardwareFlags, out: N.Collected) -> None:
    g = cfg.get
    out.set("model", N.model_ref(g(f"{M}.path"), f"{M}.path", out))
    n_gpus = C.as_int("trainer.n_gpus_per_node", g("trainer.n_gpus_per_node"), 1)
    out.set("hardware", N.hardware(flags, "verl", n_gpus, C.as_int("trainer.nnodes", g("trainer.nnodes"), 1), out))
    strategy = g(f"{A}.strategy")
    if strategy not in ("fsdp", "fsdp2"):
        raise InputError(f"{A}.strategy", f"{strategy!r} is not supported; allowed: fsdp, fsdp2")
    out.set("distribution.strategy", "fsdp")
    if C.as_bool(f"{A}.fsdp_config.offload_policy", g(f"{A}.fsdp_config.offload_policy")):
        out.set("distribution.offload_params", True)
        out.set("distribution.offload_optimizer", True)
    dtype = str(g(f"{A}.fsdp_config.model_dtype"))
    out.set("precision", "bf16" if dtype in ("bf16", "bfloat16") else "bf16_mixed")
    out.set("attention", g(f"{M}.override_config.attn_implementation") or "flash_attention_2")
    out.set("gradient_checkpointing", C.as_bool(f"{M}.enable_gradient_checkpointing", g(f"{M}.enable_gradient_checkpointing")))
    _finetune(cfg, out)
    _optimizer(cfg, out)
    B.batch(cfg, out)
    _rollout(cfg, out)
    _algorithm(cfg, out)
    if C.as_int(f"{M}.lora_rank", g(f"{M}.lora_rank"), 0) == 0 and out.spec.get("kl_beta", 0) > 0:
        # A separate reference exists for full fine-tuning with KL only (LoRA: the actor with its
        # adapters off); verl keeps it on the CPU whatever ref.fsdp_config.param_offload says:
        # FSDP CPUOffload(offload_params=True) / CPUOffloadPolicy (fsdp_workers.py
        # `_build_model_optimizer`, "We force reference policy to use CPUOffload", 0.4.1 to 0.8),
        # the forward-only engine's offload in 0.9 (workers/engine/fsdp/transformer_impl.py).
        out.set("distribution.offload_reference_params", True)
    out.set("ray.enabled", True)
    out.notes.append("verl recomputes old log-probs with the actor every step; the plan includes that forward "
                     "only when KL or several optimizer steps per rollout need it")


def _finetune(cfg: _Config, out: N.Collected) -> None:
    rank = C.as_int(f"{M}.lora_rank", cfg.get(f"{M}.lora_rank"), 0)
    if rank > 0:
        targets = cfg.get(f"{M}.target_modules")
        out.set("finetune", {"method": "lora", "lora_rank": rank,
                             "lora_alpha": C.as_float(f"{M}.lora_alpha", cfg.get(f"{M}.lora_alpha"), 0),
                             "lora_targets": targets if isinstance(targets, list) else "all-linear"})
    else:
        out.set("finetune.method", "full")
    if C.as_bool(f"{M}.use_liger", cfg.get(f"{M}.use_liger")):  # fsdp_workers: _apply_liger_kernel_to_instance(actor_module)
        out.set("liger_kernels", True)
    remove_padding = C.as_bool(f"{M}.use_remove_padding", cfg.get(f"{M}.use_remove_padding"))
    if remove_padding:  # dp_actor.py `unpad_input`: each micro-batch's rows packed into one
        out.set("batch.padding_free", True)
    # verl >= 0.6.1 `_balance_batch` (trainer.balance_batch, default true) sorts each rank's share
    # by workload and puts the longest in the middle micro-batch (trainer/ppo/ray_trainer.py)
    balance = cfg.get("trainer.balance_batch")  # null is falsy to verl's `if ...balance_batch:`
    out.set("batch.length_sorted_micro_batches", balance is not None and C.as_bool("trainer.balance_batch", balance))
    chunking = C.as_bool(f"{A}.entropy_from_logits_with_chunking", cfg.get(f"{A}.entropy_from_logits_with_chunking"))
    if C.as_bool(f"{M}.use_fused_kernels", cfg.get(f"{M}.use_fused_kernels")):  # FusedLinearForPPO, 512-token chunks
        out.set("logits", "fused_token_chunks")
    elif chunking and not remove_padding:  # 0.9.1's padded branch computes the entropy unchunked
        out.notes.append(f"{A}.entropy_from_logits_with_chunking has no effect without use_remove_padding (verl 0.9.1 "
                         "workers/engine/fsdp/transformer_impl.py: the padded branch calls entropy_from_logits)")
    elif remove_padding:
        if chunking:  # 0.9.1 transformer_impl.py: only the entropy is chunked; log-probs stay flash-attn's over every token
            compiled = C.as_bool(f"{A}.use_torch_compile", cfg.get(f"{A}.use_torch_compile"))
            out.notes.append(f"{A}.entropy_from_logits_with_chunking with use_remove_padding: verl chunks the entropy "
                             "alone and keeps flash-attn's log-probs over every packed token; planned as its unchunked "
                             "compiled entropy (logits bf16_flash_ce_entropy when the entropy is computed)"
                             + ("" if compiled else "; with use_torch_compile false each chunk's fp32 copy and softmax "
                                "are kept for backward (about 8 more bytes a logit), which is not planned"))
        # dp_actor.py: every real token's bf16 logits, flash-attn's cross-entropy in place unless
        # the entropy is computed (entropy_coeff != 0 or calculate_entropy); without remove-padding
        # the padded path is planned with the default (TRL's) logits moment
        entropy = (C.as_float(f"{A}.entropy_coeff", cfg.get(f"{A}.entropy_coeff"), None) != 0
                   or C.as_bool(f"{A}.calculate_entropy", cfg.get(f"{A}.calculate_entropy")))
        out.set("logits", "bf16_flash_ce_entropy" if entropy else "bf16_flash_ce")
        # 0.9 workers/engine/fsdp/transformer_impl.py `_scale_logits_by_temperature`: the logits
        # returned as they are at temperature 1, else divided out of place (memory/logits.py)
        temperature = C.as_float(f"{R}.temperature", cfg.get(f"{R}.temperature"), 0.0)
        out.set("logits_temperature", "none" if temperature == 1.0 else "copy")


def _implementation(cfg: _Config, role: str, out: N.Collected) -> str | None:
    """How ``role``'s optimizer steps. verl's `build_optimizer` (verl/workers/config/optimizer.py,
    0.9.1) imports `optim.optimizer` from `optim.optimizer_impl` (torch.optim, AdamW) and passes
    `override_optimizer_config` as keyword arguments: torch AdamW without `fused`/`foreach` is
    foreach on CUDA, `fused=True` fused, `foreach=False` for_loop. Another class (bitsandbytes,
    torchao) is noted and planned as torch AdamW's default."""
    g = cfg.get
    where, overrides = f"{role}.optim", g(f"{role}.optim.override_optimizer_config") or {}
    flags = {k: C.as_bool(f"{where}.override_optimizer_config.{k}", g(f"{where}.override_optimizer_config.{k}"))
             for k in OPTIM_FLAGS if g(f"{where}.override_optimizer_config.{k}") is not None}
    flags.update({k: C.as_bool(f"{where}.override_optimizer_config.{k}", overrides[k])
                  for k in OPTIM_FLAGS if isinstance(overrides, dict) and overrides.get(k) is not None})
    impl, name = g(f"{where}.optimizer_impl") or "torch.optim", g(f"{where}.optimizer") or "AdamW"
    if (impl, name) not in (("torch.optim", "AdamW"), ("torch.optim", "Adam")):
        out.notes.append(f"{where}.optimizer_impl {impl}, optimizer {name}: planned as torch AdamW")
        return None
    return "fused" if flags.get("fused") else "for_loop" if flags.get("foreach") is False else "foreach"


def _optimizer(cfg: _Config, out: N.Collected) -> None:
    """The actor's optimizer implementation (`_implementation`), stated where it changes the plan
    (`optim_impl.planned`); a PPO critic stepped otherwise is noted."""
    actor = _implementation(cfg, A, out)
    if str(cfg.get("algorithm.adv_estimator")) == "gae" and _implementation(cfg, "critic", out) != actor:
        out.notes.append(f"critic.optim steps AdamW otherwise than the actor's {actor}: both planned as the actor's")
    planned = OI.planned(actor, out.spec.get("distribution", {}))
    if planned is not None:
        out.set("optimizer_implementation", planned)


def _rollout(cfg: _Config, out: N.Collected) -> None:
    g = cfg.get
    name = g(f"{R}.name")
    if name in (None, "???"):
        out.notes.append(f"{R}.name is not set (verl requires it); planned as vllm")
    elif name != "vllm":
        out.notes.append(f"{R}.name={name}: planned as vLLM with the same memory fraction")
    full = C.as_int(f"{M}.lora_rank", g(f"{M}.lora_rank"), 0) == 0
    sleeps = C.as_bool(f"{R}.free_cache_engine", g(f"{R}.free_cache_engine"))
    ro: dict[str, Any] = {
        "engine": "vllm_colocate",
        "gpu_memory_utilization": C.as_float(f"{R}.gpu_memory_utilization", g(f"{R}.gpu_memory_utilization"), 0.0, 1.0),
        "tensor_parallel_size": C.as_int(f"{R}.tensor_model_parallel_size", g(f"{R}.tensor_model_parallel_size"), 1),
        "max_num_batched_tokens": C.as_int(f"{R}.max_num_batched_tokens", g(f"{R}.max_num_batched_tokens"), 1),
        "max_num_seqs": C.as_int(f"{R}.max_num_seqs", g(f"{R}.max_num_seqs"), 1),
        "enforce_eager": C.as_bool(f"{R}.enforce_eager", g(f"{R}.enforce_eager")),
        "sleep_level": (2 if full else 1) if sleeps else 0,
        "engine_in_trainer_process": g(f"{R}.mode") == "sync",
    }
    if g(f"{R}.max_model_len") is not None:
        ro["max_model_len"] = C.as_int(f"{R}.max_model_len", g(f"{R}.max_model_len"), 1)
    if g(f"{R}.engine_kwargs.vllm.limit_mm_per_prompt.image") is not None:
        ro["limit_images_per_prompt"] = C.as_int("limit_mm_per_prompt.image", g(f"{R}.engine_kwargs.vllm.limit_mm_per_prompt.image"), 0)
    if not full:
        # the adapters go to vLLM unmerged (TensorLoRARequest); the base is summoned whole or,
        # with layered_summon, one FSDP unit at a time (utils/fsdp_utils.py collect_lora_params)
        ro["lora_sync"] = "adapter_layers" if C.as_bool(f"{R}.layered_summon", g(f"{R}.layered_summon")) else "adapter"
    if sleeps:
        ro["offload_model"] = C.as_bool(f"{A}.fsdp_config.param_offload", g(f"{A}.fsdp_config.param_offload"))
        ro["offload_optimizer"] = C.as_bool(f"{A}.fsdp_config.optimizer_offload", g(f"{A}.fsdp_config.optimizer_offload"))
    out.set("rollout", ro)
    for key, field in (("data.mm_processor_kwargs.max_pixels", "max_pixels"), ("data.mm_processor_kwargs.min_pixels", "min_pixels")):
        if g(key) is not None:
            out.set(f"vision.{field}", C.as_int(key, g(key), 1))


def _algorithm(cfg: _Config, out: N.Collected) -> None:
    g = cfg.get
    estimator = g("algorithm.adv_estimator")
    algorithm = ADVANTAGE_TO_ALGORITHM.get(str(estimator), "grpo")
    out.set("algorithm", algorithm)
    beta = 0.0
    if C.as_bool(f"{A}.use_kl_loss", g(f"{A}.use_kl_loss")):
        beta = C.as_float(f"{A}.kl_loss_coef", g(f"{A}.kl_loss_coef"), 0.0)
    elif C.as_bool("algorithm.use_kl_in_reward", g("algorithm.use_kl_in_reward")):
        beta = C.as_float("algorithm.kl_ctrl.kl_coef", g("algorithm.kl_ctrl.kl_coef"), 0.0)
    out.set("kl_beta", beta)
    critic = g("critic.model.path")
    if algorithm == "ppo" and critic not in (None, g(f"{M}.path"), DEFAULTS["critic.model.path"]):
        out.set("critic.model", N.model_ref(critic, "critic.model.path", out))
    if g("reward_model.enable") and g("reward_model.model.path"):
        out.set("reward_model.model", N.model_ref(g("reward_model.model.path"), "reward_model.model.path", out))


def _known(key: str) -> bool:
    """A verl key, or a key inside one of its free-form mappings (engine_kwargs, override_config)."""
    parts = key.split(".")
    prefixes = (".".join(parts[:i]) for i in range(1, len(parts)))
    return key in DEFAULTS or any(p in DEFAULTS and DEFAULTS[p] in ({}, None) for p in prefixes)


def _report_unused(user: dict[str, Any], out: N.Collected) -> None:
    for key, value in sorted(user.items()):
        if key in MAPPED:
            continue
        if not _known(key):
            out.ignore(key, value, f"not a verl {VERSION} key")
        elif key in UNPLANNED and value != DEFAULTS.get(key):
            out.ignore(key, value, UNPLANNED[key])
        elif key in NO_MEMORY_EFFECT or value != DEFAULTS.get(key):
            out.ignore(key, value, "no effect on the planned memory")
