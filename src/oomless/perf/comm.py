"""Time of collectives over the GPU interconnect and of copies over PCIe.

Ring algorithms move (n−1)/n of the full buffer through each GPU's link for all-gather and
reduce-scatter, and twice that for all-reduce. Source: NCCL nccl-tests doc/PERFORMANCE.md (bus
bandwidth factors: all-reduce 2(n−1)/n, all-gather and reduce-scatter (n−1)/n); ZeRO paper
(arXiv 1910.02054) §7: DDP and ZeRO-1/2 move 2Ψ per step, ZeRO-3 3Ψ.
Assumes: one collective at a time at LINK_EFFICIENCY of the one-way link rate; a collective
spanning nodes runs at the slower of the GPU link and the node's NIC (INTER_NODE_GBPS).
"""

from __future__ import annotations

from . import constants as K
from .hardware import GpuPerf

ALLREDUCE_RING_FACTOR = 2
"""All-reduce = reduce-scatter + all-gather: twice the (n−1)/n traffic."""


def link_bytes_per_s(perf: GpuPerf, num_nodes: int) -> float:
    """Achieved one-way bus bandwidth of a collective over the GPUs of ``num_nodes`` nodes."""
    link = perf.gpu_link_bytes_per_s
    if num_nodes > 1:
        link = min(link, K.INTER_NODE_GBPS * K.GIGA)
    return link * K.LINK_EFFICIENCY


def all_gather_s(full_bytes: float, num_ranks: int, perf: GpuPerf, num_nodes: int = 1) -> float:
    """Every rank ends with ``full_bytes``; each holds 1/n before."""
    if num_ranks <= 1 or full_bytes <= 0:
        return 0.0
    return K.NCCL_LATENCY_S + (num_ranks - 1) / num_ranks * full_bytes / link_bytes_per_s(perf, num_nodes)


def reduce_scatter_s(full_bytes: float, num_ranks: int, perf: GpuPerf, num_nodes: int = 1) -> float:
    """Same traffic as all-gather, in reverse."""
    return all_gather_s(full_bytes, num_ranks, perf, num_nodes)


def all_reduce_s(full_bytes: float, num_ranks: int, perf: GpuPerf, num_nodes: int = 1) -> float:
    if num_ranks <= 1 or full_bytes <= 0:
        return 0.0
    ring = ALLREDUCE_RING_FACTOR * (num_ranks - 1) / num_ranks * full_bytes
    return K.NCCL_LATENCY_S + ring / link_bytes_per_s(perf, num_nodes)


def broadcast_s(full_bytes: float, perf: GpuPerf, num_nodes: int = 1) -> float:
    """One rank sends ``full_bytes`` to others (pipelined, so about one link traversal)."""
    if full_bytes <= 0:
        return 0.0
    return K.NCCL_LATENCY_S + full_bytes / link_bytes_per_s(perf, num_nodes)


def host_copy_s(num_bytes: float, perf: GpuPerf) -> float:
    """Pinned copy between one GPU and the host, one direction."""
    if num_bytes <= 0:
        return 0.0
    return num_bytes / (perf.host_link_bytes_per_s * K.PCIE_EFFICIENCY)


def exposed_s(comm_s: float, compute_s: float) -> float:
    """Collective time not hidden behind compute: comm − overlap·min(comm, compute)."""
    return comm_s - K.COMM_OVERLAP_FRACTION * min(comm_s, compute_s)
