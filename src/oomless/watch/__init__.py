"""`oomless watch`: a training job's GPU and host memory per step and phase, against its plan,
with a forecast of when growing memory crosses its limit.

- `sample`: psutil (process tree, node) and NVML (per GPU, per process) readings;
- `logs`: steps and phases from a job's log lines, per framework;
- `steps`: per-step, per-phase peaks in the telemetry schema (`oomless.telemetry`);
- `forecast`: a robust trend over a sliding window of per-step peaks and its crossing step;
- `session`: running or attaching to a job, the live line, the warnings, `--on-risk`;
- `callback`: the drop-in `transformers.TrainerCallback` (imports transformers; import it
  from a training script, not from the planner).
"""
