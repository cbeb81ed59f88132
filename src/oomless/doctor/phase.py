"""Which phase of a GRPO/PPO step was running: read from the traceback frames and from the
progress lines frameworks print, named with the planner's phase names.

Each rule maps frames (a function name, optionally only in files matching a path) or log lines
to a phase. *Strong* rules name a phase unambiguously (``compute_log_prob``, ``wake_up``,
``backward``); *weak* rules are generic places that usually mean one (``Module._apply`` → moving
a model at load; a frame inside vLLM's model executor → generation). The innermost strong match
of the traceback that ends at the error decides, else the innermost weak one; frames after the
error (other ranks' tracebacks) are the fallback.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PHASES = ("load", "rollout", "logprob", "train", "optimizer", "weight_sync")
"""The planner's phase names (`oomless.planner.plan.PHASE_ORDER`, less PPO's critic_train)."""

SPAN_LINES = 400
"""Lines before (and after) the error searched for frames."""
SCANNED_LINE_CHARS = 4096
"""Characters of each log line searched for frames and progress lines. Traceback frame lines
are a path, a line number and a function name (a few hundred characters); a longer line is a
dump (tensor values, a serialized config) whose tail cannot hold a frame, and scanning it whole
costs time in proportion to its length for every pattern."""


@dataclass(frozen=True)
class Rule:
    phase: str
    detail: str | None
    strong: bool
    funcs: frozenset[str] = frozenset()
    path: re.Pattern[str] | None = None
    """With ``funcs`` empty, any function in a file matching ``path``."""
    line: re.Pattern[str] | None = None
    """A pattern matched against whole log lines (code lines, progress bars)."""

    def matches_frame(self, path: str, func: str) -> bool:
        if self.funcs and func not in self.funcs:
            return False
        if self.path is not None:
            return self.path.search(path) is not None
        return bool(self.funcs)


def _r(phase: str, detail: str | None, strong: bool, funcs: str = "", path: str | None = None, line: str | None = None) -> Rule:
    return Rule(phase, detail, strong, frozenset(funcs.split()), re.compile(path) if path else None, re.compile(line) if line else None)


_VLLM_ENGINE_INIT = r"vllm/(entrypoints/llm|engine/(llm_engine|async_llm_engine)|v1/engine/(core|llm_engine|async_llm))\.py"
RULES: tuple[Rule, ...] = (
    # Sources: vllm executor/worker `wake_up`, device_allocator/cumem.py; TRL grpo_trainer.py
    # (`_move_model_to_vllm`, `_generate_and_score_completions`, `compute_loss`); verl
    # fsdp_workers.py (`generate_sequences`, `compute_log_prob`, `compute_ref_log_prob`,
    # `update_actor`), dp_actor.py (`update_policy`); OpenRLHF experience_maker.py
    # (`make_experience_list`), ppo_actor.py (`ppo_train`, `_broadcast_to_vllm`); ms-swift
    # rlhf_trainer (`_move_model_to_vllm`); DeepSpeed engine.py / stage3.py / stage_1_and_2.py.
    _r("rollout", "wake_up", True, "wake_up _wake_up resume_memory_occupation", line=r"\.wake_up\("),
    # vLLM warms up its sampler/pooler at engine start (vllm/v1/worker/gpu_model_runner.py)
    _r("load", "sampler_warmup", True, "_dummy_sampler_run _dummy_pooler_run",
       line=r"occurred when warming up (?:sampler|pooler)"),
    _r("weight_sync", None, True,
       "_move_model_to_vllm move_model_to_vllm _sync_weights sync_weights sync_model_weights update_weights "
       "_update_weights update_weight update_weights_from_tensor broadcast_to_vllm _broadcast_to_vllm "
       "_sync_weights_to_vllm load_weights_from_ipc", line=r"_move_model_to_vllm\(|\bsync_weights\(|\.update_weights\("),
    _r("weight_sync", None, True, "__enter__", path=r"sharding_manager"),
    _r("rollout", "generate", True, "generate generate_sequences _generate generate_completions _generate_completions "
       "generate_async vllm_generate _generate_vllm", line=r"^\s*Processed prompts:|\.generate_sequences\(|\.generate\("),
    _r("logprob", None, True,
       "compute_log_prob compute_ref_log_prob compute_log_probs compute_ref_log_probs _compute_ref_log_probs "
       "compute_logprobs compute_values make_experience make_experience_list _generate_and_score_completions",
       line=r"Compute log probs|\.compute_(ref_)?log_probs?\(|\.compute_values\("),
    _r("train", "backward", True, "backward _engine_run_backward run_backward", line=r"run_backward\(|\.backward\("),
    _r("train", None, True, "training_step compute_loss _compute_loss update_policy update_actor update_critic ppo_train train_step",
       line=r"Update policy|\.update_(policy|actor|critic)\("),
    _r("optimizer", None, True, "_optimizer_step _take_model_step _multi_tensor_adamw _single_tensor_adamw _fused_adamw adamw"),
    _r("optimizer", None, True, "step", path=r"torch/optim/|deepspeed/(runtime|ops)/|apex/|bitsandbytes/optim|transformers/optimization"),
    _r("optimizer", None, True, line=r"optimizer\.step\(|_optimizer_step\("),
    _r("load", None, True,
       "from_pretrained _load_pretrained_model _load_state_dict_into_meta_model load_state_dict_into_model "
       "_configure_optimizer _configure_zero_optimizer _configure_distributed_model init_model _build_model_optimizer "
       "load_model get_model init_device determine_available_memory profile_run _initialize_kv_caches "
       "initialize_kv_caches initialize_cache init_cache_engine raise_if_cache_size_invalid "
       "check_enough_kv_cache_memory _check_enough_kv_cache_memory from_engine_args _move_model_to_device request_memory",
       line=r"Loading checkpoint shards|before init cache|deepspeed\.initialize\(|\.from_pretrained\("),
    _r("load", "engine_start", True, "__init__", path=_VLLM_ENGINE_INIT),
    _r("load", None, True, "__init__ initialize", path=r"deepspeed/(__init__|runtime/engine|runtime/zero/(stage3|stage_1_and_2))\.py"),
    # weak
    _r("load", None, False, "_apply convert", path=r"torch/nn/modules/module\.py"),
    _r("load", None, False, "__init__", path=r"vllm/model_executor"),
    _r("rollout", "generate", False, path=r"vllm/(model_executor|worker|v1/worker|attention|v1/attention)/"),
    _r("weight_sync", None, False, "load_weights"),
)

_FRAME = re.compile(
    r'File "([^"]+)", line (\d+), in ([\w<>.]+)'
    r'|File ([^\s:"]+\.py):(\d+),? in ([\w.<>]+)'
    r'|(?<!\S)(\S+\.py):(\d+) in ([\w<>]+)'  # starts only at a word's start: linear in the line's length
)
_RAY_TASK = re.compile(r"\bray::(\w{1,100})\.(\w{1,200})\(\)")
"""Ray's task header (python/ray/exceptions.py `RayTaskError.__str__` prints the worker's process
title "ray::Class.method" and the pid): the method is the frame that raised. verl's WorkerDict
prefixes the worker's role ("actor_rollout_generate_sequences"), so the longest suffix that names
a rule's function decides."""
_FRAMEWORK = re.compile(r"[/\\](verl|trl|swift|openrlhf|deepspeed|vllm|ray|transformers|accelerate|peft|EasyR1|slime)[/\\]")


@dataclass(frozen=True)
class PhaseGuess:
    phase: str | None
    detail: str | None
    evidence: str | None
    """The frame or log line that decided, as shown in the log."""


@dataclass(frozen=True)
class _Event:
    line: int
    rule: Rule
    evidence: str


def _events(lines: list[str], first: int) -> list[_Event]:
    out = []
    for i, whole in enumerate(lines):
        number = first + i
        raw = whole[:SCANNED_LINE_CHARS]
        for m in _FRAME.finditer(raw):
            path = m.group(1) or m.group(4) or m.group(7) or ""
            func = (m.group(3) or m.group(6) or m.group(9) or "").rsplit(".", 1)[-1]
            lineno = m.group(2) or m.group(5) or m.group(8)
            for rule in RULES:
                if rule.matches_frame(path, func):
                    out.append(_Event(number, rule, f"frame {func} ({_short(path)}:{lineno})"))
                    break
        for m in _RAY_TASK.finditer(raw):
            event = _ray_task_event(number, m.group(1), m.group(2))
            if event is not None:
                out.append(event)
        for rule in RULES:
            if rule.line is not None and rule.line.search(raw):
                out.append(_Event(number, rule, f"log line {raw.strip()[:80]!r}"))
                break
    return out


def _ray_task_event(number: int, cls: str, method: str) -> _Event | None:
    parts = method.split("_")
    for i in range(len(parts)):
        func = "_".join(parts[i:])
        rule = next((r for r in RULES if r.funcs and r.path is None and func in r.funcs), None)
        if rule is not None:
            return _Event(number, rule, f"Ray task {cls}.{method}")
    return None


def _short(path: str) -> str:
    parts = path.replace("\\", "/").split("/")
    return "/".join(parts[-3:])


def _best(events: list[_Event]) -> _Event | None:
    strong = [e for e in events if e.rule.strong]
    pool = strong or events
    return max(pool, key=lambda e: e.line) if pool else None


def infer_phase(text: str, error_line: int) -> PhaseGuess:
    """The phase at the error on line ``error_line`` (1-based), or all None if nothing tells."""
    lines = text.split("\n")
    first = max(1, error_line - SPAN_LINES)
    before = _best(_events(lines[first - 1:error_line], first))
    after = None if before else _best(_events(lines[error_line:error_line + SPAN_LINES], error_line + 1))
    chosen = before or after
    if chosen is None:
        return PhaseGuess(None, None, None)
    return PhaseGuess(chosen.rule.phase, chosen.rule.detail, chosen.evidence)


def frameworks(text: str) -> tuple[str, ...]:
    """Frameworks whose files appear in the log's frames, e.g. ("deepspeed", "trl")."""
    return tuple(sorted({m.group(1).lower() for m in _FRAMEWORK.finditer(text)}))
