"""Readable groups of a plan's components, and their colours, for charts.

The plan document names every component (`policy.optimizer_states`, `vllm.kv_cache`, ...) and
sums them per PyTorch mem_tracker category (PARAM, GRAD, OPT, ACT, TEMP, OTHER) per phase. A
chart needs coarser groups a reader recognises at a glance, and it must keep vLLM's
reservation apart from the CUDA context and NCCL, which mem_tracker also files under OTHER.
The grouping is decided here and only here, by a component's last dotted part; an unknown
name falls in `other` (a test keeps every shipped example's components out of it).

Colours: Okabe & Ito's colour-blind-safe palette (https://jfly.uni-koeln.de/color/), one hue
per group; components named in a chart get shades of their group's hue.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Group:
    key: str
    label: str
    colour: str
    """#rrggbb"""


RUNTIME = Group("runtime", "CUDA context, NCCL, allocator", "#999999")
WEIGHTS = Group("weights", "Weights", "#0072b2")
GRADS = Group("grads", "Gradients", "#e69f00")
OPTIMIZER = Group("optimizer", "Optimizer states", "#009e73")
ACTIVATIONS = Group("activations", "Activations, logits", "#d55e00")
VLLM = Group("vllm", "vLLM engine", "#cc79a7")
OTHER = Group("other", "Other", "#6b4c2a")

GPU_GROUPS = (RUNTIME, WEIGHTS, GRADS, OPTIMIZER, ACTIVATIONS, VLLM, OTHER)
"""Stacking order, bottom to top: vLLM last, so its reservation is one block under the top."""

_GPU_BY_LAST_PART = {
    **dict.fromkeys(("cuda_context", "nccl", "allocator_fragmentation", "trainer_cached_blocks"), RUNTIME),
    **dict.fromkeys(
        ("weights", "persistent_params", "gathered_params", "gathered_weights", "lora_merge_delta",
         "autocast_weight_cache"), WEIGHTS
    ),
    **dict.fromkeys(("grads", "fp32_grads", "reduce_buckets"), GRADS),
    **dict.fromkeys(("master_weights", "optimizer_states", "step_temporaries"), OPTIMIZER),
    **dict.fromkeys(("activations", "logits", "attention_mask", "backward_recompute", "kv_cache"), ACTIVATIONS),
}

HOST_LOADING = Group("loading", "Model loading", "#56b4e9")
HOST_OFFLOAD = Group("offload", "ZeRO/FSDP CPU offload (pinned)", "#009e73")
HOST_MOVED = Group("moved", "Moved to CPU during rollout", "#a6761d")
HOST_SLEEP = Group("vllm_sleep", "vLLM sleep copies (pinned)", "#cc79a7")
HOST_RAY = Group("ray", "Ray object store", "#f0e442")

HOST_GROUPS = (HOST_LOADING, HOST_OFFLOAD, HOST_MOVED, HOST_SLEEP, HOST_RAY, OTHER)

_HOST_BY_FIRST_PART = {
    "model_loading": HOST_LOADING,
    "offload": HOST_OFFLOAD,
    "moved_to_cpu": HOST_MOVED,
    "vllm": HOST_SLEEP,
    "ray": HOST_RAY,
}


def gpu_group(name: str) -> Group:
    """The group of a GPU component: every `vllm.*` is the engine's; else by the last part."""
    if name.startswith("vllm."):
        return VLLM
    return _GPU_BY_LAST_PART.get(name.rsplit(".", 1)[-1], OTHER)


def host_group(name: str) -> Group:
    """The group of a host component, by its first dotted part."""
    return _HOST_BY_FIRST_PART.get(name.split(".", 1)[0], OTHER)


SHADE_STEPS = (0.0, -0.35, 0.3, -0.55, -0.15, 0.15)
"""Mix factors for the 1st, 2nd, ... named component of a group: > 0 towards white, < 0
towards black. The pale tint of a group's unnamed rest is OTHER_TINT."""
OTHER_TINT = 0.6


def mix(colour: str, factor: float) -> str:
    """``colour`` mixed towards white (factor > 0) or black (factor < 0) by |factor|."""
    rgb = [int(colour[i : i + 2], 16) for i in (1, 3, 5)]
    target = 255 if factor > 0 else 0
    out = [round(c + (target - c) * abs(factor)) for c in rgb]
    return "#" + "".join(f"{c:02x}" for c in out)


def shade(group: Group, index: int) -> str:
    """Colour of the ``index``-th named component of ``group``."""
    return mix(group.colour, SHADE_STEPS[index % len(SHADE_STEPS)])
