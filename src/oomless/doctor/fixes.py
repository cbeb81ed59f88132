"""Fixes as changes of run-spec knobs (or environment variables), per phase and message kind.

A fix names the knob by its dotted run-spec path (`oomless schema`), what to do with it and why.
Fixes that keep the training maths the same come first; those that change it (shorter
completions, fewer generations) say so. With a spec, `realise` turns "halve" into numbers and
drops fixes the spec already applies.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class Fix:
    knob: str
    """Dotted run-spec field (``batch.micro_batch_size``) or ``env:NAME``."""
    op: str
    """``set`` (to ``target``), ``halve``, ``double``, ``lower``, ``raise``."""
    target: Any
    reason: str
    keeps_maths: bool = True
    change: str = ""
    """Human text of the change; filled by `describe` / `realise`."""
    also: tuple[tuple[str, Any], ...] = ()
    """Other run-spec fields a ``set`` fix sets with its knob (field, value): the pair the
    frameworks' one flag switches (`FUSED_LOGITS`)."""


def _f(knob: str, op: str, target: Any, reason: str, keeps_maths: bool = True, also: tuple[tuple[str, Any], ...] = ()) -> Fix:
    return describe(Fix(knob, op, target, reason, keeps_maths, also=also))


def describe(fix: Fix) -> Fix:
    words = {"halve": "halve it", "double": "double it", "lower": "lower it", "raise": "raise it"}
    change = f"set to {_show(fix.target)}" if fix.op == "set" else words.get(fix.op, fix.op)
    if fix.op in ("lower", "raise") and fix.target is not None:
        change = f"{fix.op} to {_show(fix.target)}"
    change += "".join(f", {knob} {_show(value)}" for knob, value in fix.also)
    return replace(fix, change=change)


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


MICRO_BATCH = _f("batch.micro_batch_size", "halve", None, "half the activations and logits per forward; double "
                 "batch.gradient_accumulation_steps to keep the effective batch")
CHECKPOINTING = _f("gradient_checkpointing", "set", True, "keep one tensor per layer instead of every activation")
FUSED_LOGITS = _f("logits", "set", "fused", "Liger's fused loss never holds [tokens, vocab] logits for the whole micro-batch; "
                 "with Liger's model kernels, as ms-swift's and TRL's use_liger_kernel switch both (fit.space.logits_kernels)",
                 also=(("liger_kernels", True),))
CHUNKED_LOGITS = _f("logits", "set", "chunked", "log-softmax over row chunks instead of the whole [tokens, vocab] in fp32")
SLEEP_1 = _f("rollout.sleep_level", "set", 1, "a colocated engine frees its KV cache and moves weights to host while the trainer works")
SLEEP_2 = _f("rollout.sleep_level", "set", 2, "level 1 keeps a pinned host copy of every engine's weights; level 2 keeps none")
OFFLOAD_MODEL = _f("rollout.offload_model", "set", True, "move the trainer's weights to CPU while vLLM holds the GPU")
OFFLOAD_OPT_ROLLOUT = _f("rollout.offload_optimizer", "set", True, "move optimizer states to CPU while vLLM holds the GPU")
EMPTY_CACHE = _f("rollout.empty_cache_before_rollout", "set", True, "give the trainer's cached blocks back before the engine maps its memory")
UTIL_LOWER = _f("rollout.gpu_memory_utilization", "lower", None, "the engine reserves utilization × total; the rest of the GPU is everyone else's")
UTIL_RAISE = _f("rollout.gpu_memory_utilization", "raise", None, "the budget must cover weights, profile peak and non-torch memory, and leave KV cache")
MAX_SEQS = _f("rollout.max_num_seqs", "halve", None, "fewer concurrent sequences: smaller activation and sampler peaks")
BATCHED_TOKENS = _f("rollout.max_num_batched_tokens", "halve", None, "smaller profile-run activation peak inside the budget")
EAGER = _f("rollout.enforce_eager", "set", True, "no CUDA-graph pool (vLLM >= 0.21 counts it inside the budget)")
TP_UP = _f("rollout.tensor_parallel_size", "double", None, "weights and KV heads split over more GPUs")
SEPARATE = _f("rollout.engine", "set", "vllm_separate", "give vLLM GPUs of its own instead of sharing the trainer's")
ENGINE_FIRST = _f("rollout.engine_starts_first", "set", True, "create the engine before the trainer loads (OpenRLHF/ORZ order)")
ZERO3 = _f("distribution.strategy", "set", "zero3", "shard parameters, gradients and optimizer states over the data-parallel GPUs")
OFFLOAD_OPT = _f("distribution.offload_optimizer", "set", True, "fp32 master weights and Adam states in host RAM (ZeRO-Offload)")
OFFLOAD_PARAMS = _f("distribution.offload_params", "set", True, "ZeRO-3/FSDP parameter shards in host RAM")
FUSED_ADAMW = _f("optimizer_implementation", "set", "fused", "torch's fused AdamW updates in place; the foreach step holds "
                 "one more copy of the parameters it steps (HF optim adamw_torch_fused, torch AdamW(fused=True))")
SUB_GROUP = _f("distribution.sub_group_size", "lower", 100_000_000, "ZeRO-3 steps the optimizer tile by tile; smaller tiles, smaller fp32 temporaries")
LIVE_PARAMS = _f("distribution.stage3_max_live_parameters", "lower", 100_000_000, "ZeRO-3 gathers fewer parameters at once "
                 "(ms-swift --move_model_batches and verl's layered summon do the same for the weight sync)")
LOGPROB_BATCH = _f("batch.logprob_micro_batch_size", "halve", None, "fewer sequences per no-grad log-prob forward")
NO_HOST_OFFLOAD = _f("distribution.offload_optimizer", "set", False, "CPU Adam keeps 16 B/param pinned per rank in host RAM")
RANK0_INIT = _f("distribution.rank0_init", "set", True, "only one rank per node reads the checkpoint into host RAM")
OBJECT_STORE = _f("ray.object_store_fraction", "lower", 0.1, "Ray's object store lives in /dev/shm and counts as used RAM")
RAY_THRESHOLD = _f("ray.memory_usage_threshold", "raise", 0.98, "only with real headroom: past it the kernel OOM killer acts instead")
SHORTER = _f("lengths.max_completion_tokens", "lower", None, "fewer tokens per sequence everywhere", keeps_maths=False)
EXPANDABLE = _f("env:PYTORCH_CUDA_ALLOC_CONF", "set", "expandable_segments:True",
                "lets PyTorch grow segments instead of splitting them (not with vLLM sleep mode, which asserts)")
NCCL_BUFFSIZE = _f("env:NCCL_BUFFSIZE", "set", 2_097_152, "NCCL allocates NCCL_BUFFSIZE (4 MiB default) per channel and peer")

PHASE_FIXES: dict[tuple[str | None, str | None], tuple[Fix, ...]] = {
    ("load", None): (ZERO3, UTIL_LOWER, OFFLOAD_PARAMS),
    ("load", "engine_start"): (UTIL_LOWER, OFFLOAD_MODEL, ENGINE_FIRST, SEPARATE),
    ("rollout", "generate"): (OFFLOAD_MODEL, OFFLOAD_OPT_ROLLOUT, MAX_SEQS, UTIL_LOWER),
    ("rollout", "wake_up"): (EMPTY_CACHE, OFFLOAD_MODEL, OFFLOAD_OPT_ROLLOUT, UTIL_LOWER),
    ("logprob", None): (LOGPROB_BATCH, CHUNKED_LOGITS, SLEEP_1),
    ("train", None): (MICRO_BATCH, CHECKPOINTING, FUSED_LOGITS, SLEEP_1, ZERO3),
    ("optimizer", None): (FUSED_ADAMW, OFFLOAD_OPT, ZERO3, SUB_GROUP),
    ("weight_sync", None): (LIVE_PARAMS, OFFLOAD_OPT_ROLLOUT, SLEEP_1),
    (None, None): (MICRO_BATCH, CHECKPOINTING, UTIL_LOWER, SHORTER),
}

VLLM_FIXES = {
    "vllm_startup_free_memory": (UTIL_LOWER, OFFLOAD_MODEL, ENGINE_FIRST, SEPARATE),
    "vllm_no_cache_blocks": (UTIL_RAISE, BATCHED_TOKENS, MAX_SEQS, EAGER, TP_UP),
    "vllm_max_seq_len": (UTIL_RAISE, TP_UP, SHORTER),
}
HOST_FIXES = (NO_HOST_OFFLOAD, RANK0_INIT, OBJECT_STORE)


def phase_fixes(phase: str | None, detail: str | None) -> tuple[Fix, ...]:
    return PHASE_FIXES.get((phase, detail)) or PHASE_FIXES.get((phase, None)) or PHASE_FIXES[(None, None)]


# --- realising fixes against a spec -------------------------------------------------------------


_EFFECTIVE = {"batch.logprob_micro_batch_size": "logprob_micro_batch_size"}
"""Knobs whose unset value defaults to another field: the run spec's property giving the value used."""


def _get(spec: Any, dotted: str) -> Any:
    if dotted in _EFFECTIVE:
        return getattr(spec, _EFFECTIVE[dotted], None)
    if dotted == "optimizer_implementation" and hasattr(spec, "distribution"):
        from ..planner.roles import optimizer_implementation  # the planner only where a spec is realised

        resolved = optimizer_implementation(spec)  # unset: foreach under DDP/FSDP, DeepSpeed's own (None) under ZeRO
        return resolved.value if resolved is not None else None
    node = spec
    for part in dotted.split("."):
        node = getattr(node, part, None)
        if node is None:
            return None
    return getattr(node, "value", node)


def realise(fix: Fix, spec: Any) -> Fix | None:
    """``fix`` with concrete numbers for ``spec``; None when the spec already does it, or it
    does not apply (rollout knobs without vLLM, sleep knobs without colocation)."""
    if fix.knob.startswith("env:"):
        return fix
    engine = _get(spec, "rollout.engine")
    if fix.knob.startswith("rollout.") and fix.knob != "rollout.engine" and engine == "hf":
        return None
    colocate_only = ("rollout.sleep_level", "rollout.offload_model", "rollout.offload_optimizer", "rollout.empty_cache_before_rollout")
    if fix.knob in colocate_only and engine != "vllm_colocate":
        return None
    if fix.knob == "optimizer_implementation":
        return _fused_adamw(fix, spec)
    current = _get(spec, fix.knob)
    if current is None and fix.op != "set":
        return fix
    return _concrete(fix, current, spec)


def _fused_adamw(fix: Fix, spec: Any) -> Fix | None:
    """Only where the step does hold temporaries: torch AdamW run foreach or per tensor (the
    spec's, or foreach by default under DDP/FSDP: `planner.roles.optimizer_implementation`)."""
    current = _get(spec, "optimizer_implementation")
    if current is None or _get(spec, "optimizer") != "adamw":
        return None
    return _concrete(fix, current, spec)  # None where it is fused already


def _concrete(fix: Fix, current: Any, spec: Any) -> Fix | None:
    if fix.op == "set":
        if current == fix.target or (fix.knob == "distribution.strategy" and current in ("zero3", "fsdp")):
            return None
        if fix.knob == "rollout.sleep_level" and isinstance(current, int) and current >= fix.target:
            return None
        also = "".join(f", {knob} {_show(_get(spec, knob))} → {_show(value)}" for knob, value in fix.also
                       if _get(spec, knob) != value)
        return replace(fix, change=f"{_show(current)} → {_show(fix.target)}{also}")
    if fix.op == "halve" and isinstance(current, int):
        if current <= 1:
            return None
        change = f"{current} → {max(1, current // 2)}"
        if fix.knob == "batch.micro_batch_size":
            accumulation = _get(spec, "batch.gradient_accumulation_steps") or 1
            change += f", batch.gradient_accumulation_steps {accumulation} → {accumulation * 2}"
        return replace(fix, change=change)
    if fix.op == "double" and isinstance(current, int):
        return replace(fix, change=f"{current} → {current * 2}")
    if fix.op in ("lower", "raise") and isinstance(current, (int, float)) and fix.target is not None:
        moves = fix.target < current if fix.op == "lower" else fix.target > current
        return replace(fix, change=f"{_show(current)} → {_show(fix.target)}") if moves else None
    if fix.op in ("lower", "raise") and isinstance(current, (int, float)):
        return replace(fix, change=f"{fix.op} it from {_show(current)}")
    return fix
