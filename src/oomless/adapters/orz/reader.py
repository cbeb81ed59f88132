"""Open-Reasoner-Zero: a playground script's experiment config ↔ a run spec.

The script is read with `ast`, never run: the class attributes of its `PPOExpConfig`
dataclass (a subclass of `BasePPOExpConfig`) are evaluated in order from literals, earlier
attributes, module constants (`DEBUG_MODE` is False: production values), `x if c else y`,
arithmetic and `ListConfig([...])`; anything else (f-strings, calls) is reported and not used.

Source: Open-Reasoner-Zero main (orz 0.1.0, 2025-06), `orz/exps/examples/ppo/ppo_base_exp.py`
(`BasePPOExpConfig` defaults, in `DEFAULTS`; `BasePPOExp.trainer` creates the vLLM engines
before the models) and `orz/ppo/trainer.py` (`build_models`: a reference model always, a
critic when `critic_pretrain`, a reward model when `reward_pretrain`; with colocate_all each
role and one engine per GPU share a placement group, asserted `actor_num_gpus_per_node == 1`
and `actor_num_nodes == vllm_num_engines`, and idle models and engines are offloaded to CPU
between phases; otherwise actor+reference and critic+reward share GPUs when colocated and the
engines have their own).
Assumes: ORZ's "nodes" count GPUs (its scripts give each role `N` nodes of 1 GPU); the
engines' CPU offload is planned as vLLM sleep level 1; packed training rows
(`packing_max_len`) are planned as micro batches of full-length sequences.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path
from typing import Any

from ...errors import InputError
from .. import HardwareFlags, ImportResult
from .. import _native as N
from .. import common as C
from .. import optim_impl as OI
from .keys import DEFAULTS

DEEPSPEED_ADAM = "fused"
"""ORZ's OpenRLHF-derived strategy hands AdamW to DeepSpeed at every ZeRO stage, 0 included:
FusedAdam (no temporaries of the parameters' size), DeepSpeedCPUAdam with adam_offload
(orz/ppo/deepspeed_strategy: `create_optimizer`, FusedAdam / DeepSpeedCPUAdam)."""

SUPPORTED_VERSIONS = "Open-Reasoner-Zero 0.1.0 (main, 2025-06; defaults of orz/exps/examples/ppo/ppo_base_exp.py)"
LOWEST, HIGHEST = "0.1.0", "0.1.0"

PLAYGROUND_FIELDS = {"use_orm_score", "eval_prompt_data", "prompt_data_probs", "top_k", "stop", "total_num_nodes", "use_grpo"}
MAPPED = {
    "ref_num_nodes", "ref_num_gpus_per_node", "reward_num_nodes", "reward_num_gpus_per_node", "actor_num_nodes",
    "actor_num_gpus_per_node", "critic_num_nodes", "critic_num_gpus_per_node", "colocate_critic_reward",
    "colocate_actor_ref", "colocate_all", "vllm_num_engines", "vllm_tensor_parallel_size", "pretrain",
    "critic_pretrain", "reward_pretrain", "zero_stage", "bf16", "adam_offload", "flash_attn", "gradient_checkpointing",
    "max_num_batched_tokens", "enforce_eager", "gpu_memory_utilization", "prompt_max_len", "generate_max_len",
    "micro_train_batch_size", "micro_forward_batch_size", "max_len", "n_samples_per_prompt", "init_kl_coef",
    "total_num_nodes", "use_grpo",
}


MAX_SCRIPT_CHARS = 4 * 1024**2
"""Largest ORZ script read (4 MiB; ORZ's playground scripts are a few KiB)."""
MAX_EVAL_DEPTH = 100
"""Deepest expression evaluated; deeper ones stay unresolved (and are reported)."""
MAX_LITERAL_LENGTH = 1_000_000
"""Longest string or list an expression may build (`'a' * n`, `[0] * n`, concatenation):
checked before it is built, so `'a' * 10**19` is unresolved instead of a MemoryError."""
MAX_LITERAL_INT = 2**63
"""Largest integer an expression may produce (int64); a chain of products stops there."""


class _Unresolved:
    def __init__(self, source: str) -> None:
        self.source = source


def _source(node: ast.expr) -> str:
    """The expression as written, shortened for a one-line report."""
    try:
        text = ast.unparse(node)
    except RecursionError:
        return "<an expression nested too deeply>"
    return text if len(text) <= 200 else f"{text[:200]}… ({len(text):,} characters)"


def import_config(path: Path, hardware: HardwareFlags) -> ImportResult:
    text = C.read_text(path)
    C.check_version(text, "orz", LOWEST, HIGHEST)
    if len(text) > MAX_SCRIPT_CHARS:
        raise InputError(str(path), f"{len(text):,} characters; an ORZ script of at most {MAX_SCRIPT_CHARS:,} is read")
    try:
        tree = ast.parse(text, str(path))
    except SyntaxError as err:
        raise InputError(str(path), f"not valid Python at line {err.lineno}: {err.msg}") from None
    except (RecursionError, MemoryError):  # CPython's parser on `1 + 1 + ...` thousands of terms long
        raise InputError(str(path), "an expression nested too deeply to parse (thousands of terms or "
                         "brackets); ORZ configs are plain literals") from None
    cls = _config_class(tree, path)
    out = N.Collected()
    user = _class_values(tree, cls, out)
    values = {**DEFAULTS, **{k: v for k, v in user.items() if not isinstance(v, _Unresolved)}}
    _to_spec(values, hardware, out)
    for key, value in user.items():
        if isinstance(value, _Unresolved):
            if key in MAPPED:
                raise InputError(key, f"cannot be read without running the script: {value.source}")
            out.ignore(key, value.source, "not a literal; not read")
        elif key == "packing_max_len":
            out.ignore(key, value, "packed training rows are planned as micro batches of full-length sequences")
        elif key not in MAPPED and key not in DEFAULTS and key not in PLAYGROUND_FIELDS:
            out.ignore(key, value, "not a BasePPOExpConfig field; no effect on the planned memory")
        elif key in PLAYGROUND_FIELDS and key not in MAPPED:
            out.ignore(key, value, "no effect on the planned memory")
        elif key not in MAPPED and value != DEFAULTS[key]:
            out.ignore(key, value, "no effect on the planned memory")
    return ImportResult(out.spec, tuple(out.ignored), tuple(out.notes))


def _config_class(tree: ast.Module, path: Path) -> ast.ClassDef:
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    for node in classes:
        bases = [ast.unparse(b) for b in node.bases]
        if node.name == "PPOExpConfig" or any(b.endswith("PPOExpConfig") for b in bases):
            return node
    raise InputError(str(path), "no `class PPOExpConfig(BasePPOExpConfig)` found")


def _module_constants(tree: ast.Module) -> dict[str, Any]:
    env: dict[str, Any] = {"DEBUG_MODE": False, "True": True, "False": False, "None": None}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name != "DEBUG_MODE":
                value = _evaluate(node.value, env)
                if not isinstance(value, _Unresolved):
                    env[name] = value
    return env


def _class_values(tree: ast.Module, cls: ast.ClassDef, out: N.Collected) -> dict[str, Any]:
    env = _module_constants(tree)
    values: dict[str, Any] = {}
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            name, expr = node.target.id, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, expr = node.targets[0].id, node.value
        else:
            continue
        value = _evaluate(expr, {**env, **values})
        values[name] = value
    return values


_BINARY = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b}
_COMPARE = {ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Lt: lambda a, b: a < b,
            ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b}


def _evaluate(node: ast.expr, env: dict[str, Any]) -> Any:
    """A literal expression's value, or `_Unresolved` with its source."""
    try:
        return _eval(node, env, 0)
    except (KeyError, TypeError, ValueError, ZeroDivisionError, OverflowError, MemoryError, RecursionError, _Stop):
        return _Unresolved(_source(node))


class _Stop(Exception):
    pass


def _eval(node: ast.expr, env: dict[str, Any], depth: int) -> Any:
    if depth > MAX_EVAL_DEPTH:
        raise _Stop
    depth += 1
    if isinstance(node, ast.Constant):
        return _bounded(node.value)
    if isinstance(node, ast.Name):
        value = env[node.id]
        if isinstance(value, _Unresolved):
            raise _Stop
        return value
    if isinstance(node, (ast.List, ast.Tuple)):
        return _bounded([_eval(e, env, depth) for e in node.elts])
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
        operand = _eval(node.operand, env, depth)
        return (not operand) if isinstance(node.op, ast.Not) else -operand
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left, env, depth), _eval(node.right, env, depth)
        _check_size(node.op, left, right)
        return _bounded(_BINARY[type(node.op)](left, right))
    if isinstance(node, ast.BoolOp):
        values = [_eval(v, env, depth) for v in node.values]
        return all(values) if isinstance(node.op, ast.And) else next((v for v in values if v), values[-1])
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
        return _COMPARE[type(node.ops[0])](_eval(node.left, env, depth), _eval(node.comparators[0], env, depth))
    if isinstance(node, ast.IfExp):
        return _eval(node.body, env, depth) if _eval(node.test, env, depth) else _eval(node.orelse, env, depth)
    if isinstance(node, ast.Call) and _source(node.func) == "ListConfig" and len(node.args) == 1:
        return _eval(node.args[0], env, depth)
    raise _Stop


def _check_size(op: ast.operator, left: Any, right: Any) -> None:
    """Refuse (unresolved) a repetition or concatenation longer than `MAX_LITERAL_LENGTH`
    before Python builds it."""
    sized = (str, bytes, list)
    if isinstance(op, ast.Mult) and (isinstance(left, sized) or isinstance(right, sized)):
        seq, times = (left, right) if isinstance(left, sized) else (right, left)
        if isinstance(times, int) and len(seq) * max(times, 0) > MAX_LITERAL_LENGTH:
            raise _Stop
    if isinstance(op, ast.Add) and isinstance(left, sized) and isinstance(right, sized):
        if len(left) + len(right) > MAX_LITERAL_LENGTH:
            raise _Stop


def _bounded(value: Any) -> Any:
    """``value`` when it is a size a config holds: ints within int64, finite floats, strings
    and lists within `MAX_LITERAL_LENGTH`; otherwise the expression stays unresolved."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_LITERAL_INT:
        raise _Stop
    if isinstance(value, float) and not math.isfinite(value):
        raise _Stop
    if isinstance(value, (str, bytes, list)) and len(value) > MAX_LITERAL_LENGTH:
        raise _Stop
    return value


PLACEHOLDER = "example_path"


def _to_spec(v: dict[str, Any], flags: HardwareFlags, out: N.Collected) -> None:
    if v["pretrain"] == PLACEHOLDER:
        raise InputError("pretrain", f"left at ORZ's placeholder {PLACEHOLDER!r}; set the actor model")
    if v["critic_pretrain"] == PLACEHOLDER:
        v["critic_pretrain"] = v["pretrain"]
        out.notes.append(f"critic_pretrain is ORZ's placeholder {PLACEHOLDER!r}: planned as the actor's model")
    if v["reward_pretrain"] == PLACEHOLDER:
        v["reward_pretrain"] = None
        out.notes.append(f"reward_pretrain is ORZ's placeholder {PLACEHOLDER!r}: planned without a reward model")
    out.set("model", N.model_ref(v["pretrain"], "pretrain", out))
    algorithm = "ppo" if v["critic_pretrain"] else "grpo"
    out.set("algorithm", algorithm)
    if algorithm == "ppo" and v["critic_pretrain"] != v["pretrain"]:
        out.set("critic.model", N.model_ref(v["critic_pretrain"], "critic_pretrain", out))
    if v["reward_pretrain"]:
        out.set("reward_model.model", N.model_ref(str(v["reward_pretrain"]).split(",")[0], "reward_pretrain", out))
    roles = ["actor", "reference"] + (["critic"] if algorithm == "ppo" else []) + (["reward"] if v["reward_pretrain"] else [])
    _placement(v, roles, flags, out)
    stage = C.as_int("zero_stage", v["zero_stage"], 0)
    if stage > 3:
        raise InputError("zero_stage", f"{stage} is not a ZeRO stage; allowed: 0, 1, 2, 3")
    out.set("distribution", {"strategy": "ddp" if stage == 0 else f"zero{stage}",
                             "offload_optimizer": C.as_bool("adam_offload", v["adam_offload"])})
    if OI.planned(DEEPSPEED_ADAM, out.spec["distribution"]):  # ZeRO stage 0: DeepSpeed's FusedAdam all the same
        out.set("optimizer_implementation", DEEPSPEED_ADAM)
    out.set("precision", "bf16_mixed" if C.as_bool("bf16", v["bf16"]) else "fp16_mixed")
    out.set("attention", "flash_attention_2" if C.as_bool("flash_attn", v["flash_attn"]) else "eager")
    out.set("gradient_checkpointing", C.as_bool("gradient_checkpointing", v["gradient_checkpointing"]))
    out.set("logits", "bf16_all_positions")  # orz/ppo/models.py log_softmax over every position; actors.py entropy
    out.set("finetune.method", "full")
    out.set("batch", {"micro_batch_size": C.as_int("micro_train_batch_size", v["micro_train_batch_size"], 1),
                      "logprob_micro_batch_size": C.as_int("micro_forward_batch_size", v["micro_forward_batch_size"], 1),
                      "num_generations": C.as_int("n_samples_per_prompt", v["n_samples_per_prompt"], 1)})
    prompt = C.as_int("prompt_max_len", v["prompt_max_len"], 1)
    completion = C.as_int("generate_max_len", v["generate_max_len"], 1)
    out.set("lengths", {"max_prompt_tokens": prompt, "max_completion_tokens": completion})
    out.set("kl_beta", C.as_float("init_kl_coef", v["init_kl_coef"], 0.0))
    if v["max_len"] is not None and C.as_int("max_len", v["max_len"], 1) != prompt + completion:
        out.set("rollout.max_model_len", C.as_int("max_len", v["max_len"], 1))
    out.set("ray.enabled", True)
    out.notes.append("ORZ always loads a reference model (trainer.build_models), whatever the KL coefficients")


def _placement(v: dict[str, Any], roles: list[str], flags: HardwareFlags, out: N.Collected) -> None:
    gpus = {r: C.as_int(f"{r}_num_nodes", v[f"{r}_num_nodes"], 1) * C.as_int(f"{r}_num_gpus_per_node", v[f"{r}_num_gpus_per_node"], 1)
            for r in ("actor", "ref", "critic", "reward")}
    engines = C.as_int("vllm_num_engines", v["vllm_num_engines"], 1)
    tp = C.as_int("vllm_tensor_parallel_size", v["vllm_tensor_parallel_size"], 1)
    colocate = C.as_bool("colocate_all", v["colocate_all"])
    if colocate:
        if v["actor_num_gpus_per_node"] != 1 or v["actor_num_nodes"] != engines or tp != 1:
            raise InputError("vllm_num_engines", f"colocate_all needs actor_num_gpus_per_node 1 and actor_num_nodes == "
                             f"vllm_num_engines with tensor parallel 1 (ORZ asserts it); got {v['actor_num_nodes']}, {engines}, {tp}")
        totals = [(roles + ["vllm"], gpus["actor"])]
    else:
        totals = _separate_groups(v, roles, gpus) + [(["vllm"], engines * tp)]
    total = sum(t for _, t in totals)
    nodes = flags.num_nodes or max(1, math.ceil(total / (flags.gpus_per_node or min(8, total))))
    groups = [{"roles": r, "gpus_per_node": max(math.ceil(t / nodes), tp if r == ["vllm"] else 1)} for r, t in totals]
    per_node = sum(g["gpus_per_node"] for g in groups)
    if flags.gpus_per_node is None:
        out.notes.append(f"ORZ's config uses {total} GPUs: planned as {nodes} node(s) of {per_node} (--gpus-per-node/--nodes change it)")
    out.set("hardware", N.hardware(flags, "orz", per_node, nodes, out))
    out.set("placement", {"groups": groups, "process_per_role": True, "offload_idle_models": colocate})
    ro: dict[str, Any] = {
        "engine": "vllm_colocate" if colocate else "vllm_separate", "tensor_parallel_size": tp,
        "gpu_memory_utilization": C.as_float("gpu_memory_utilization", v["gpu_memory_utilization"], 0.0, 1.0),
        "max_num_batched_tokens": C.as_int("max_num_batched_tokens", v["max_num_batched_tokens"], 1),
        "enforce_eager": C.as_bool("enforce_eager", v["enforce_eager"]),
        "engine_in_trainer_process": False, "engine_starts_first": True,
    }
    if colocate:
        ro["sleep_level"] = 1
    else:
        ro["num_gpus"] = _engine_gpus_per_node(groups, tp, out)
    out.spec.setdefault("rollout", {}).update(ro)


def _engine_gpus_per_node(groups: list[dict[str, Any]], tp: int, out: N.Collected) -> int:
    """The vLLM group's GPUs per node: num_engines x tensor_parallel_size spread over the nodes
    (Ray places each engine's TP workers in one bundle group, `create_vllm_engines`)."""
    per_node = next(g["gpus_per_node"] for g in groups if g["roles"] == ["vllm"])
    if per_node < tp:
        out.notes.append(f"vLLM engines of tensor parallel {tp} on {per_node} GPU(s) per node: planned as {tp} GPUs "
                         "of one node per engine")
        return tp
    return per_node


def _separate_groups(v: dict[str, Any], roles: list[str], gpus: dict[str, int]) -> list[tuple[list[str], int]]:
    out: list[tuple[list[str], int]] = []
    for first, second, together in (("actor", "reference", "colocate_actor_ref"), ("critic", "reward", "colocate_critic_reward")):
        key2 = "ref" if second == "reference" else second
        if first in roles and second in roles and C.as_bool(together, v[together]):
            out.append(([first, second], gpus[first]))
            continue
        out += [([r], gpus[k]) for r, k in ((first, first), (second, key2)) if r in roles]
    return out
