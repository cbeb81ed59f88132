"""Hand-made cases for what the corpus does not show: message forms documented by the projects'
sources (Ray's lease and node forms, cgroup OOM kills, the ``allowed`` clause, CUDA runtime
errors), merging, primary selection, phase rules and text cleaning."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomless.doctor import Kind, clean, diagnose, find_all, read_log
from oomless.doctor.phase import infer_phase
from oomless.doctor.sizes import to_bytes
from oomless.errors import InputError
from oomless.units import GiB, MiB


def test_sizes_are_binary_and_rounded_half_up() -> None:
    assert to_bytes("7.75", "GiB") == 8_321_499_136
    assert to_bytes("1.06", "MiB") == 1_111_491  # 1.06 × 2^20 = 1111490.56
    assert to_bytes("0", "bytes") == 0
    assert to_bytes("503.52", "GB") == round(503.52 * GiB)  # Ray prints GiB labelled GB
    assert to_bytes("31451456", "kB") == 31451456 * 1024  # the kernel's kB are KiB
    assert to_bytes("1.2.3", "GiB") is None and to_bytes("1", "parsecs") is None


# Ray >= 2.4x names a lease and the newest Ray drops the task clause; texts per the message
# format in ray src/ray/raylet (ids shortened, otherwise as printed).
RAY_LEASE = (
    "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n"
    "Memory on the node (IP: 10.0.62.231, ID: 4c5) where the lease (lease ID: 0a1, name=WorkerDict.__init__, "
    "pid=11362, memory used=1.25GB) was running was 27.71GB / 28.80GB (0.962273), which exceeds the memory usage "
    "threshold of 0.95. Ray killed this worker (ID: 9f1) because it was the most recently scheduled task\n"
)
RAY_NODE = (
    "1 worker(s) were killed due to the node running low on memory. Memory on the node (IP: 10.0.0.1) was "
    "28.62GB / 30.00GB (0.954017), which exceeds the memory usage threshold of 0.950000; Object store memory usage: 0.1GB\n"
)


def test_ray_lease_and_node_forms() -> None:
    lease = diagnose(RAY_LEASE).primary
    assert lease is not None and (lease.kind, lease.variant) == (Kind.ray_oom, "lease")
    assert lease.numbers["worker_pid"] == 11362 and lease.numbers["usage_threshold"] == 0.95
    assert lease.labels["task_name"] == "WorkerDict.__init__"
    node = diagnose(RAY_NODE).primary
    assert node is not None and node.variant == "node"
    assert node.numbers["node_total_bytes"] == round(30 * GiB) and node.numbers["usage_threshold"] == 0.95


def test_cgroup_oom_kill_and_old_kernel_wording() -> None:
    cgroup = diagnose("Memory cgroup out of memory: Killed process 4242 (python) total-vm:100kB, anon-rss:50kB, file-rss:0kB, shmem-rss:0kB\n")
    assert cgroup.primary is not None and cgroup.primary.variant == "cgroup"
    assert cgroup.primary.numbers["anon_rss_bytes"] == 50 * 1024
    old = diagnose("Out of memory: Kill process 7 (python3) score 900 or sacrifice child\n")
    assert old.primary is not None and old.primary.numbers == {"pid": 7}


def test_allowed_clause_and_runtime_error() -> None:
    text = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of "
            "79.15 GiB of which 30.00 GiB is free. 40.00 GiB allowed; Of the allocated memory 39.00 GiB is allocated "
            "by PyTorch, and 500.00 MiB is reserved by PyTorch but unallocated.")
    f = diagnose(text).primary
    assert f is not None and f.numbers["allowed_bytes"] == 40 * GiB and f.numbers["gpu_index"] == 3
    runtime = diagnose("RuntimeError: CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported").primary
    assert runtime is not None and (runtime.kind, runtime.variant, runtime.numbers) == (Kind.torch_gpu_oom, "cuda_runtime", {})


def test_a_raise_line_and_its_exception_are_one_finding_but_two_gpus_are_two() -> None:
    one = find_all('    raise ValueError("No available memory for the cache blocks. "\nValueError: No available memory for the cache blocks.\n')
    assert len(one) == 1 and one[0].line == 2
    two = find_all("CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 8.00 GiB of which 0 bytes is free.\n"
                   "CUDA out of memory. Tried to allocate 1.00 GiB. GPU 1 has a total capacity of 8.00 GiB of which 0 bytes is free.\n")
    assert [f.numbers["gpu_index"] for f in two] == [0, 1]


def test_direct_oom_beats_its_nccl_consequence() -> None:
    text = ("node:1:2 [0] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'\n"
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of "
            "79.15 GiB of which 2.00 MiB is free.\n")
    d = diagnose(text)
    assert [f.kind for f in d.findings] == [Kind.nccl_oom, Kind.torch_gpu_oom]
    assert d.primary is d.findings[1]


def _frames(*funcs: tuple[str, str]) -> str:
    return "".join(f'  File "{path}", line 1, in {func}\n    x()\n' for path, func in funcs)


def test_innermost_strong_frame_decides() -> None:
    text = _frames(("/verl/workers/fsdp_workers.py", "generate_sequences"), ("/vllm/worker/worker.py", "wake_up"),
                   ("/torch/nn/modules/module.py", "_apply")) + "OOM\n"
    guess = infer_phase(text, text.count("\n"))
    assert (guess.phase, guess.detail) == ("rollout", "wake_up")


def test_weak_frames_count_only_without_strong_ones() -> None:
    weak_only = _frames(("/x/torch/nn/modules/module.py", "_apply")) + "OOM\n"
    assert infer_phase(weak_only, weak_only.count("\n")).phase == "load"
    engine_step = _frames(("/x/vllm/engine/llm_engine.py", "step"), ("/x/vllm/model_executor/models/llama.py", "forward")) + "OOM\n"
    assert infer_phase(engine_step, engine_step.count("\n")).detail == "generate"  # vLLM's step is no optimizer step


def test_frames_after_the_error_are_the_fallback() -> None:
    text = "OOM\n" + _frames(("/trl/trainer/grpo_trainer.py", "compute_loss"))
    assert infer_phase(text, 1).phase == "train"
    assert infer_phase("OOM\nnothing here\n", 1).phase is None


def test_clean_removes_colours_markdown_and_carriage_returns() -> None:
    assert clean("\x1b[31mred\x1b[0m ^[[36mcyan^[[0m **bold**\r\nnext\rline") == "red cyan bold\nnext\nline"


def test_read_log_errors_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        read_log(tmp_path / "missing.log")
    with pytest.raises(InputError, match="directory"):
        read_log(tmp_path)
    binary = tmp_path / "core.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    assert diagnose(read_log(binary)).primary is None


def test_huge_logs_are_read_from_their_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import oomless.doctor.text as T

    monkeypatch.setattr(T, "MAX_LOG_BYTES", 4 * 1024)
    log = tmp_path / "big.log"
    log.write_text("x" * (10 * MiB // 1024) + "\n" + "ValueError: No available memory for the cache blocks.\n")
    text = read_log(log)
    assert len(text) <= 4 * 1024 and diagnose(text).primary is not None
