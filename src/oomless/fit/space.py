"""The knobs `fit` may turn, grouped into factors, and the math-changing moves it may allow.

Memory knobs keep the training maths: how the batch is split (micro-batch vs accumulation,
or the token budget of a run that packs by tokens), sharding and offload, recomputation, the
logits kernel, and the vLLM engine's budget and shape (the engine itself is a layout:
`fit.layouts`). They are grouped so that a factor's effect on every memory constraint and on the step
time adds to the others' (`fit.probe` checks that): training states, training work, engine
shape, CUDA graphs, engine utilization.

Math knobs (`--allow`) change what is trained and move only when allowed: the fine-tuning
method (full → LoRA → QLoRA), LoRA rank, sequence lengths, completions per prompt (with the
prompts per step kept), image size, KL beta; and `gpus`, more GPUs (the same completions per
step on more ranks).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from ..catalog.models import ModelArch
from ..memory import constants as MC
from ..spec.run import FinetuneMethod, LogitsMode, Optimizer, OptimizerImplementation, RolloutEngine, RunSpec, Strategy
from ..planner.batches import rows_budget_per_gpu, whole_rows
from ..planner.roles import implementation_under
from .layouts import Layout
from .overrides import Overrides, changed

MATH_KNOBS = ("method", "lora_rank", "lengths", "num_generations", "max_pixels", "beta", "gpus")
"""Values of `--allow`: each changes what is trained (or, `gpus`, what it runs on)."""
MATH_FIELDS = ("finetune.method", "finetune.lora_rank", "lengths.max_prompt_tokens", "lengths.max_completion_tokens",
               "batch.num_generations", "vision.max_pixels", "kl_beta", "hardware.gpus_per_node", "hardware.num_nodes")
"""Spec fields only the math knobs move."""
CHANGES_THE_TRAINING = "changes the training"
"""Prefix of every math-changing setting's label, so no answer that uses one reads as a pure
memory fix."""
MAX_GPUS_PER_NODE = 8
"""GPUs per node `--allow gpus` grows a node to before adding nodes (the common server size)."""
MATH_STEPS = (Fraction(3, 4), Fraction(1, 2), Fraction(1, 4))
"""Fractions a length or a completion count is cut to, mildest first."""
PIXEL_STEPS = (Fraction(1, 2), Fraction(1, 4), Fraction(1, 8))
"""Fractions the largest image area is cut to (each halves the image tokens again)."""
UTILIZATIONS = tuple(round(0.10 + 0.05 * i, 2) for i in range(18))
"""gpu_memory_utilization values tried: 0.10 … 0.95 (small models beside a trainer on small
GPUs need budgets below 0.3)."""
MAX_NUM_SEQS = (256, 128, 64)
"""max_num_seqs values tried below the engine's current one (a smaller profile sampler)."""
SHARDED = (Strategy.zero3, Strategy.fsdp)


@dataclass(frozen=True)
class Option:
    overrides: Overrides
    num_changes: int
    lowers_safety: bool = False
    """It lowers a safety setting of `FitOptions.keep_safety_of` (`fit.safety`): ranked last."""


@dataclass(frozen=True)
class Factor:
    name: str
    side: str
    """"train" or "engine": which step-time terms it moves (perf.step.ENGINE_TERMS)."""
    options: tuple[Option, ...]


@dataclass(frozen=True)
class MathSetting:
    label: str
    overrides: Overrides = field(default_factory=dict)
    batch_scale: Fraction = Fraction(1)
    """Completions per step × this (num_generations cut with the prompts per step kept)."""


def _options(spec: RunSpec, variants: list[Overrides]) -> tuple[Option, ...]:
    return tuple(Option(v, len(changed(spec, v))) for v in variants)


def _steps_with_temporaries(spec: RunSpec, strategy: Strategy) -> bool:
    """torch AdamW whose step holds temporaries under ``strategy``: foreach or the per-tensor
    loop, stated or by default (`planner.roles.implementation_under`)."""
    implementation = implementation_under(spec.optimizer_implementation, strategy)
    return spec.optimizer == Optimizer.adamw and implementation not in (None, OptimizerImplementation.fused)


def states_factor(spec: RunSpec, layout: Layout, sleeping: bool) -> Factor:
    """Sharding, offload, and (colocated with a sleeping engine) offload during rollout; where
    the optimizer step holds temporaries, also the fused AdamW step (same maths, no copy)."""
    variants = []
    for strategy in Strategy:
        fused = ({}, {"optimizer_implementation": OptimizerImplementation.fused}) if _steps_with_temporaries(spec, strategy) else ({},)
        for params in (False, True) if strategy in SHARDED else (False,):
            for optimizer in (False,) if strategy == Strategy.ddp else (False, True):
                steps = fused if not optimizer else ({},)  # CPU Adam: no step on the GPU to lighten
                variants += [{"distribution.strategy": strategy, "distribution.offload_params": params,
                              "distribution.offload_optimizer": optimizer, **step} for step in steps]
    if layout.colocated and sleeping:
        variants = [{**v, "rollout.offload_model": m, "rollout.offload_optimizer": o}
                    for v in variants for m in (False, True) for o in (False, True)]
    return Factor("states", "train", _options(spec, variants))


TOKEN_BUDGET_CUTS = (2, 4, 8)
"""A training token budget (`batch.max_tokens_per_gpu`) is tried at 1/2, 1/4, 1/8 of the input's."""


def token_budgets(spec: RunSpec, seq_tokens: int) -> list[int | None]:
    """The input's token budget, then smaller ones down to one full-length sequence. Only a run
    that has a budget (its framework packs micro-batches by tokens) gets others: the spec
    cannot tell whether a framework without one could. The sequences per optimizer step do not
    change, only how they are cut into micro-batches, so the maths is kept."""
    given = spec.batch.max_tokens_per_gpu
    if given is None:
        return [None]
    return [given] + sorted({_budget_cut(spec, given, k, seq_tokens) for k in TOKEN_BUDGET_CUTS} - {given}, reverse=True)


def _budget_cut(spec: RunSpec, budget: int, k: int, seq_tokens: int) -> int:
    """1/k of a per-GPU budget, never below one sequence for the sequence-parallel group. A
    budget of whole sequences for the group (the group holds budget × sp: planner/batches.py)
    stays one: ceil(rows/k × sequence / sp), the form EasyR1's writer can say."""
    sp = spec.distribution.sequence_parallel_size
    floor, rows = rows_budget_per_gpu(1, seq_tokens, sp), whole_rows(budget, seq_tokens, sp)
    if rows is not None and rows >= k and rows % k == 0:
        return max(floor, rows_budget_per_gpu(rows // k, seq_tokens, sp))
    return max(floor, budget // k)


def _micro_of(spec: RunSpec, budget: int, seq_tokens: int) -> int:
    """The micro-batch size a budget derives: whole sequences the group's budget holds."""
    return max(1, budget * spec.distribution.sequence_parallel_size // seq_tokens)


PACKED_LOGITS = (LogitsMode.bf16_flash_ce, LogitsMode.bf16_flash_ce_entropy, LogitsMode.fused_token_chunks)
"""Kernels over packed rows (verl/EasyR1 remove-padding): verl's fused head in 512-token chunks is
offered to them (`use_fused_kernels`), never to padded rows."""


def logits_kernels(spec: RunSpec) -> list[Overrides]:
    """The logits kernel with Liger's model kernels: the input's, then each other mode (fp32
    logits only if already chosen), every option setting both fields.

    Liger's fused loss (`logits: fused`) is proposed together with Liger's model kernels
    (`liger_kernels: true`): ms-swift >= 3.5's `--use_liger_kernel` and TRL 0.25–1.14's
    `use_liger_kernel` switch both with one flag, and every framework that can write the loss can write the pair
    (TRL 0.17–0.24 `use_liger_loss` + `use_liger_kernel`, verl `use_fused_kernels` + `use_liger`;
    tests/adapters/test_trl_liger.py, test_liger_writeback.py), so the plan of the answer is the plan of the file it is
    written as, whatever the framework (the spec does not name it). The kernels keep the maths
    and only lower what a layer keeps, for the families Liger patches (`memory/activation_liger.py`).
    Leaving the fused loss where the input has both, the kernels may stay (verl, TRL >= 1.15) or
    go with the flag (ms-swift >= 3.5, TRL 0.25–1.14): both are offered, and with `--from` the
    framework's writer keeps the one it can say (`fit.expressible`)."""
    fused_pair = spec.logits == LogitsMode.fused and spec.liger_kernels
    out = [{"logits": spec.logits, "liger_kernels": spec.liger_kernels}]
    packed_family = spec.logits in PACKED_LOGITS
    for mode in (LogitsMode.full_bf16, LogitsMode.chunked, LogitsMode.fused) + ((LogitsMode.fused_token_chunks,) if packed_family else ()):
        if mode == spec.logits:
            continue
        if mode == LogitsMode.full_bf16 and packed_family:
            continue  # verl/EasyR1 without remove-padding keep every padded position: never a saving
        if mode == LogitsMode.fused:
            out.append({"logits": mode, "liger_kernels": True})
            continue
        out.append({"logits": mode, "liger_kernels": spec.liger_kernels})
        if fused_pair:
            out.append({"logits": mode, "liger_kernels": False})
    return out


def work_factor(spec: RunSpec, splits: list[Overrides], seq_tokens: int) -> Factor:
    """Batch split (or token budget) × recomputation × logits kernel (`logits_kernels`). Under
    a token budget micro_batch_size × accumulation only counts the sequences per step
    (`spec.run.Batch.max_tokens_per_gpu`), so one split stands for all. Turning a budget off is not
    offered: under the worst case fixed micro-batches always plan lower, and the cost model does
    not credit a budget's packing, so every budgeted run would be told to drop it."""
    budgets = token_budgets(spec, seq_tokens)
    if budgets != [None]:
        b = spec.batch
        same = [x for x in splits if x["batch.micro_batch_size"] == b.micro_batch_size
                and x["batch.gradient_accumulation_steps"] == b.gradient_accumulation_steps]
        product = b.micro_batch_size * b.gradient_accumulation_steps
        by_micro = {x["batch.micro_batch_size"]: x for x in splits
                    if x["batch.micro_batch_size"] * x["batch.gradient_accumulation_steps"] == product}
        base = (same or splits)[0]
        # a smaller budget carries the micro-batch size its framework derives from it (verl's reader:
        # budget // sequence; EasyR1: the budget is that size × the padded row), where the step allows it
        splits = [{**(base if budget == b.max_tokens_per_gpu else by_micro.get(_micro_of(spec, budget, seq_tokens), base)),
                   "batch.max_tokens_per_gpu": budget} for budget in budgets]
    variants = [{**split, "gradient_checkpointing": gc, **kernels, **logprob}
                for split in splits for gc in (True, False) for kernels in logits_kernels(spec)
                for logprob in logprob_splits(spec, seq_tokens)]
    return Factor("work", "train", _options(spec, variants))


def logprob_splits(spec: RunSpec, seq_tokens: int | None = None) -> list[Overrides]:
    """The log-prob (experience) micro-batch, where the run sets its own (OpenRLHF
    micro_rollout_batch_size, verl log_prob_micro_batch_size_per_gpu, EasyR1
    micro_batch_size_per_device_for_experience): the stated size halved down to 1. Same maths:
    the forwards only score what the rollout made. Unset, it follows the training micro-batch.
    A run with its own log-prob token budget (verl log_prob_max_token_len_per_gpu, EasyR1
    dynamic_batching) gets that budget cut as `token_budgets` cuts the training one, each with
    the micro-batch size it derives (budget // sequence)."""
    budget = spec.batch.logprob_max_tokens_per_gpu
    if budget is not None and seq_tokens:
        cuts = sorted({_budget_cut(spec, budget, k, seq_tokens) for k in TOKEN_BUDGET_CUTS} - {budget}, reverse=True)
        return [{}] + [{"batch.logprob_max_tokens_per_gpu": cut, "batch.logprob_micro_batch_size": _micro_of(spec, cut, seq_tokens)}
                       for cut in cuts]
    current = spec.batch.logprob_micro_batch_size
    if current is None or current <= 1:
        return [{}]
    sizes = sorted({current >> k for k in range(current.bit_length())} | {1}, reverse=True)
    return [{"batch.logprob_micro_batch_size": n} for n in sizes]


def _tensor_parallel_sizes(arch: ModelArch, gpus: int) -> list[int]:
    """Sizes vLLM accepts: divide the heads; divide or be a multiple of the KV heads
    (spec.load.check_against_arch)."""
    heads, kv = arch.num_attention_heads, arch.num_kv_heads
    return [t for t in range(1, gpus + 1) if heads % t == 0 and (kv % t == 0 or t % kv == 0)]


def engine_factor(spec: RunSpec, arch: ModelArch, layout: Layout, sleeping: bool, seq_tokens: int, default_max_num_seqs: int,
                  every_sleep_level: bool = False) -> Factor:
    """TP × max_num_seqs × sleep level × max_model_len (cut to the run's longest sequence)."""
    ro = spec.rollout
    tps = _tensor_parallel_sizes(arch, layout.vllm_gpus_per_node)
    current = ro.max_num_seqs or default_max_num_seqs
    seqs = [ro.max_num_seqs] + [n for n in MAX_NUM_SEQS if n < current]
    lens = [ro.max_model_len] + ([None] if ro.max_model_len is not None and ro.max_model_len > seq_tokens else [])
    sleeps = (_sleep_levels(spec, every_sleep_level) if sleeping else (0,)) if layout.colocated else (None,)
    variants = []
    for tp in tps:
        for n in seqs:
            for length in lens:
                for level in sleeps:
                    v = {"rollout.tensor_parallel_size": tp, "rollout.max_num_seqs": n, "rollout.max_model_len": length}
                    if level is not None:
                        v["rollout.sleep_level"] = level
                    variants.append(v)
    return Factor("engine", "engine", _options(spec, variants))


def _sleep_levels(spec: RunSpec, every: bool = False) -> tuple[int, ...]:
    """Level 2 frees as much GPU memory as level 1, holds no host copy and costs no copy time,
    so it is the one tried — and level 1 when the input has it (LoRA-only weight syncs need
    the base kept, which the spec cannot tell) or when ``every`` (a search kept to what a
    framework can say, which may have level 1 only: `fit.expressible`)."""
    return (1, 2) if spec.rollout.sleep_level == 1 or every else (2,)


def eager_factor(spec: RunSpec) -> Factor:
    return Factor("cuda_graphs", "engine", _options(spec, [{"rollout.enforce_eager": e} for e in (False, True)]))


def utilization_factor(spec: RunSpec) -> Factor:
    values = sorted({*UTILIZATIONS, spec.rollout.gpu_memory_utilization})
    return Factor("utilization", "engine", _options(spec, [{"rollout.gpu_memory_utilization": u} for u in values]))


def factors(spec: RunSpec, arch: ModelArch, layout: Layout, sleeping: bool, splits: list[Overrides],
            seq_tokens: int, default_max_num_seqs: int, every_sleep_level: bool = False) -> tuple[Factor, ...]:
    out = [states_factor(spec, layout, sleeping), work_factor(spec, splits, seq_tokens)]
    if spec.rollout.engine != RolloutEngine.hf:
        out += [engine_factor(spec, arch, layout, sleeping, seq_tokens, default_max_num_seqs, every_sleep_level),
                eager_factor(spec), utilization_factor(spec)]
    return tuple(out)


# --- math-changing moves -----------------------------------------------------------------------

def _cut(value: int, step: Fraction, floor: int = 1) -> int:
    return max(floor, int(value * step))


def _knob_steps(spec: RunSpec, arch: ModelArch, knob: str) -> list[list[MathSetting]]:
    """Per step (mildest first), the alternative settings of one allowed knob."""
    steps: list[list[MathSetting]] = []
    if knob == "method":
        steps = _method_steps(spec)
    elif knob == "gpus":
        steps = _gpu_steps(spec)
    elif knob == "lora_rank" and spec.finetune.method != FinetuneMethod.full:
        r = spec.finetune.lora_rank
        steps = [[MathSetting(f"lora_rank {_cut(r, s)}", {"finetune.lora_rank": _cut(r, s)})] for s in MATH_STEPS if _cut(r, s) < r]
    elif knob == "lengths":
        p, c = spec.lengths.max_prompt_tokens, spec.lengths.max_completion_tokens
        steps = [[MathSetting(f"max_completion_tokens {_cut(c, s)}", _with_budgets(spec, p, _cut(c, s), "lengths.max_completion_tokens")),
                  MathSetting(f"max_prompt_tokens {_cut(p, s)}", _with_budgets(spec, _cut(p, s), c, "lengths.max_prompt_tokens"))]
                 for s in MATH_STEPS]
    elif knob == "num_generations" and spec.batch.num_generations > 2:
        g = spec.batch.num_generations
        cuts = sorted({_cut(g, s, 2) for s in MATH_STEPS if _cut(g, s, 2) < g}, reverse=True)
        steps = [[MathSetting(f"num_generations {n}", {"batch.num_generations": n}, Fraction(n, g))] for n in cuts]
    elif knob == "max_pixels" and arch.vision is not None and spec.vision.images_per_prompt > 0:
        px = spec.vision.max_pixels or MC.QWEN_VL_MAX_PIXELS
        low = spec.vision.min_pixels or MC.QWEN_VL_MIN_PIXELS
        steps = [[MathSetting(f"max_pixels {int(px * s)}", {"vision.max_pixels": int(px * s)})]
                 for s in PIXEL_STEPS if int(px * s) >= low]
    elif knob == "beta" and spec.kl_beta > 0:
        steps = [[MathSetting("kl_beta 0 (no reference model)", {"kl_beta": 0.0})]]
    return steps


def _with_budgets(spec: RunSpec, prompt: int, completion: int, field: str) -> Overrides:
    """A length cut, with each token budget that is a whole number of padded rows for its
    sequence-parallel group (EasyR1 derives its budgets as micro-batch size × (max_prompt_length +
    max_response_length); verl scripts often write `n × (prompt + response)`) kept at that many
    rows of the new length."""
    out: Overrides = {field: prompt if field.endswith("prompt_tokens") else completion}
    old, new = spec.lengths.max_prompt_tokens + spec.lengths.max_completion_tokens, prompt + completion
    sp = spec.distribution.sequence_parallel_size
    for name in ("max_tokens_per_gpu", "logprob_max_tokens_per_gpu"):
        budget = getattr(spec.batch, name)
        rows = whole_rows(budget, old, sp) if budget is not None else None
        if rows is not None:
            out[f"batch.{name}"] = rows_budget_per_gpu(rows, new, sp)
    return out


def _method_steps(spec: RunSpec) -> list[list[MathSetting]]:
    """Full → LoRA (at the spec's rank) → QLoRA (4-bit NF4 base): each trains fewer or coarser
    weights, so it is a different training, never a memory fix."""
    method, rank = spec.finetune.method, spec.finetune.lora_rank
    lora = MathSetting(f"LoRA rank {rank} instead of full fine-tuning", {"finetune.method": FinetuneMethod.lora})
    qlora = MathSetting(f"QLoRA rank {rank} (4-bit base) instead of {method.value}", {"finetune.method": FinetuneMethod.qlora})
    if method == FinetuneMethod.full:
        return [[lora], [qlora]]
    if method == FinetuneMethod.lora:
        return [[qlora]]
    return []


def _gpu_steps(spec: RunSpec) -> list[list[MathSetting]]:
    """×2, ×4, ×8 the GPUs: a node grows to MAX_GPUS_PER_NODE, then nodes are added."""
    hw, out = spec.hardware, []
    for factor in (2, 4, 8):
        total = hw.gpus_per_node * hw.num_nodes * factor
        per_node = max(hw.gpus_per_node, min(MAX_GPUS_PER_NODE, total))
        if total % per_node:
            continue
        nodes = total // per_node
        out.append([MathSetting(f"{nodes} × {per_node} GPUs instead of {hw.num_nodes} × {hw.gpus_per_node}",
                                {"hardware.gpus_per_node": per_node, "hardware.num_nodes": nodes})])
    return out


def _combined(settings: list[MathSetting]) -> MathSetting:
    overrides, scale = {}, Fraction(1)
    for s in settings:
        overrides.update(s.overrides)
        scale *= s.batch_scale
    labels = [s.label.removeprefix(f"{CHANGES_THE_TRAINING}: ") for s in settings]
    return MathSetting(f"{CHANGES_THE_TRAINING}: " + " + ".join(labels), overrides, scale)


def _labelled(setting: MathSetting) -> MathSetting:
    return MathSetting(f"{CHANGES_THE_TRAINING}: {setting.label}", setting.overrides, setting.batch_scale)


def math_levels(spec: RunSpec, arch: ModelArch, allow: frozenset[str]) -> list[list[MathSetting]]:
    """Level 0 keeps the maths; then, for each k, each allowed knob at its k-th cut alone, and
    after that (with two or more knobs) all of them cut together. `fit` stops at the first
    level that fits, so one knob moving is always preferred to several."""
    levels = [[MathSetting("maths unchanged")]]
    per_knob = {k: [[_labelled(s) for s in step] for step in _knob_steps(spec, arch, k)] for k in MATH_KNOBS if k in allow}
    for k in range(len(MATH_STEPS)):
        singles = [alt for steps in per_knob.values() if k < len(steps) for alt in steps[k]]
        firsts = [steps[min(k, len(steps) - 1)][0] for steps in per_knob.values() if steps]
        if singles:
            levels.append(singles)
        if len(firsts) > 1:
            levels.append([_combined(firsts)])
    return levels
