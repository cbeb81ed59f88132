"""verl's batch keys ↔ the spec's batch and lengths: fixed micro-batches (per GPU, or the older
global keys divided over the data-parallel ranks), `use_dynamic_bsz` token budgets, Ulysses, and
the round / schedule (adapters/schedule.py). Split from `reader` (``cfg`` is its `_Config`)."""

from __future__ import annotations

from typing import Any

from ...errors import InputError
from .. import _native as N
from .. import common as C
from .. import schedule as SCH

A, R = "actor_rollout_ref.actor", "actor_rollout_ref.rollout"


def batch(cfg: Any, out: N.Collected) -> None:
    g = cfg.get
    prompt = C.as_int("data.max_prompt_length", g("data.max_prompt_length"), 1)
    response = C.as_int("data.max_response_length", g("data.max_response_length"), 1)
    # max_prompt_length bounds the processor's input_ids, image tokens included (RLHFDataset:
    # filter_overlong_prompts measures them, truncation "error" refuses longer prompts).
    out.set("lengths", {"max_prompt_tokens": prompt, "max_completion_tokens": response, "max_prompt_counts_images": True})
    out.set("batch.num_generations", C.as_int(f"{R}.n", g(f"{R}.n"), 1))
    sp = C.as_int(f"{A}.ulysses_sequence_parallel_size", g(f"{A}.ulysses_sequence_parallel_size"), 1)
    if sp > 1:
        out.set("distribution.sequence_parallel_size", sp)
    world = C.as_int("trainer.n_gpus_per_node", g("trainer.n_gpus_per_node"), 1) * C.as_int("trainer.nnodes", g("trainer.nnodes"), 1)
    if C.as_bool(f"{A}.use_dynamic_bsz", g(f"{A}.use_dynamic_bsz")):
        _dynamic_batch(cfg, prompt + response, out)
    else:
        micro = _micro_per_gpu(cfg, A, "ppo_micro_batch_size", world // sp)
        if micro is None:
            raise InputError(f"{A}.ppo_micro_batch_size_per_gpu", "not set; verl requires it (or the older global "
                             "ppo_micro_batch_size) unless use_dynamic_bsz=true")
        out.set("batch.micro_batch_size", micro)
    logprob = [k for k in (R, "actor_rollout_ref.ref") if not C.as_bool(f"{k}.log_prob_use_dynamic_bsz", g(f"{k}.log_prob_use_dynamic_bsz"))]
    sizes = [size for k in logprob if (size := _micro_per_gpu(cfg, k, "log_prob_micro_batch_size", world // sp)) is not None]
    if logprob and not sizes:
        raise InputError(f"{logprob[0]}.log_prob_micro_batch_size_per_gpu", "not set; verl requires it (or the older "
                         "global log_prob_micro_batch_size) unless log_prob_use_dynamic_bsz=true")
    if sizes:
        out.set("batch.logprob_micro_batch_size", max(sizes))
    older = [f"{k}.{n}" for k, n in ((A, "ppo_micro_batch_size"), (R, "log_prob_micro_batch_size"),
                                     ("actor_rollout_ref.ref", "log_prob_micro_batch_size")) if g(f"{k}.{n}") is not None]
    if older:
        out.notes.append(f"{', '.join(older)}: the older global micro-batch keys, read as verl 0.4-0.8 divides them over "
                         f"the {world // sp} data-parallel ranks; verl 0.9's engine workers refuse them (set the _per_gpu keys)")
    _round_and_schedule(cfg, world, sp, out)


def _micro_per_gpu(cfg: Any, role: str, name: str, data_parallel: int) -> int | None:
    """`{name}_per_gpu`, or the older global `{name}` divided over the data-parallel ranks as
    verl's workers do before building the actor (`fsdp_workers.py` ActorRolloutRefWorker.__init__,
    0.4.1 to 0.8: `ppo_micro_batch_size //= world // ulysses`, the same for the rollout's and
    the reference's `log_prob_micro_batch_size`; 0.9's `engine_workers.py` asserts the _per_gpu
    key instead, noted by `batch`); verl refuses both set at once (utils/config.py)."""
    g = cfg.get
    per_gpu, total = g(f"{role}.{name}_per_gpu"), g(f"{role}.{name}")
    if per_gpu is not None and total is not None:
        raise InputError(f"{role}.{name}", f"set together with {name}_per_gpu; verl allows one of them")
    if per_gpu is not None:
        return C.as_int(f"{role}.{name}_per_gpu", per_gpu, 1)
    if total is None:
        return None
    micro = C.as_int(f"{role}.{name}", total, 1) // max(data_parallel, 1)
    if micro < 1:
        raise InputError(f"{role}.{name}", f"{total} is fewer than the {data_parallel} data-parallel ranks it is "
                         f"divided over (verl's per-GPU micro-batch would be 0); allowed: at least {data_parallel}")
    return micro


def _round_and_schedule(cfg: Any, world: int, sp: int, out: N.Collected) -> None:
    """`data.train_batch_size` prompts a round, `ppo_mini_batch_size` an optimizer step,
    `trainer.total_training_steps` and `save_freq` in rounds (adapters/schedule.py)."""
    g = cfg.get
    n = C.as_int(f"{R}.n", g(f"{R}.n"), 1)
    micro = out.spec.get("batch", {}).get("micro_batch_size", 1)
    rnd = SCH.verl_round(C.as_int("data.train_batch_size", g("data.train_batch_size"), 1),
                         C.as_int(f"{A}.ppo_mini_batch_size", g(f"{A}.ppo_mini_batch_size"), 1), n, world, sp, micro)
    out.set("rollout.samples_per_request", n)
    if rnd is None:
        out.notes.append("data.train_batch_size / ppo_mini_batch_size (× rollout.n) do not divide over the GPUs as verl "
                         "requires; one rollout round per optimizer step planned")
        return
    out.set("batch.gradient_accumulation_steps", rnd.gradient_accumulation_steps)
    out.set("batch.steps_per_generation", rnd.steps_per_generation)
    steps = g("trainer.total_training_steps")
    schedule = SCH.schedule(C.as_int("trainer.total_training_steps", steps, 1) if steps is not None else None,
                            C.as_int("trainer.save_freq", g("trainer.save_freq"), -1), False, rnd)
    if schedule:
        out.set("schedule", schedule)


def _dynamic_batch(cfg: Any, sequence: int, out: N.Collected) -> None:
    """verl's dynamic batch size: micro-batches packed up to a token budget per GPU (it needs
    remove-padding). Source: verl `verl/utils/seqlen_balancing.py` `rearrange_micro_batches`
    (budget `ppo_max_token_len_per_gpu` x Ulysses degree; log-prob forwards use
    `log_prob_max_token_len_per_gpu`, which defaults to the actor's)."""
    g = cfg.get
    budget = C.as_int(f"{A}.ppo_max_token_len_per_gpu", g(f"{A}.ppo_max_token_len_per_gpu"), 1)
    out.set("batch.max_tokens_per_gpu", budget)  # packed or padded parts: use_remove_padding (reader `_finetune`)
    micro = max(1, budget // sequence)
    out.set("batch.micro_batch_size", micro)
    budgets = [C.as_int(f"{k}.log_prob_max_token_len_per_gpu", g(f"{k}.log_prob_max_token_len_per_gpu"), 1)
               for k in (R, "actor_rollout_ref.ref") if C.as_bool(f"{k}.log_prob_use_dynamic_bsz", g(f"{k}.log_prob_use_dynamic_bsz"))]
    if budgets:
        out.set("batch.logprob_max_tokens_per_gpu", max(budgets))
        out.set("batch.logprob_micro_batch_size", max(1, max(budgets) // sequence))
    out.notes.append(f"use_dynamic_bsz: {budget} tokens per GPU per micro-batch (batch.max_tokens_per_gpu); at the "
                     f"length limits that is {micro} sequence(s) of {sequence} tokens")
