"""Human-readable plan output (rich tables). Sizes in GiB/MiB, labelled as binary units."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..planner.plan import Constraint, Plan, PhaseMemory
from ..units import format_bytes

NUM_TOP_COMPONENTS = 4


def _top(phase: PhaseMemory) -> str:
    comps = sorted(phase.components, key=lambda c: c.num_bytes, reverse=True)[:NUM_TOP_COMPONENTS]
    return ", ".join(f"{c.name} {format_bytes(c.num_bytes)}" for c in comps)


def _pct(part: int, whole: int | None) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def _constraint_line(c: Constraint) -> str:
    where = f"{c.device_role} GPU" if c.device == "gpu" else "host"
    return (
        f"{c.phase} on {where}: {c.component} — needs {format_bytes(c.required_bytes)}, "
        f"has {format_bytes(c.available_bytes)} ({c.message})"
    )


def render_plan(plan: Plan, console: Console | None = None) -> None:
    out = console or Console(width=140)
    arch, shape = plan.arch, plan.shape
    gpu_name = plan.gpu.id if plan.gpu else "custom GPU"
    out.print(
        f"[bold]{arch.name}[/] on {plan.spec.hardware.num_nodes} × {plan.spec.hardware.gpus_per_node} "
        f"{gpu_name} ({format_bytes(shape.capacity_bytes)} each), {plan.spec.algorithm.value}"
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
        out.print(
            f"vLLM per GPU: budget {format_bytes(b.requested_bytes)} = weights {format_bytes(b.weight_bytes)} + "
            f"profile peak {format_bytes(b.activation_bytes)} + non-torch {format_bytes(b.non_torch_bytes)} + "
            f"CUDA graphs {format_bytes(b.cuda_graph_bytes)} + KV cache {format_bytes(b.kv_cache_bytes)} "
            f"({tokens:,} tokens)"
        )
    for note in plan.notes:
        out.print(f"note: {note}", markup=False)
    out.print(f"Micro-batches per GPU: {_batch_line(plan)}")
    if plan.typical is not None:
        out.print(f"Typical batch: {_batch_line(plan.typical)}")
    if plan.timeline is not None and (plan.timeline.growth or plan.timeline.save_bytes):
        out.print(f"Host RAM over steps: {plan.timeline.message()}")
    binding = plan.binding
    if plan.worst_fits:
        out.print(f"[bold green]FITS[/] — tightest: {_constraint_line(binding)}; margin {format_bytes(binding.margin_bytes)}")
        return
    if plan.verdict == "fits_typical":
        t = plan.typical.binding
        out.print(
            f"[bold yellow]FITS ON TYPICAL BATCHES[/] — tightest there: {_constraint_line(t)}; margin "
            f"{format_bytes(t.margin_bytes)}. The worst batch the limits allow does not fit:"
        )
        out.print(_risk_line(plan))
    else:
        out.print(f"[bold red]DOES NOT FIT[/] — {len(plan.violations)} constraint(s) broken:")
    for c in sorted(plan.violations, key=lambda c: c.margin_bytes):
        out.print(f"  • {_constraint_line(c)}; short by {format_bytes(-c.margin_bytes)}")
    longest = plan.longest_fitting_prompt_tokens
    if longest is not None:
        out.print(f"It fits while every prompt stays within {longest:,} text tokens (the limit planned is "
                  f"{plan.spec.lengths.max_prompt_tokens:,}): set the framework's prompt limit, or measure your data "
                  "with `oomless stats`.")


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
    first = f"{r.expected_first_failing_step:,.0f}" if r.expected_first_failing_step else "never"
    run = f"; over {r.steps:,} steps ≤ {r.per_run:.2%}" if r.per_run is not None else "; no schedule.max_steps: the run is assumed to meet it"
    x = r.fitting_lengths
    upto = f"sequences up to prompt {x.prompt_tokens:,} + completion {x.completion_tokens:,} tokens fit; " if x else ""
    return (
        f"  {upto}chance per step of a longer one ≤ {r.per_step:.3%} ({r.sequences_per_step:,} sequences a step), "
        f"expected first at step {first}{run} → {'fits' if plan.fits else 'does not fit'}"
    )
