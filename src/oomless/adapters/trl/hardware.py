"""The spec's hardware section of a TRL launch: processes per node from `--gpus-per-node` when the
config does not say, and the flags checked against the GPUs and nodes the launch uses."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from ...errors import InputError
from . import versions as TV
from .launch import Launch

if TYPE_CHECKING:
    from .reader import Keys


def processes_from_hardware(keys: Keys, launch: Launch, gpus_per_node: int, notes: list[str]) -> Launch:
    """A bare config launched on ``--gpus-per-node`` GPUs: one training process per GPU, less
    the GPU TRL <= 0.15 gives its engine (`vllm_device: auto`, its default there: the next GPU index)."""
    device = keys.values.get("vllm_device", "auto" if TV.vllm_placement(keys.version) == "device" else "")
    engine = 1 if keys.values.get("use_vllm") in (True, "true", "True") and str(device) == "auto" else 0
    processes = max(gpus_per_node - engine, 1)
    notes.append(f"the config does not say how many processes run: planned as `accelerate launch` with {processes} "
                 f"process(es) per node on the {gpus_per_node} GPUs of --gpus-per-node")
    return dataclasses.replace(launch, processes_per_node=processes)


def hardware_section(hw: Any, gpus_per_node: int, nodes: int, launch: Launch | None = None,
                     notes: list[str] | None = None) -> dict[str, Any]:
    """The spec's hardware section: the flags, checked against the GPUs and nodes the launch uses
    (a `python script.py` launch uses one GPU of a larger node: noted, not refused)."""
    if launch is not None and launch.node_gpus is not None:
        from .slurm import own_node_hardware
        hw = own_node_hardware(hw, launch, gpus_per_node, nodes, notes if notes is not None else [])
    if launch is not None and launch.single_process and hw.gpus_per_node is not None and hw.gpus_per_node > gpus_per_node:
        if notes is not None:
            notes.append(f"`python` runs one training process: planned on {gpus_per_node} of the node's "
                         f"{hw.gpus_per_node} GPUs (use `accelerate launch` or `torchrun` to train on all of them)")
    elif hw.gpus_per_node is not None and hw.gpus_per_node != gpus_per_node:
        raise InputError("--gpus-per-node", f"{hw.gpus_per_node}, but the config runs on {gpus_per_node} GPUs per node "
                         "(accelerate num_processes / num_machines, plus vLLM server GPUs)")
    if hw.num_nodes is not None and hw.num_nodes != nodes:
        raise InputError("--nodes", f"{hw.num_nodes}, but the config has num_machines {nodes}")
    out: dict[str, Any] = {"gpu": hw.gpu, "gpus_per_node": gpus_per_node, "num_nodes": nodes}
    if hw.host_ram_gib is not None:
        out["host_ram_gib"] = hw.host_ram_gib
    return out
