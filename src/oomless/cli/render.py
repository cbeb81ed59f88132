"""Human-readable plan output (rich tables). Sizes in GiB/MiB, labelled as binary units."""

from __future__ import annotations

import re

from rich.console import Console
from rich.table import Table

from ..planner import verdict as V
from ..planner.plan import Plan, PhaseMemory
from ..units import format_bytes

NUM_TOP_COMPONENTS = 4


def _top(phase: PhaseMemory) -> str:
    comps = sorted(phase.components, key=lambda c: c.num_bytes, reverse=True)[:NUM_TOP_COMPONENTS]
    return ", ".join(f"{c.name} {format_bytes(c.num_bytes)}" for c in comps)


def _pct(part: int, whole: int | None) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


_UNIT_SPACE = re.compile(r"(\d) (GiB|MiB|KiB|tokens)")
_KEEP = "\u00a0"  # textwrap does not break at a no-break space


def wrap_text(text: str, width: int, first: str = "", rest: str = "") -> str:
    """``text`` wrapped at ``width`` without a line break between a number and its unit."""
    import textwrap

    kept = _UNIT_SPACE.sub(rf"\1{_KEEP}\2", text)
    wrapped = textwrap.fill(kept, width=max(width, 40), initial_indent=first, subsequent_indent=rest,
                            break_on_hyphens=False)
    return wrapped.replace(_KEEP, " ")


def _colours_numbers(out: Console) -> bool:
    """rich's number highlighting only where it shows: off a terminal (a pipe, a file) no style
    is written, and skipping it spares compiling the highlighter's patterns (~7 ms of start-up)."""
    return out.is_terminal or out.record


def _print_bullet(out: Console, text: str) -> None:
    """A bullet whose wrapped lines stay indented under it, at the console's width."""
    out.print(wrap_text(text, out.width, "  • ", "    "), markup=False, highlight=False, soft_wrap=True)


def _print_text(out: Console, text: str) -> None:
    out.print(wrap_text(text, out.width), markup=False, highlight=False, soft_wrap=True)


def _print_verdict(out: Console, label: str, style: str, text: str) -> None:
    from rich.text import Text

    line = Text(wrap_text(f"{label} — {text}", out.width))
    line.stylize(style, 0, len(label))
    out.print(line, soft_wrap=True)


def render_plan(plan: Plan, console: Console | None = None) -> None:
    # emoji=False: a name is printed as given (":x:" in a model id stays text), and rich's
    # emoji table (~10 ms of start-up) is not loaded.
    out = console or Console(emoji=False)
    arch, shape = plan.arch, plan.shape
    gpu_name = plan.gpu.id if plan.gpu else "custom GPU"
    out.print(
        f"[bold]{arch.name}[/] on {plan.spec.hardware.num_nodes} × {plan.spec.hardware.gpus_per_node} "
        f"{gpu_name} ({format_bytes(shape.capacity_bytes)} each), {plan.spec.algorithm.value}",
        highlight=_colours_numbers(out),
    )
    for group in plan.devices:
        holds = ", ".join(r.value for r in group.roles)
        table = Table(title=f"GPU memory per phase — {group.role} GPUs ({group.num_gpus_per_node} per node: {holds})")
        for col in ("phase", "peak", "of GPU", "largest components"):
            table.add_column(col)
        for phase in group.phases:
            style = "red" if phase.peak_bytes > group.capacity_bytes else None
            table.add_row(phase.name, format_bytes(phase.peak_bytes), _pct(phase.peak_bytes, group.capacity_bytes), _top(phase), style=style)
        out.print(table)
    host = plan.host
    table = Table(title="Host RAM per node" + (f" (limit {format_bytes(host.limit_bytes)})" if host.limit_bytes else " (no host_ram_gib given: not judged)"))
    for col in ("phase", "peak", "of limit", "largest components"):
        table.add_column(col)
    for phase in host.phases:
        table.add_row(phase.name, format_bytes(phase.peak_bytes), _pct(phase.peak_bytes, host.limit_bytes), _top(phase) or "-")
    out.print(table)
    if plan.engine is not None:
        from ..memory.vllm import kv_bytes_per_token

        b = plan.engine
        tokens = max(b.kv_cache_bytes, 0) // kv_bytes_per_token(arch, plan.spec.rollout.tensor_parallel_size)
        _print_text(out,
            f"vLLM per GPU: budget {format_bytes(b.requested_bytes)} = weights {format_bytes(b.weight_bytes)} + "
            f"profile peak {format_bytes(b.activation_bytes)} + non-torch {format_bytes(b.non_torch_bytes)} + "
            f"CUDA graphs {format_bytes(b.cuda_graph_bytes)} + {_kv_part(b.kv_cache_bytes, tokens)}")
    for note in plan.notes:
        _print_text(out, f"note: {note}")
    _print_text(out, f"Micro-batches per GPU: {_batch_line(plan)}")
    if plan.typical is not None:
        _print_text(out, f"Typical batch: {_batch_line(plan.typical)}")
    if plan.timeline is not None and (plan.timeline.growth or plan.timeline.save_bytes):
        _print_text(out, f"Host RAM over steps: {plan.timeline.message()}")
    if plan.worst_fits:
        _print_verdict(out, "FITS", "bold green", V.headline(plan))
        return
    if plan.verdict == "fits_typical":
        bounded = plan.risk is not None and plan.risk.per_step == 0  # the data's longest prompt leaves no failing batch
        _print_verdict(out, "FITS ON ITS DATA" if bounded else "FITS ON TYPICAL BATCHES", "bold green" if bounded else "bold yellow",
                       f"on a typical batch, {V.headline(plan.typical)}. The worst batch the limits allow does not fit:")
        _print_bullet(out, _risk_line(plan).strip())
    else:
        _print_verdict(out, "DOES NOT FIT", "bold red", V.headline(plan))
    if len(plan.violations) > 1 or plan.verdict == "fits_typical":
        by = " by the worst batch" if plan.verdict == "fits_typical" else ""
        out.print(f"{len(plan.violations)} constraint(s) broken{by}, in the order a step meets them:",
                  highlight=_colours_numbers(out))
        for c in V.in_time_order(plan, plan.violations):
            _print_bullet(out, V.constraint_sentence(plan, c))
    longest = plan.longest_fitting_prompt_tokens
    if longest is not None:
        _print_text(out, f"It fits while every prompt stays within {longest:,} text tokens (the limit planned is "
                    f"{plan.spec.lengths.max_prompt_tokens:,}): set the framework's prompt limit, or plan with the run's "
                    "data (`--data DATA`: its longest prompt bounds the batches).")


def _kv_part(kv_cache_bytes: int, tokens: int) -> str:
    """The KV cache term of vLLM's budget; a budget the other terms already spend leaves 0."""
    if kv_cache_bytes <= 0:
        return f"KV cache 0 (the other terms exceed the budget by {format_bytes(-kv_cache_bytes)})"
    return f"KV cache {format_bytes(kv_cache_bytes)} ({tokens:,} tokens)"


def _batch_line(plan: Plan) -> str:
    x, train, logprob = plan.shape.lengths, plan.shape.train_batch, plan.shape.logprob_batch
    images = f", {x.images_per_prompt} image(s)" if plan.shape.image_tokens_per_prompt else ""
    return (
        f"sequences of {plan.shape.seq_len:,} tokens (prompt {x.prompt_tokens:,}, completion {x.completion_tokens:,}{images}); "
        f"train {train.num_tokens:,} tokens in {train.num_rows} row(s), log-prob {logprob.num_tokens:,} tokens"
        + (" (packed)" if train.packed else "")
    )


def _risk_line(plan: Plan) -> str:
    r = plan.risk
    if r is None or r.per_step is None:
        note = r.note if r is not None else "no distribution given"
        return f"  chance per step not estimated ({note}): assumed to occur, so `fits` is false"
    x = r.fitting_lengths
    if r.per_step == 0 and x is not None:
        return (f"  sequences up to prompt {x.prompt_tokens:,} + completion {x.completion_tokens:,} tokens fit, and the "
                f"data's longest prompt is {plan.spec.lengths.data_max_prompt_tokens:,} tokens: no step of this data meets "
                f"a batch that does not fit → {'fits' if plan.fits else 'does not fit'}")
    first = f"{r.expected_first_failing_step:,.0f}" if r.expected_first_failing_step else "never"
    run = f"; over {r.steps:,} steps ≤ {r.per_run:.2%}" if r.per_run is not None else "; no schedule.max_steps: the run is assumed to meet it"
    upto = f"sequences up to prompt {x.prompt_tokens:,} + completion {x.completion_tokens:,} tokens fit; " if x else ""
    longer = "a longer one"
    if r.packed_mean_tokens is not None:
        how = ", the longest rows of a GPU's share together" if plan.spec.batch.length_sorted_micro_batches else ""
        upto, longer = (f"packed micro-batches of up to {r.packed_mean_tokens:,} tokens a sequence on average fit{how}; ",
                        "a fuller one")
    return (
        f"  {upto}chance per step of {longer} ≤ {r.per_step:.3%} ({r.sequences_per_step:,} sequences a step), "
        f"expected first at step {first}{run} → {'fits' if plan.fits else 'does not fit'}"
    )
