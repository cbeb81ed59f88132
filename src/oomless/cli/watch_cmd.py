"""`oomless watch`: watch any training job's memory against the plan and warn before the crash.

Examples:
    oomless watch -- python train.py --config x.yaml
    oomless watch --spec run.yaml -- accelerate launch train_grpo.py
    oomless watch --from verl run.sh --gpu H100-80GB -- bash run.sh
    oomless watch --host-limit 60 --on-risk checkpoint -- swift rlhf ...
    oomless watch --pid 12345 --log train.log

Exit code: the job's own (0 when attached with --pid); 2 for bad input (a command that does not
exist, a PID that is gone), 3 for an internal error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Tuple

import typer

CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True}


def watch_command(
    ctx: typer.Context,
    spec: Path = typer.Option(None, "--spec", help="Run spec (YAML) whose plan each phase is compared with."),
    from_native: Optional[Tuple[str, Path]] = typer.Option(
        None, "--from", metavar="FRAMEWORK CONFIG",
        help="The job's framework config instead of a spec: swift, trl, verl, easyr1, openrlhf, orz, vlmr1, then the file.",
    ),
    gpu: str = typer.Option(None, "--gpu", help="GPU type when the framework config does not say (with --from)."),
    pid: int = typer.Option(None, "--pid", help="Attach to a running process (and its children) instead of starting COMMAND."),
    log: Path = typer.Option(None, "--log", help="With --pid: the job's log file, followed for step and phase lines."),
    interval: float = typer.Option(1.0, "--interval", min=0.01, max=3600, help="Seconds between samples. Default 1."),
    host_limit: float = typer.Option(None, "--host-limit", min=0.001, max=1e6, help="GiB: limit the watched process tree's host memory (shared nodes, tests)."),
    gpu_limit: float = typer.Option(None, "--gpu-limit", min=0.001, max=1e4, help="GiB per GPU: limit instead of the GPU's capacity."),
    ray_threshold: float = typer.Option(None, "--ray-threshold", min=0.01, max=1.0, help="Ray's memory_usage_threshold (default 0.95 when the spec uses Ray)."),
    steps: int = typer.Option(None, "--steps", min=1, help="Steps the run will take (default: the spec's schedule.max_steps or the progress bar's total)."),
    on_risk: str = typer.Option(None, "--on-risk", help="checkpoint (SIGUSR1, saved by the oomless callback) or stop (SIGINT) at the first predicted crossing."),
    out: Path = typer.Option(Path("oomless-watch"), "--out", help="Folder for telemetry.jsonl. Default ./oomless-watch."),
    pss: bool = typer.Option(False, "--pss", help="Count PSS (shared pages split) instead of RSS for the process tree."),
) -> None:
    """Watch a job's GPU and host memory per step and phase; warn when growth will cross a limit."""
    from .main import run_guarded

    def body() -> int:
        from ..errors import InputError

        try:
            import psutil  # noqa: F401
        except ImportError:
            raise InputError("watch", "needs psutil: pip install 'oomless[train]' (or psutil; nvidia-ml-py for GPUs)") from None
        command = list(ctx.args)
        if on_risk not in (None, "checkpoint", "stop"):
            raise InputError("--on-risk", f"{on_risk!r}; allowed: checkpoint, stop")
        if pid is None and not command:
            raise InputError("COMMAND", "give the job to run after `--` (oomless watch -- python train.py), or --pid")
        if pid is not None and command:
            raise InputError("--pid", "give either --pid or a COMMAND, not both")
        if spec is not None and from_native and from_native[0] is not None:
            raise InputError("--spec/--from", "give one of them, not both")
        source = (from_native[1], from_native[0]) if from_native and from_native[0] is not None else (spec, None)
        options = _options(source[0], source[1], gpu, interval, host_limit, gpu_limit, ray_threshold, steps, on_risk, out, pss)
        say = lambda line: typer.echo(line, err=True)  # noqa: E731
        from ..watch.session import attach, run_job

        result = attach(pid, log, options, say) if pid is not None else run_job(command, options, say)
        typer.echo(f"[oomless watch] {result.steps} step(s) watched; telemetry in {options.out_dir / 'telemetry.jsonl'}", err=True)
        return result.exit_code or 0

    run_guarded(body)


def _options(spec, framework, gpu, interval, host_limit, gpu_limit, ray_threshold, steps, on_risk, out, pss):
    from ..units import GiB, gib_to_bytes
    from ..watch.sample import cgroup_memory_limit
    from ..watch.session import WatchOptions
    from ..watch.steps import Limit

    planned: dict[str, int] = {}
    planned_host: dict[str, int] = {}
    last_step, uses_ray = steps, ray_threshold is not None
    if spec is not None:
        from ..adapters import HardwareFlags
        from ..planner.plan import make_plan
        from .plan_cmd import load_any

        run = load_any(spec, framework, HardwareFlags(gpu=gpu))
        plan = make_plan(run.spec, run.arch, run.gpu, run.archs)
        group = next((g for g in plan.devices if g.role == "train"), plan.devices[0])
        planned = {p.name: p.peak_bytes for p in group.phases}
        planned_host = {p.name: p.peak_bytes for p in plan.host.phases}
        schedule = getattr(run.spec, "schedule", None)
        last_step = last_step or getattr(schedule, "max_steps", None)
        uses_ray = uses_ray or run.spec.ray.enabled
        ray_threshold = ray_threshold or (run.spec.ray.memory_usage_threshold if run.spec.ray.enabled else None)
    import psutil

    total = psutil.virtual_memory().total
    node = Limit("host (node)", total, "the node's RAM (the kernel's OOM killer)")
    cgroup = cgroup_memory_limit()
    if cgroup is not None and cgroup < node.limit_bytes:
        node = Limit("host (node)", cgroup, "this cgroup's memory limit")
    if uses_ray and ray_threshold and int(ray_threshold * total) < node.limit_bytes:
        node = Limit("host (node)", int(ray_threshold * total), f"Ray memory_usage_threshold {ray_threshold}")
    return WatchOptions(
        out_dir=out, interval_s=interval,
        host_limit_bytes=gib_to_bytes(host_limit) if host_limit is not None else None,
        node_limit=node, gpu_limit_bytes=int(gpu_limit * GiB) if gpu_limit is not None else None,
        last_step=last_step, on_risk=on_risk, pss=pss, planned=planned, planned_host=planned_host,
    )


def register(app: typer.Typer) -> None:
    app.command("watch", context_settings=CONTEXT)(watch_command)
