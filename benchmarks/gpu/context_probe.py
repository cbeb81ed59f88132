"""What a CUDA process holds outside torch's caching allocator (issue 14: the plan counts a 512-MiB
CUDA context; the harness's runs saw NVML 1.1–1.4 GiB above the allocator's reserved bytes).

    python benchmarks/gpu/context_probe.py > context-probe.json     # on a CUDA machine, GPU otherwise idle

After each stage (CUDA initialised, a bf16 matmul, SDPA attention, a fused and a foreach AdamW step,
a bitsandbytes 4-bit matmul when it imports): NVML's used bytes for the whole GPU, torch's reserved
and allocated bytes, and their difference (memory outside the allocator: driver reservation, the
context, loaded kernel modules, cuBLAS/cuDNN handles). NVML before CUDA is read first, by this
process, before torch touches the GPU."""

from __future__ import annotations

import json
import sys


def nvml_used() -> int:
    import pynvml

    pynvml.nvmlInit()
    try:
        return int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0)).used)
    finally:
        pynvml.nvmlShutdown()


def main() -> int:
    before = nvml_used()
    import torch

    stages: list[dict] = []

    def record(stage: str) -> None:
        torch.cuda.synchronize()
        used, reserved = nvml_used(), torch.cuda.memory_reserved()
        free, total = torch.cuda.mem_get_info()
        stages.append({"stage": stage, "nvml_used_bytes": used, "reserved_bytes": reserved,
                       "allocated_bytes": torch.cuda.memory_allocated(), "outside_allocator_bytes": used - before - reserved,
                       "mem_get_info_free_bytes": free, "mem_get_info_total_bytes": total})

    torch.zeros(1, device="cuda")
    record("cuda_init")
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    (a @ a).sum().item()
    record("bf16_matmul")
    q = torch.randn(8, 16, 512, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()
    record("sdpa_forward_backward")
    for fused in (True, False):
        w = torch.nn.Parameter(torch.randn(4096, 4096, device="cuda"))
        w.grad = torch.randn_like(w)
        opt = torch.optim.AdamW([w], fused=fused, foreach=None if fused else True)
        opt.step()
        record("adamw_fused" if fused else "adamw_foreach")
        del w, opt
    with torch.autocast("cuda", dtype=torch.bfloat16):
        lin = torch.nn.Linear(4096, 4096, device="cuda")
        lin(torch.randn(64, 4096, device="cuda")).float().sum().backward()
    record("autocast_linear_backward")
    try:
        import bitsandbytes as bnb

        layer = bnb.nn.Linear4bit(4096, 4096, compute_dtype=torch.bfloat16, quant_type="nf4").cuda()
        layer(torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16)).sum().item()
        record("bnb_nf4_matmul")
    except ImportError:
        pass
    torch.cuda.empty_cache()
    record("empty_cache")
    json.dump({"torch": torch.__version__, "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(0),
               "nvml_used_before_cuda_bytes": before, "stages": stages}, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
