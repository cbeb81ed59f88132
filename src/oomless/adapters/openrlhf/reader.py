"""OpenRLHF: the `train_ppo_ray` command line ↔ a run spec, in both flag styles.

Classic flags (`--colocate_all_models`, `--vllm_num_engines`, ...) are OpenRLHF 0.8.0–0.10.1;
dotted flags (`--train.colocate_all`, `--vllm.num_engines`, ...) are 0.10.2–0.11.2 (renamed in
commit ed62d0e2). Every flag's type, default and choices come from `keys.py`, read
from `openrlhf/cli/train_ppo_ray.py` of the 0.8.11, 0.10.1 and 0.11.2 wheels (PyPI).

Placement, as `train()` in that file builds it: with colocate_all every model and the vLLM
engines share the actor's placement group; otherwise the actor (with the reference when
colocate_actor_ref), the critic (with the reward model when colocate_critic_reward) and the
engines (num_engines × tensor_parallel_size GPUs) get GPUs of their own. A reference model
exists when init_kl_coef > 0; a critic when the advantage estimator is `gae` (its weights are
critic_pretrain, else the reward model's, else the actor's); a reward model when
reward_pretrain is given without a remote reward URL. Every model is a Ray actor process; the
engines are created before the models load. vllm_enable_sleep only acts with colocate_all
(train_ppo_ray turns it off otherwise) and sleeps at level 1; deepspeed_enable_sleep offloads
idle models (`placement.offload_idle_models`).
Assumes: max_new_tokens unset (0.9+) is planned as half of max_len; the actor's old
log-prob forward is planned only when KL or PPO needs it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import InputError
from .. import HardwareFlags, ImportResult
from .. import optim_impl as OI
from .. import _native as N
from .. import common as C
from .data import data_ref
from .keys import FLAGS
from .liger import read_liger

SUPPORTED_VERSIONS = "OpenRLHF 0.8.0 to 0.10.1 (classic flags; defaults of 0.8.11 / 0.10.1) and 0.10.2 to 0.11.2 (dotted flags; defaults of 0.11.2)"
LOWEST, HIGHEST, FIRST_DOTTED = "0.8.0", "0.11.2", (0, 10, 2)
DOTTED, CLASSIC, CLASSIC_08 = "0.11.2", "0.10.1", "0.8.11"

# canonical name → (classic flag, dotted flag); None where one style has no such flag.
FLAG = {
    "colocate_all": ("--colocate_all_models", "--train.colocate_all"),
    "colocate_actor_ref": ("--colocate_actor_ref", "--train.colocate_actor_ref"),
    "colocate_critic_reward": ("--colocate_critic_reward", "--train.colocate_critic_reward"),
    "async": ("--async_train", "--train.async_enable"),
    **{f"{role}_{what}": (f"--{role}_num_{what}", f"--{role}.num_{what}")
       for role in ("actor", "ref", "critic", "reward") for what in ("nodes", "gpus_per_node")},
    "vllm_engines": ("--vllm_num_engines", "--vllm.num_engines"),
    "vllm_tp": ("--vllm_tensor_parallel_size", "--vllm.tensor_parallel_size"),
    "vllm_util": ("--vllm_gpu_memory_utilization", "--vllm.gpu_memory_utilization"),
    "vllm_sleep": ("--vllm_enable_sleep", "--vllm.enable_sleep"),
    "enforce_eager": ("--enforce_eager", "--vllm.enforce_eager"),
    "ds_sleep": ("--deepspeed_enable_sleep", "--ds.enable_sleep"),
    "zero_stage": ("--zero_stage", "--ds.zero_stage"),
    "adam_offload": ("--adam_offload", "--ds.adam_offload"),
    "ref_reward_offload": ("--ref_reward_offload", None),
    "ref_offload": (None, "--ref.offload"),
    "reward_offload": (None, "--reward.offload"),
    "grad_ckpt": ("--gradient_checkpointing", "--actor.gradient_checkpointing_enable"),
    "attn": ("--attn_implementation", "--ds.attn_implementation"),
    "param_dtype": ("--param_dtype", "--ds.param_dtype"),
    "bf16": ("--bf16", None),
    "packing": ("--packing_samples", "--ds.packing_samples"),
    "dynamic_batch": ("--use_dynamic_batch", "--train.dynamic_batch_enable"),
    "train_max_tokens": ("--train_max_tokens_per_gpu", "--train.max_tokens_per_gpu"),
    "rollout_max_tokens": ("--rollout_max_tokens_per_gpu", "--rollout.max_tokens_per_gpu"),
    "lora_rank": ("--lora_rank", "--ds.lora.rank"),
    "lora_alpha": ("--lora_alpha", "--ds.lora.alpha"),
    "lora_targets": ("--target_modules", "--ds.lora.target_modules"),
    "lora_dropout": ("--lora_dropout", "--ds.lora.dropout"),
    "load_in_4bit": ("--load_in_4bit", "--ds.load_in_4bit"),
    "micro_train": ("--micro_train_batch_size", "--train.micro_batch_size"),
    "micro_rollout": ("--micro_rollout_batch_size", "--rollout.micro_batch_size"),
    "n_samples": ("--n_samples_per_prompt", "--rollout.n_samples_per_prompt"),
    "max_len": ("--max_len", "--data.max_len"),
    "max_new_tokens": ("--max_new_tokens", "--rollout.max_new_tokens"),
    "prompt_max_len": ("--prompt_max_len", None),
    "generate_max_len": ("--generate_max_len", None),
    "init_kl": ("--init_kl_coef", "--algo.kl.init_coef"),
    "estimator": ("--advantage_estimator", "--algo.advantage.estimator"),
    "pretrain": ("--pretrain", "--actor.model_name_or_path"),
    "critic_pretrain": ("--critic_pretrain", "--critic.model_name_or_path"),
    "reward_pretrain": ("--reward_pretrain", "--reward.model_name_or_path"),
    "remote_rm": ("--remote_rm_url", "--reward.remote_url"),
    "agent": ("--agent_func_path", "--train.agent_func_path"),
    "max_images": ("--max_images_per_prompt", "--data.max_images_per_prompt"),
    "freeze_visual": ("--freeze_visual_encoder", "--actor.freeze_visual_encoder"),
    "ring_attn": ("--ring_attn_size", "--ds.ring_attn_size"),
    "ds_tp": ("--ds_tensor_parallel_size", "--ds.tensor_parallel_size"),
    "liger": ("--use_liger_kernel", "--ds.use_liger_kernel"),
}
NOT_MODELLED = {"ds_tp": "DeepSpeed AutoTP is not modelled"}
ESTIMATOR_TO_ALGORITHM = {"gae": "ppo", "rloo": "rloo", "reinforce_baseline": "rloo"}
MARKERS = ("openrlhf.cli.train_ppo_ray", "train_ppo_ray.py", "train_ppo_ray")


DEEPSPEED_ADAM = "fused"
"""OpenRLHF hands the AdamW to DeepSpeed at every ZeRO stage, 0 included: FusedAdam (one
multi-tensor kernel, no temporaries of the parameters' size), DeepSpeedCPUAdam with
--adam_offload (openrlhf/utils/deepspeed/deepspeed_utils.py: the config's `optimizer` section,
"DS auto-selects FusedAdam / DeepSpeedCPUAdam"; before, `create_optimizer` built them itself)."""


def import_config(path: Path, hardware: HardwareFlags) -> ImportResult:
    text = C.read_text(path)
    declared = C.check_version(text, "openrlhf", LOWEST, HIGHEST, str(path))
    command, notes = C.pick_command(C.read_script(text, str(path)), lambda c: C.command_with([c], MARKERS) is not None,
                                    str(path), "python3 -m openrlhf.cli.train_ppo_ray --flag value ...")
    args = C.command_with([command], MARKERS)[1]
    version = _table_version(args, declared)
    out = N.Collected()
    out.notes.extend(notes)
    given = _parse_args(args, FLAGS[version], version, out)
    _to_spec(_Args(given, version), hardware, out)
    return ImportResult(out.spec, tuple(out.ignored), tuple(out.notes), data=data_ref(given, FLAGS[version]))


def _flag_names(args: list[str]) -> list[str]:
    return [a.split("=", 1)[0] for a in args if a.startswith("--")]


def _table_version(args: list[str], declared: tuple[int, ...] | None) -> str:
    """The flag table the command follows: from the declared version, else from the style."""
    names = _flag_names(args)
    dotted_only = set(FLAGS[DOTTED]) - set(FLAGS[CLASSIC]) - set(FLAGS[CLASSIC_08])
    classic_only = (set(FLAGS[CLASSIC]) | set(FLAGS[CLASSIC_08])) - set(FLAGS[DOTTED])
    dotted = [n for n in names if n in dotted_only or ("." in n and n not in classic_only)]
    classic = [n for n in names if n in classic_only]
    if dotted and classic:
        raise InputError(classic[0], f"classic flag (OpenRLHF <= 0.10.1) mixed with dotted flag {dotted[0]} (>= 0.10.2)")
    if declared is not None:
        if declared >= FIRST_DOTTED and classic:
            raise InputError(classic[0], f"classic flag, but the file declares openrlhf {'.'.join(map(str, declared))} (dotted flags)")
        if declared < FIRST_DOTTED and dotted:
            raise InputError(dotted[0], f"dotted flag, but the file declares openrlhf {'.'.join(map(str, declared))} (classic flags)")
        return DOTTED if declared >= FIRST_DOTTED else (CLASSIC_08 if declared < (0, 9) else CLASSIC)
    if dotted:
        return DOTTED
    return CLASSIC_08 if {"--prompt_max_len", "--generate_max_len", "--bf16"} & set(names) else CLASSIC


def _parse_args(args: list[str], table: dict[str, Any], version: str, out: N.Collected) -> dict[str, Any]:
    """argparse's reading of the flags this table knows; the rest are reported."""
    given: dict[str, Any] = {}
    i, previous = 0, "train_ppo_ray"
    while i < len(args):
        word = args[i]
        i += 1
        if not word.startswith("--"):
            if not word.startswith("$"):
                raise InputError(previous, f"unexpected word {word!r} after it (argparse: unrecognized arguments)")
            continue
        previous = word.split("=", 1)[0]
        name, eq, inline = word.partition("=")
        values = [inline] if eq else []
        info = table.get(name)
        takes = _arity(info)
        while not eq and i < len(args) and not args[i].startswith("--") and (takes is None or len(values) < takes):
            values.append(args[i])
            i += 1
        if info is None:
            out.ignore(name, " ".join(values), f"not a train_ppo_ray flag of openrlhf {version}")
            continue
        given[name] = _convert(name, info, values)
    return given


def _arity(info: dict[str, Any] | None) -> int | None:
    """Values a flag takes: 0 for store_true, nargs when fixed, None for `*`/`+`."""
    if info is None:
        return None
    if info.get("action") in ("store_true", "store_false"):
        return 0
    nargs = info.get("nargs")
    return nargs if isinstance(nargs, int) else (None if nargs in ("*", "+") else 1)


def _convert(name: str, info: dict[str, Any], values: list[str]) -> Any:
    if info.get("action") in ("store_true", "store_false"):
        if values:
            raise InputError(name, f"takes no value, got {' '.join(values)!r}")
        return info.get("action") == "store_true"
    kind = {"int": int, "float": float}.get(info.get("type", "str"), str)
    expected = _arity(info)
    if (expected is not None and len(values) != expected) or (expected is None and info.get("nargs") == "+" and not values):
        raise InputError(name, f"expects {expected or 'one or more'} value(s), got {len(values)}")
    try:
        converted = [kind(v) for v in values]
    except ValueError:
        raise InputError(name, f"{' '.join(values)!r} is not a valid {kind.__name__}") from None
    choices = info.get("choices")
    bad = [v for v in converted if choices and v not in choices]
    if bad:
        raise InputError(name, f"{bad[0]!r} is not allowed; allowed: {', '.join(map(str, choices))}")
    return converted[0] if expected == 1 else converted


class _Args:
    """Canonical flag values: the user's, else the version's default."""

    def __init__(self, given: dict[str, Any], version: str) -> None:
        self.given, self.version, self.table = given, version, FLAGS[version]
        self.dotted = version == DOTTED

    def name(self, canon: str) -> str | None:
        return FLAG[canon][1 if self.dotted else 0]

    def has(self, canon: str) -> bool:
        return self.name(canon) in self.table

    def __getitem__(self, canon: str) -> Any:
        flag = self.name(canon)
        if flag is None or flag not in self.table:
            return None
        if flag in self.given:
            return self.given[flag]
        default = self.table[flag].get("default")
        return None if isinstance(default, str) and default.startswith("float(") else default

    def used(self) -> set[str]:
        return {self.name(c) for c in FLAG if self.name(c) in self.given}


def _to_spec(a: _Args, flags: HardwareFlags, out: N.Collected) -> None:
    if not a["pretrain"]:
        raise InputError(a.name("pretrain") or "--pretrain", "the actor model is required")
    out.set("model", N.model_ref(a["pretrain"], a.name("pretrain"), out))
    roles, algorithm = _roles(a, out)
    out.set("algorithm", algorithm)
    groups, gpus_per_node = _groups(a, roles)
    out.set("hardware", N.hardware(flags, "openrlhf", gpus_per_node, a["actor_nodes"], out))
    out.set("placement", {"groups": groups, "process_per_role": True,
                          "offload_idle_models": bool(a["ds_sleep"])})
    _training(a, out)
    read_liger(bool(a["liger"]), a.name("liger"), out.spec["model"], roles, out)  # liger.py
    out.set("logits", "fp32_all_positions")  # models/actor.py: every position, .to(float32), flash-attn CE
    _lengths_and_batch(a, out)
    _rollout(a, roles, out)
    out.set("kl_beta", float(a["init_kl"]))
    out.set("ray.enabled", True)
    for canon, why in NOT_MODELLED.items():
        if a[canon] not in (None, 1):
            out.ignore(a.name(canon), a[canon], why)
    mapped = a.used()
    for flag, value in sorted(a.given.items()):
        if flag not in mapped:
            out.ignore(flag, value, "no effect on the planned memory")


def _roles(a: _Args, out: N.Collected) -> tuple[list[str], str]:
    algorithm = ESTIMATOR_TO_ALGORITHM.get(a["estimator"], "grpo")
    remote = bool(a["remote_rm"] or a["agent"])
    roles = ["actor"] + (["reference"] if a["init_kl"] > 0 else [])
    if algorithm == "ppo":
        roles.append("critic")
        critic = a["critic_pretrain"] or (None if remote else (a["reward_pretrain"] or "").split(",")[0]) or a["pretrain"]
        if critic != a["pretrain"]:
            out.set("critic.model", N.model_ref(critic, a.name("critic_pretrain") or "critic", out))
    if a["reward_pretrain"] and not remote:
        roles.append("reward")
        out.set("reward_model.model", N.model_ref(a["reward_pretrain"].split(",")[0], a.name("reward_pretrain"), out))
    return roles, algorithm


def _per_node(a: _Args, role: str) -> int:
    return int(a[f"{role}_gpus_per_node"])


def _groups(a: _Args, roles: list[str]) -> tuple[list[dict[str, Any]], int]:
    engines = int(a["vllm_engines"] or 0)
    vllm_gpus = engines * int(a["vllm_tp"])
    if a["colocate_all"] and not a["async"]:
        if engines and vllm_gpus != a["actor_nodes"] * _per_node(a, "actor"):
            raise InputError(a.name("vllm_engines"), f"{engines} × tensor parallel {a['vllm_tp']} must equal the actor's "
                             f"{a['actor_nodes']} × {_per_node(a, 'actor')} GPUs with colocate_all")
        together = roles + (["vllm"] if engines else [])
        return [{"roles": together, "gpus_per_node": _per_node(a, "actor")}], _per_node(a, "actor")
    groups = []
    pairs = (("actor", "reference", "colocate_actor_ref", "ref"), ("critic", "reward", "colocate_critic_reward", "reward"))
    for first, second, together, second_flag in pairs:
        if first in roles and second in roles and (a[together] or a["colocate_all"]):
            groups.append({"roles": [first, second], "gpus_per_node": _per_node(a, "actor" if first == "actor" else "critic")})
            continue
        for role, flag in ((first, "actor" if first == "actor" else "critic"), (second, second_flag)):
            if role in roles:
                groups.append({"roles": [role], "gpus_per_node": _per_node(a, flag)})
    if engines:
        nodes = int(a["actor_nodes"])
        groups.append({"roles": ["vllm"], "gpus_per_node": max(-(-vllm_gpus // nodes), int(a["vllm_tp"]))})
    return groups, sum(g["gpus_per_node"] for g in groups)


def _engine_gpus_per_node(a: _Args, out: N.Collected) -> int:
    """GPUs per node of the vLLM engines: num_engines x tensor_parallel_size over the actor's
    nodes, as `_groups` places them (OpenRLHF `create_vllm_engines`: one placement group
    bundle per TP worker, all of an engine's workers on one node)."""
    tp, nodes = int(a["vllm_tp"]), int(a["actor_nodes"])
    per_node = -(-int(a["vllm_engines"]) * tp // nodes)
    if per_node < tp:
        out.notes.append(f"vLLM engines of tensor parallel {tp} on {per_node} GPU(s) per node: planned as {tp} GPUs "
                         "of one node per engine")
        return tp
    return per_node


def _training(a: _Args, out: N.Collected) -> None:
    stage = int(a["zero_stage"])
    if stage not in (0, 1, 2, 3):
        raise InputError(a.name("zero_stage"), f"{stage} is not a ZeRO stage; allowed: 0, 1, 2, 3")
    out.set("distribution", {"strategy": "ddp" if stage == 0 else f"zero{stage}", "offload_optimizer": bool(a["adam_offload"])})
    if OI.planned(DEEPSPEED_ADAM, out.spec["distribution"]):  # ZeRO stage 0: DeepSpeed's FusedAdam all the same
        out.set("optimizer_implementation", DEEPSPEED_ADAM)
    if a.has("param_dtype"):
        out.set("precision", "fp16_mixed" if a["param_dtype"] == "fp16" else "bf16_mixed")
    else:
        out.set("precision", "bf16_mixed" if a["bf16"] else "fp16_mixed")
    attn = "flash_attention_2" if a["packing"] else str(a["attn"])
    out.set("attention", attn if attn in ("eager", "sdpa") else "flash_attention_2")
    if attn not in ("eager", "sdpa", "flash_attention_2"):
        out.notes.append(f"attention {attn} is planned as flash_attention_2")
    out.set("gradient_checkpointing", bool(a["grad_ckpt"]))
    rank = int(a["lora_rank"] or 0)
    if rank > 0:
        targets = a["lora_targets"]
        targets = "all-linear" if targets in ("all-linear", ["all-linear"], None) else list(targets)
        out.set("finetune", {"method": "qlora" if a["load_in_4bit"] else "lora", "lora_rank": rank,
                             "lora_alpha": float(a["lora_alpha"]), "lora_dropout": float(a["lora_dropout"] or 0),
                             "lora_targets": targets})
    else:
        out.set("finetune.method", "full")


def _lengths_and_batch(a: _Args, out: N.Collected) -> None:
    if a.has("prompt_max_len"):
        prompt, completion = int(a["prompt_max_len"]), int(a["generate_max_len"])
    elif a["max_new_tokens"] is not None:
        completion = int(a["max_new_tokens"])
        prompt = int(a["max_len"]) - completion
        if prompt < 1:
            raise InputError(a.name("max_new_tokens"), f"{completion} leaves no room for a prompt within max_len {a['max_len']}")
    else:
        completion = int(a["max_len"]) // 2
        prompt = int(a["max_len"]) - completion
        out.notes.append(f"{a.name('max_new_tokens')} is not set: max_len {a['max_len']} is planned as {prompt} prompt + {completion} completion tokens")
    out.set("lengths", {"max_prompt_tokens": prompt, "max_completion_tokens": completion})
    if a.has("prompt_max_len") and a["max_len"] not in (None, prompt + completion):
        out.set("rollout.max_model_len", int(a["max_len"]))
    out.set("batch", {"micro_batch_size": int(a["micro_train"]), "logprob_micro_batch_size": int(a["micro_rollout"]),
                      "num_generations": int(a["n_samples"])})
    if a["packing"]:
        out.set("batch.padding_free", True)
    if a["dynamic_batch"]:
        _dynamic_batch(a, prompt + completion, out)
    if a["ring_attn"] not in (None, 1):
        out.set("distribution.sequence_parallel_size", int(a["ring_attn"]))
    if a["max_images"]:
        out.set("vision.images_per_prompt", int(a["max_images"]))
    if a["freeze_visual"]:
        out.set("vision.freeze_tower", True)


def _dynamic_batch(a: _Args, sequence: int, out: N.Collected) -> None:
    """OpenRLHF's dynamic batch: micro-batches packed up to a token budget per GPU for training
    (`train_max_tokens_per_gpu`) and for the log-prob forwards (`rollout_max_tokens_per_gpu`).
    Source: OpenRLHF `openrlhf/utils/seqlen_balancing.py`, `cli/train_ppo_ray.py` (defaults 16192)."""
    train = int(a["train_max_tokens"])
    out.set("batch.max_tokens_per_gpu", train)
    out.set("batch.micro_batch_size", max(1, train // sequence))
    if a["rollout_max_tokens"] is not None:
        forward = int(a["rollout_max_tokens"])
        out.set("batch.logprob_max_tokens_per_gpu", forward)
        out.set("batch.logprob_micro_batch_size", max(1, forward // sequence))
    out.notes.append(f"{a.name('dynamic_batch')}: {train} tokens per GPU per micro-batch (batch.max_tokens_per_gpu); at the "
                     f"length limits that is {max(1, train // sequence)} sequence(s) of {sequence} tokens")


def _rollout(a: _Args, roles: list[str], out: N.Collected) -> None:
    engines = int(a["vllm_engines"] or 0)
    if not engines:
        out.set("rollout.engine", "hf")
        return
    colocated = bool(a["colocate_all"]) and not a["async"]
    sleeps = bool(a["vllm_sleep"]) and colocated
    if a["vllm_sleep"] and not sleeps:
        out.ignore(a.name("vllm_sleep"), True, "train_ppo_ray turns vLLM sleep off without colocate_all")
    ro = {"engine": "vllm_colocate" if colocated else "vllm_separate", "tensor_parallel_size": int(a["vllm_tp"]),
          "gpu_memory_utilization": C.as_float(a.name("vllm_util"), a["vllm_util"], 0.0, 1.0),
          "enforce_eager": bool(a["enforce_eager"]), "engine_in_trainer_process": False, "engine_starts_first": True}
    if colocated:
        ro["sleep_level"] = 1 if sleeps else 0
    else:
        ro["num_gpus"] = _engine_gpus_per_node(a, out)
    out.spec.setdefault("rollout", {}).update(ro)
    offloads = [c for c in ("ref_reward_offload", "ref_offload", "reward_offload") if a[c]]
    if a["ds_sleep"] and not offloads and {"reference", "reward"} & set(roles):
        out.notes.append(f"{a.name('ds_sleep')} without reference/reward offload: those models are planned offloaded too")
    if offloads and not a["ds_sleep"]:
        for canon in offloads:
            out.ignore(a.name(canon), True, "offloading only the reference/reward model is not modelled; planned resident")
