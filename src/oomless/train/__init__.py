"""`oomless train`: GRPO on TRL with the plan applied, per-phase memory telemetry and
out-of-memory recovery.

Layout: `settings` (spec → TRL/peft arguments, pure), `launch` (DeepSpeed/FSDP/accelerate files,
pure), `batching` (micro-batches and the OOM re-split, pure), `data`, `rewards`, `tiny` (a local
model and tokenizer), `live_bytes` and `devices` (measuring memory), `telemetry` (records and
the plan check), `offload` (rollout offload), `trainer` (the `GRPOTrainer` subclass), `progress`,
`files` (atomic writes, complete checkpoints), `interrupt` (Ctrl-C: checkpoint, then stop),
`session` (model, data, rewards and trainer built and run),
`run` (the whole command). torch is imported only by the modules that need it, never here.
"""
