"""A throughput cost model of GRPO/PPO steps: predicted seconds per optimizer step.

Pure arithmetic on the plan's numbers and each GPU's peak rates (`catalog/data/gpu_perf.json`,
one source per figure), no torch:

- rollout (`rollout`): prefill is compute-bound, decode is memory-bandwidth-bound; an engine's
  concurrency is bounded by the KV-cache capacity the plan computes and by `max_num_seqs`;
  tensor parallelism adds two all-reduces per layer; transformers `generate` is modelled
  separately (padded cache, eager kernels, Python overhead);
- training (`flops`, `training`): 6 × parameters per token plus attention, × 4/3 with
  recompute, 2/3 of that for LoRA; ZeRO/FSDP collectives over the interconnect; parameter and
  optimizer offload over PCIe and CPU-Adam on the host;
- the step (`step`): generation, weight sync, sleep/offload copies, experience passes and
  training summed per rollout batch and divided by the optimizer steps it feeds.

Absolute times are estimates (peaks × assumed efficiencies, `perf.constants`), easily off by a
factor of two. `oomless fit` relies on the rankings they give between configurations of the
same run, and always takes its memory verdict from `make_plan`.
"""
