"""The rollout round and the run's length of verl-style trainers (verl, EasyR1), in spec terms.

verl and EasyR1 count a "training step" as one rollout round: `data.train_batch_size`
(verl) / `data.rollout_batch_size` (EasyR1) prompts are generated for, `n` completions each,
and the round is then consumed in `ppo_mini_batch_size` (verl) / `global_batch_size`
(EasyR1) prompt mini-batches, one optimizer step each, `ppo_epochs` times. The spec counts
optimizer steps, and a round as `steps_per_generation` micro-batches per GPU of which
`gradient_accumulation_steps` make one optimizer step (TRL's terms), so:

    per-GPU sequences per round   R = round_prompts × n / dp
    per-GPU sequences per update  U = update_prompts × n / dp
    gradient_accumulation_steps   = U / micro
    steps_per_generation          = R / micro
    optimizer steps per round     = R / U

(`ppo_epochs` passes over a round repeat its optimizer steps without new rollouts or new
memory; the spec's timeline counts a round as R / U steps, so they are left out of the count.)

where dp = world size / Ulysses degree. Sources: verl `verl/workers/fsdp_workers.py`
(`ppo_mini_batch_size *= rollout.n`, `//= device_mesh.size() // ulysses_sequence_parallel_size`),
`verl/trainer/ppo/ray_trainer.py` (`total_training_steps`, `save_freq` in rounds); EasyR1
`verl/workers/fsdp_workers.py` (`global_batch_size *= rollout.n`,
`global_batch_size_per_device = global_batch_size // (world_size // ulysses_size)`) and
`verl/trainer/ray_trainer.py` (`training_steps` = `trainer.max_steps`, else rounds per epoch
× `total_epochs`; `save_freq` in rounds).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Round:
    gradient_accumulation_steps: int
    steps_per_generation: int
    optimizer_steps_per_round: int


def verl_round(round_prompts: int, update_prompts: int, n: int, world: int, ulysses: int, micro: int) -> Round | None:
    """The round in spec terms, or None when the prompts do not divide over the data-parallel
    ranks as verl requires (verl then refuses to start; the reader keeps its one-step plan and
    says so)."""
    dp = max(world // max(ulysses, 1), 1)
    per_round, per_update = round_prompts * n, update_prompts * n
    if per_round % dp or per_update % dp or per_round < per_update:
        return None
    r, u = per_round // dp, per_update // dp
    # A token budget (verl use_dynamic_bsz, EasyR1 dynamic_batching) packs micro-batches by
    # tokens, so `micro` is the sequences one holds at the limits: round up.
    return Round(gradient_accumulation_steps=-(-u // micro), steps_per_generation=-(-r // micro),
                 optimizer_steps_per_round=r // u)


def schedule(rounds: int | None, save_every_rounds: int | None, save_only_model: bool, rnd: Round) -> dict:
    """`schedule` fields from a run length and a save frequency counted in rounds."""
    out: dict = {}
    if rounds is not None and rounds > 0:
        out["max_steps"] = rounds * rnd.optimizer_steps_per_round
    if save_every_rounds is not None and save_every_rounds > 0:
        out["save_steps"] = save_every_rounds * rnd.optimizer_steps_per_round
        if save_only_model:
            out["save_only_model"] = True
    return out


@dataclass(frozen=True)
class NativeRound:
    """The spec's round in verl/EasyR1 terms: prompts a round and an optimizer step, and the
    run's length and save frequency in rounds (None: not set)."""

    round_prompts: int
    update_prompts: int
    max_rounds: int | None
    save_every_rounds: int | None
    problem: str | None
    """Why the spec's round is not a whole number of prompts (the writer says so), or None."""
    schedule_problems: tuple[tuple[str, str], ...] = ()
    """(schedule field, why) for a run length or save frequency that is not whole rounds."""


def native_round(spec, dp: int) -> NativeRound:
    """`verl_round` inverted: sequences per GPU × data-parallel ranks / n, in prompts."""
    b, n = spec.batch, spec.batch.num_generations
    per_round = b.micro_batch_size * spec.steps_per_generation * dp
    per_update = b.micro_batch_size * b.gradient_accumulation_steps * dp
    problem = None
    if per_round % n or per_update % n:
        problem = (f"verl-style trainers count prompts: {per_round} and {per_update} sequences a round and an optimizer "
                   f"step are not multiples of rollout.n={n}")
    elif per_round < per_update:
        problem = (f"a rollout round of {per_round} sequences is smaller than an optimizer step of {per_update}; the "
                   "prompts a round / an optimizer step cannot say it (verl_round reads it as one step per round)")
    steps_per_round = max(per_round // max(per_update, 1), 1)
    sch = spec.schedule
    schedule_problems = tuple((f"schedule.{name}", f"{value} is not a whole number of rounds of {steps_per_round} optimizer steps")
                              for name, value in (("max_steps", sch.max_steps), ("save_steps", sch.save_steps))
                              if value is not None and value % steps_per_round)
    return NativeRound(round_prompts=max(per_round // n, 1), update_prompts=max(per_update // n, 1),
                       max_rounds=-(-sch.max_steps // steps_per_round) if sch.max_steps is not None else None,
                       save_every_rounds=max(sch.save_steps // steps_per_round, 1) if sch.save_steps is not None else None,
                       problem=problem, schedule_problems=schedule_problems)
