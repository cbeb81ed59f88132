"""Training-side times of one rank: forward/backward compute, ZeRO/FSDP collectives, the
optimizer update, and the PCIe traffic of parameter and optimizer offload.

Collectives per strategy (ZeRO paper, arXiv 1910.02054 §7; DeepSpeed stage_1_and_2.py and
stage3.py; PyTorch FSDP docs):
- ddp: gradients all-reduced once per optimizer step (no_sync while accumulating);
- zero1: gradients reduce-scattered once per step, updated parameters all-gathered;
- zero2: gradients reduce-scattered every micro-step (DeepSpeed reduces in backward hooks),
  updated parameters all-gathered once per step;
- zero3 / fsdp: parameters all-gathered for the forward and again for the backward, gradients
  reduce-scattered, every micro-step.
Offload (DeepSpeed ZeRO-Offload/Infinity): `offload_params` fetches each rank's parameter
shard from the host for the forward and the backward; `offload_optimizer` sends gradients to
the host every micro-step, accumulates and runs CPU-Adam there, and copies updated bf16
parameters back (Ren et al. 2021, arXiv 2101.06840 §4).
"""

from __future__ import annotations

from ..memory import constants as MC
from ..spec.run import Strategy
from . import comm
from . import constants as K
from .hardware import GpuPerf

HOST_ACCUMULATE_BYTES_PER_PARAM = 2 + 4 + 4
"""CPU gradient accumulation per parameter per micro-step: read the incoming bf16 gradient (2),
read and write the fp32 accumulator (4 + 4)."""
SHARDED = (Strategy.zero3, Strategy.fsdp)


def compute_s(flops: float, perf: GpuPerf) -> float:
    """Matmul-dominated passes (training, log-prob forwards) at TRAIN_MFU of the bf16 peak."""
    return flops / (perf.bf16_flops_per_s * K.TRAIN_MFU)


def micro_step_comm_s(strategy: Strategy, param_bytes: float, grad_bytes: float, n: int, perf: GpuPerf, nodes: int) -> float:
    """Collectives of one micro-step (forward + backward) on one rank."""
    if strategy in SHARDED:
        gathers = 2 * comm.all_gather_s(param_bytes, n, perf, nodes)
        return gathers + comm.reduce_scatter_s(grad_bytes, n, perf, nodes)
    if strategy == Strategy.zero2:
        return comm.reduce_scatter_s(grad_bytes, n, perf, nodes)
    return 0.0


def optimizer_step_comm_s(strategy: Strategy, trainable_param_bytes: float, grad_bytes: float, n: int, perf: GpuPerf, nodes: int) -> float:
    """Collectives once per optimizer step on one rank."""
    if strategy == Strategy.ddp:
        return comm.all_reduce_s(grad_bytes, n, perf, nodes)
    if strategy == Strategy.zero1:
        return comm.reduce_scatter_s(grad_bytes, n, perf, nodes) + comm.all_gather_s(trainable_param_bytes, n, perf, nodes)
    if strategy == Strategy.zero2:
        return comm.all_gather_s(trainable_param_bytes, n, perf, nodes)
    return 0.0


def gpu_optimizer_s(num_params_on_rank: float, perf: GpuPerf) -> float:
    """Fused AdamW over this rank's partition: memory-bound at DECODE_MBU of HBM bandwidth."""
    return num_params_on_rank * K.ADAM_BYTES_PER_PARAM / (perf.memory_bytes_per_s * K.DECODE_MBU)


def cpu_optimizer_s(num_params_on_rank: float, num_micro_steps: int, perf: GpuPerf) -> float:
    """ZeRO-Offload per optimizer step: bf16 gradients to the host every micro-step and
    accumulated there, CPU-Adam, updated bf16 parameters back to the GPU."""
    host_rate = K.HOST_OPTIMIZER_GBPS_PER_RANK * K.GIGA
    host_work = num_params_on_rank * (num_micro_steps * HOST_ACCUMULATE_BYTES_PER_PARAM + K.ADAM_BYTES_PER_PARAM)
    grads_out = num_micro_steps * comm.host_copy_s(num_params_on_rank * MC.BF16_BYTES, perf)
    params_in = comm.host_copy_s(num_params_on_rank * MC.BF16_BYTES, perf)
    return host_work / host_rate + grads_out + params_in


def param_offload_micro_step_s(shard_bytes: float, perf: GpuPerf) -> float:
    """ZeRO-3/FSDP parameter offload: the rank's shard comes from the host for the forward and
    again for the backward."""
    return 2 * comm.host_copy_s(shard_bytes, perf)
