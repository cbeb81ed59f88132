"""Every efficiency and overhead of the cost model, in one place, with its provenance.

Peak figures (TFLOP/s, GB/s) are per GPU in `catalog/data/gpu_perf.json`; what is here turns
peaks into achieved rates. These are estimates: absolute step times can be off by a factor of
two, which is why `fit` ranks configurations with them and states them as predictions. None is
fitted to the seed cases `fit` is tested on.
"""

from __future__ import annotations

# --- units ---------------------------------------------------------------------------------
TERA = 10**12
GIGA = 10**9
"""Vendors' decimal units: 1 TFLOP/s = 1e12 FLOP/s, 1 GB/s = 1e9 bytes/s."""

# --- compute efficiency ----------------------------------------------------------------------
TRAIN_MFU = 0.40
"""Achieved fraction of dense bf16 peak in training matmuls (model FLOPs, attention included,
recompute counted as work done). Derived from a public DeepSpeed measurement: LLaMA-7B, sequence
4096, ZeRO-2 without checkpointing on 8 x A800 reached 5.33 samples/s (gist.github.com/chenyaofo,
DeepSpeed 0.14.2, PyTorch 2.2) = 21.8k tokens/s; x (6 x 6.74e9 + 12 x 32 x 4096 x 4096) FLOP per
token / (8 x 312e12) = 0.40. Megatron-LM reports 0.5-0.56 for large models (README MFU table)."""

PREFILL_MFU = 0.50
"""Achieved fraction of peak in vLLM prefill (large token batches, no backward). Assumed between
training (0.40, above) and Megatron's best (0.56)."""

DECODE_MBU = 0.70
"""Model bandwidth utilisation of decoding: achieved fraction of peak memory bandwidth while
reading weights and KV cache. Well-tuned engines (vLLM, TensorRT-LLM) reach 70-85 %, portable
runtimes less (open-source-ai.tech glossary "model bandwidth utilization"); we take the low end."""

HF_DECODE_MBU = 0.50
"""transformers `generate` reads a padded, contiguous KV cache through eager kernels; assumed
lower than vLLM's paged kernels. vLLM's authors report up to 24x the throughput of HF generate
(blog.vllm.ai, "vLLM: Easy, Fast, and Cheap LLM Serving with PagedAttention", 2023)."""

# --- per-step overheads ------------------------------------------------------------------------
VLLM_DECODE_STEP_OVERHEAD_S = 1.0e-3
"""Scheduler and sampler time of one vLLM decode step with CUDA graphs, independent of the
model. Assumed 1 ms (vLLM V1 overlaps most of its CPU work)."""

KERNEL_LAUNCH_S = 5.0e-6
"""Launch latency of one CUDA kernel from Python without graphs (order of magnitude from CUDA
launch-latency measurements, 3-10 us)."""

KERNELS_PER_LAYER = 12
"""Kernels one decoder layer launches in a decode step: 2 norms, QKV, rotary, attention, O,
gate/up, activation, down, 2 residual adds, + cache write. Counted from transformers'
`modeling_llama.py`; eager engines pay KERNEL_LAUNCH_S for each."""

HF_DECODE_PYTHON_OVERHEAD_PER_LAYER_S = 0.2e-3
"""Python/dispatcher time per decoder layer per token in transformers `generate` beyond kernel
launches (module hooks, cache bookkeeping; more under ZeRO-3 hooks). Assumed; together with
HF_DECODE_MBU it makes HF generate several times slower than vLLM, as vLLM's authors report."""

# --- communication ------------------------------------------------------------------------------
NCCL_LATENCY_S = 10e-6
"""Fixed time of one small NCCL collective. nccl-tests on two PCIe GPUs show ~6 us for the
smallest all-reduce (a public nccl-tests log); we take 10 us for more ranks and NVLink hops."""

LINK_EFFICIENCY = 0.80
"""NCCL bus bandwidth reached on large messages as a fraction of the link's one-way peak
(nccl-tests doc/PERFORMANCE.md: bus bandwidth is what compares to hardware peak). Assumed."""

PCIE_EFFICIENCY = 0.80
"""Pinned host<->device copies reach ~80 % of the PCIe link's one-way peak (e.g. ~25 of 32 GB/s
on Gen4 x16, CUDA bandwidthTest). Assumed from common bandwidthTest results."""

INTER_NODE_GBPS = 25.0
"""One-way bytes/s (in GB/s) a node exchanges with the others when a collective spans nodes:
one 200 Gb/s NIC. Assumed; multi-node clusters with 8 x 400 Gb/s NICs are faster."""

COMM_OVERLAP_FRACTION = 0.5
"""Fraction of a micro-step's collective time hidden behind its compute (DeepSpeed prefetch and
overlap_comm, FSDP forward/backward prefetch). Assumed; exposed = comm - 0.5 x min(comm, compute)."""

# --- optimizer ----------------------------------------------------------------------------------
ADAM_BYTES_PER_PARAM = 4 + 4 + 4 + 4 + 4 + 4 + 4 + 2
"""Memory traffic of one fused AdamW update of one parameter: read fp32 master, fp32 grad, m, v
(4 x 4) and write master, m, v (3 x 4) plus the bf16 working copy (2) = 30 bytes."""

HOST_OPTIMIZER_GBPS_PER_RANK = 4.5
"""Effective host throughput (GB/s of optimizer traffic) of one rank's CPU-side work under
ZeRO-Offload: gradient accumulation on the CPU and DeepSpeed CPU-Adam. Derived from the same
DeepSpeed measurement as TRAIN_MFU: adding offload_optimizer to ZeRO-2 with checkpointing took
the step from 64/4.19 = 15.3 s to 64/1.81 = 35.4 s; the extra 20.1 s over ~90 GB of per-rank CPU
work (8 micro-steps x 0.84e9 params x 10 B accumulation + 0.84e9 x 30 B Adam) is 4.5 GB/s."""
