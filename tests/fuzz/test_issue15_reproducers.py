"""Every minimal reproducer of issue 15 ("Why"), and the same attacks on the surfaces added
since (`oomless models ID`, `oomless stats`, the shell/Hydra front-ends of `--from`): each ends
within 10 s in a verdict (exit 0/1, or doctor's diagnosis) or one line and exit 2 — never a
traceback, never exit 3. An injected failure of oomless itself exits 3 on every command.

Inputs that once hung run in a real process with a 30 s kill switch, so a regression fails
this test instead of stalling the suite; the rest run in-process. Time is measured
generously (a loaded CI runner) against the issue's 10 s.
"""

from __future__ import annotations

import json
import struct
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from oomless.cli.main import app
from oomless.errors import EXIT_BAD_INPUT, EXIT_DOES_NOT_FIT, EXIT_FITS, EXIT_INTERNAL_ERROR
from tests.cli.conftest import oomless_command
from tests.helpers import EXAMPLES, ROOT

SECONDS = 10.0
"""The issue's bound on every reproducer."""
VERDICT = (EXIT_FITS, EXIT_DOES_NOT_FIT)
"""A plan's verdict; for `doctor`, diagnosed (0) or nothing recognised (1)."""
BAD = (EXIT_BAD_INPUT,)

QUICKSTART = (EXAMPLES / "quickstart.yaml").read_text(encoding="utf-8")
NATIVE = EXAMPLES / "seeds" / "native"
GOLDEN = ROOT / "tests" / "adapters" / "golden"
CATALOG_CONFIG = ROOT / "src" / "oomless" / "catalog" / "data" / "models" / "EleutherAI--pythia-14m.json"


def spec(tmp: Path, old: str, new: str) -> list[str]:
    """`oomless plan` of the quickstart spec with ``old`` replaced by ``new``."""
    assert old in QUICKSTART
    path = tmp / "spec.yaml"
    path.write_text(QUICKSTART.replace(old, new), encoding="utf-8")
    return ["plan", str(path)]


def written(tmp: Path, name: str, text: str) -> Path:
    path = tmp / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def native(tmp: Path, framework: str, source: Path, old: str, new: str, name: str | None = None) -> list[str]:
    """`oomless plan --from FRAMEWORK` of a shipped native config with ``old`` → ``new``."""
    text = source.read_text(encoding="utf-8")
    assert old in text
    return ["plan", "--from", framework, str(written(tmp, name or source.name, text.replace(old, new))), "--gpu", "H100"]


def alias_bomb(tmp: Path) -> list[str]:
    """Nine levels of nine references to the level below (9^9 nodes), used as `batch:`."""
    levels = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    text = "\n".join(levels) + "\n" + QUICKSTART.replace("batch:\n", "old_batch:\n") + "batch: *a8\n"
    return ["plan", str(written(tmp, "bomb.yaml", text))]


def deep_yaml(depth: int) -> str:
    return "data: " + "{a: " * depth + "1" + "}" * depth + "\n"


def vlmr1_list_json(tmp: Path) -> list[str]:
    written(tmp, "zero3.json", "[1, 2, 3]")
    return native(tmp, "vlmr1", GOLDEN / "vlmr1" / "run_vlmr1.sh", "--deepspeed zero3.json", "--deepspeed zero3.json")


def model_folder(tmp: Path, header_length: int) -> Path:
    """A local model folder (pythia-14m's config) whose safetensors header claims
    ``header_length`` bytes."""
    folder = tmp / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(json.loads(CATALOG_CONFIG.read_text(encoding="utf-8"))),
                                        encoding="utf-8")
    with (folder / "model.safetensors").open("wb") as handle:
        handle.write(struct.pack("<Q", header_length) + b'{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}')
    return folder


def image_that_is_not(tmp: Path) -> list[str]:
    written(tmp, "a.png", "not a png")
    return ["stats", str(written(tmp, "rows.jsonl", json.dumps({"prompt": "look", "images": ["a.png"]}) + "\n"))]


def bytes_file(tmp: Path, name: str, data: bytes) -> Path:
    path = tmp / name
    path.write_bytes(data)
    return path


ORZ = NATIVE / "s4-before.py"
ORZ_FIELD = "    zero_stage: int = 3\n"
SWIFT = NATIVE / "s0-before.sh"
VERL = GOLDEN / "verl" / "verl_ppo.yaml"

Case = tuple[str, Callable[[Path], list[str]], tuple[int, ...]]
CASES: list[Case] = [
    # --- specs ---------------------------------------------------------------------------------
    ("host_ram_gib 1e308", lambda t: spec(t, "host_ram_gib: 512", "host_ram_gib: 1.0e+308"), BAD),
    ("gpu_capacity_gib .inf", lambda t: spec(t, "  gpu: A100-80GB", "  gpu_capacity_gib: .inf"), BAD),
    ("oversample_factor .inf", lambda t: spec(t, "  num_generations: 8", "  num_generations: 8\n  oversample_factor: .inf"), BAD),
    ("model of 300 characters", lambda t: spec(t, "model: Qwen/Qwen2.5-1.5B-Instruct", "model: " + "a" * 300), BAD),
    ("model ~nosuchuser/m", lambda t: spec(t, "model: Qwen/Qwen2.5-1.5B-Instruct", "model: '~nosuchuser/m'"), BAD),
    ("model with a NUL", lambda t: spec(t, "model: Qwen/Qwen2.5-1.5B-Instruct", 'model: "a\\0b"'), BAD),
    ("YAML nested 1,000 deep", lambda t: ["plan", str(written(t, "deep.yaml", "model: " + "[" * 1000 + "]" * 1000))], BAD),
    ("micro_batch_size 10**400", lambda t: spec(t, "micro_batch_size: 4", "micro_batch_size: 1" + "0" * 400), BAD),
    ("gpus_per_node 10**400", lambda t: spec(t, "gpus_per_node: 4", "gpus_per_node: 1" + "0" * 400), BAD),
    ("kl_beta .inf", lambda t: spec(t, "kl_beta: 0.04", "kl_beta: .inf"), BAD),
    ("lora_alpha .inf", lambda t: spec(t, "  method: full", "  method: lora\n  lora_alpha: .inf"), BAD),
    # --- doctor ------------------------------------------------------------------------------
    ("doctor: 'Tried to allocate 99999999999999999999.00 GiB'",
     lambda t: ["doctor", str(written(t, "a.log", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
                                      "99999999999999999999.00 GiB. GPU 0 has a total capacity of 79.10 GiB\n"))], VERDICT),
    ("doctor: CPU allocator, 400-digit byte count",
     lambda t: ["doctor", str(written(t, "a.log", "RuntimeError: [enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: "
                                      f"not enough memory: you tried to allocate {'9' * 400} bytes.\n"))], VERDICT),
    ("doctor: binary log", lambda t: ["doctor", str(bytes_file(t, "a.log", bytes(range(256)) * 64))], VERDICT + BAD),
    # --- adapters ----------------------------------------------------------------------------
    ("ORZ x = 'a' * 10**19", lambda t: native(t, "orz", ORZ, ORZ_FIELD, ORZ_FIELD + "    x: str = 'a' * 10000000000000000000\n"), VERDICT),
    ("ORZ x = 'a' * 99999999999", lambda t: native(t, "orz", ORZ, ORZ_FIELD, ORZ_FIELD + "    x: str = 'a' * 99999999999\n"), VERDICT),
    ("ORZ squaring chain", lambda t: native(t, "orz", ORZ, ORZ_FIELD, ORZ_FIELD + "    a0: int = 99999999999\n" + "".join(
        f"    a{i + 1}: int = a{i} * a{i}\n" for i in range(40))), VERDICT),
    ("ORZ 1 + 1 + ... 3,000 terms", lambda t: native(t, "orz", ORZ, ORZ_FIELD, ORZ_FIELD + "    x: int = " + " + ".join(["1"] * 3000) + "\n"),
     BAD + VERDICT),
    ("ORZ mapped field too large", lambda t: native(t, "orz", ORZ, ORZ_FIELD, "    zero_stage: int = 3 * 10000000000 * 10000000000\n"), BAD),
    ("ORZ 5,000-digit literal", lambda t: native(t, "orz", ORZ, ORZ_FIELD, ORZ_FIELD + "    x: int = " + "9" * 5000 + "\n"), BAD + VERDICT),
    ("ms-swift $((1+1+...)) 3,000 terms", lambda t: native(t, "swift", SWIFT, "--num_generations 8", "--num_generations $((" + "1+" * 3000 + "1))"), BAD),
    ("ms-swift --per_device_train_batch_size 1e400",
     lambda t: native(t, "swift", SWIFT, "--per_device_train_batch_size 8", "--per_device_train_batch_size 1e400"), BAD),
    ("ms-swift bashlex-breaking script", lambda t: native(t, "swift", SWIFT, "--output_dir output/s0-before", "--output_dir output/s0-before\n"
                                                          "case $x in a) echo ;; esac\nfunction f { (( ; }\nfor ((i=0;i<3;i++)); do :; done\n"
                                                          "a=(" + "(" * 200 + "\n<<<\n$(( \n"), BAD + VERDICT),
    ("ms-swift unbalanced command substitution", lambda t: native(t, "swift", SWIFT, "--num_generations 8", "--num_generations ${X:-$(echo ${Y:-`a`})}"),
     BAD + VERDICT),
    ("EasyR1 YAML nested 3,000 deep", lambda t: ["plan", "--from", "easyr1", str(written(t, "c.yaml", deep_yaml(3000))), "--gpu", "H100"], BAD),
    ("verl YAML nested 3,000 deep", lambda t: ["plan", "--from", "verl", str(written(t, "c.yaml", deep_yaml(3000))), "--gpu", "H100"], BAD),
    ("verl --config-name of 300 characters", lambda t: ["plan", "--from", "verl", str(written(
        t, "run.sh", "python3 -m verl.trainer.main_ppo --config-path=. --config-name=" + "n" * 300 + "\n")), "--gpu", "H100"], BAD),
    ("EasyR1 config= of 300 characters", lambda t: ["plan", "--from", "easyr1", str(written(
        t, "run.sh", "python3 -m verl.trainer.main config=" + "n" * 300 + ".yaml\n")), "--gpu", "H100"], BAD),
    ("VLM-R1 DeepSpeed JSON that is a list", vlmr1_list_json, BAD),
    ("verl Hydra: interpolation to a missing key", lambda t: native(t, "verl", VERL, "ppo_mini_batch_size: 256", "ppo_mini_batch_size: ${nope.missing}"), BAD),
    ("verl Hydra: custom resolver", lambda t: native(t, "verl", VERL, "ppo_mini_batch_size: 256", "ppo_mini_batch_size: ${eval:1+1}"), BAD),
    ("verl Hydra: unclosed interpolation", lambda t: native(t, "verl", VERL, "ppo_mini_batch_size: 256", 'ppo_mini_batch_size: "${oc.select:a"'), BAD),
    ("verl Hydra: interpolation cycle", lambda t: native(t, "verl", VERL, "ppo_mini_batch_size: 256", "ppo_mini_batch_size: ${.ppo_epochs}\n    ppo_epochs: ${.ppo_mini_batch_size}"),
     BAD),
    # --- oomless models ----------------------------------------------------------------------
    ("models: id of 300 characters", lambda t: ["models", "a" * 300], BAD),
    ("models: ~nosuchuser/m", lambda t: ["models", "~nosuchuser/m"], BAD),
    ("models: config.json that is a list", lambda t: ["models", str(written(t, "m/config.json", "[1, 2]"))], BAD),
    ("models: config.json nested 100,000 deep", lambda t: ["models", str(written(t, "m/config.json", "[" * 100_000))], BAD),
    ("models: safetensors header claiming 1 GB", lambda t: ["models", str(model_folder(t, 1 << 30))], (EXIT_FITS,)),
    ("models: safetensors header claiming 2**64 - 1 bytes", lambda t: ["models", str(model_folder(t, 2**64 - 1))], (EXIT_FITS,)),
    # --- oomless stats -----------------------------------------------------------------------
    ("stats: malformed JSONL", lambda t: ["stats", str(written(t, "d.jsonl", '{"prompt": "hi"}\n{"prompt": \n'))], BAD),
    ("stats: binary .jsonl", lambda t: ["stats", str(bytes_file(t, "d.jsonl", bytes(range(256)) * 16))], BAD),
    ("stats: binary .json", lambda t: ["stats", str(bytes_file(t, "d.json", bytes(range(256)) * 16))], BAD),
    ("stats: JSON nested 100,000 deep", lambda t: ["stats", str(written(t, "d.json", "[" * 100_000))], BAD),
    ("stats: image that is not an image", image_that_is_not, (EXIT_FITS,)),
    ("stats: path of 300 characters", lambda t: ["stats", "d" * 300 + ".jsonl"], BAD),
    ("stats: ~nosuchuser/d.jsonl", lambda t: ["stats", "~nosuchuser/d.jsonl"], BAD),
]
"""(what, argv for a scratch folder, allowed exit codes), in the issue's order."""

OUT_OF_PROCESS: list[Case] = [
    ("YAML alias bomb as batch:", alias_bomb, BAD),
    ("Qwen2.5-VL vision.max_pixels 10**12", lambda t: spec(t, "model: Qwen/Qwen2.5-1.5B-Instruct\n",
                                                         "model: Qwen/Qwen2.5-VL-7B-Instruct\nvision:\n  max_pixels: 1000000000000\n"), BAD),
    ("Qwen2.5-VL eager, vision.max_pixels 2**28 (the bound)",
     lambda t: spec(t, "model: Qwen/Qwen2.5-1.5B-Instruct\n", "model: Qwen/Qwen2.5-VL-7B-Instruct\nattention: eager\n"
                    "vision:\n  max_pixels: 268435456\n"), VERDICT),
    ("doctor: 100,000 characters without whitespace near an error",
     lambda t: ["doctor", str(written(t, "a.log", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB "
                                      + "x" * 100_000 + "\n"))], VERDICT),
    ("doctor: 200,000 characters, then the error",
     lambda t: ["doctor", str(written(t, "a.log", "x" * 200_000 + " CUDA out of memory. Tried to allocate 2.00 GiB. "
                                      "GPU 0 has a total capacity of 79.10 GiB\n"))], VERDICT),
]
"""Reproducers that hung or took minutes: a real process, killed at 30 s."""


def assert_outcome(what: str, code: int, output: str, seconds: float, allowed: tuple[int, ...]) -> None:
    assert "Traceback" not in output, f"{what}: {output[-800:]}"
    assert code != EXIT_INTERNAL_ERROR, f"{what}: {output[-300:]}"
    assert code in allowed, f"{what}: exit {code}, allowed {allowed}: {output[-300:]}"
    assert seconds < SECONDS, f"{what}: {seconds:.1f} s"
    if code == EXIT_BAD_INPUT and allowed == BAD:
        lines = [line for line in output.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), f"{what}: {output[-800:]}"


@pytest.mark.parametrize("what, argv, allowed", CASES, ids=[c[0] for c in CASES])
def test_a_reproducer_ends_in_a_verdict_or_one_line(tmp_path: Path, what: str, argv: Callable[[Path], list[str]],
                                                    allowed: tuple[int, ...]) -> None:
    args = argv(tmp_path)
    start = time.monotonic()
    result = CliRunner().invoke(app, args)
    seconds = time.monotonic() - start
    assert result.exception is None or isinstance(result.exception, SystemExit), f"{what}: {result.exception!r}"
    assert_outcome(what, result.exit_code, result.output, seconds, allowed)


@pytest.mark.parametrize("what, argv, allowed", OUT_OF_PROCESS, ids=[c[0] for c in OUT_OF_PROCESS])
def test_a_reproducer_that_once_hung_ends_in_time(tmp_path: Path, what: str, argv: Callable[[Path], list[str]],
                                                  allowed: tuple[int, ...]) -> None:
    command = [*oomless_command(), *argv(tmp_path)]
    start = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=30, check=False)
    seconds = time.monotonic() - start
    assert_outcome(what, done.returncode, done.stdout + done.stderr, seconds, allowed)


def _boom(*_args: object, **_kwargs: object) -> None:
    raise ZeroDivisionError("injected failure")


INJECTED: list[tuple[str, str, Callable[[Path], list[str]]]] = [
    ("oomless.catalog.resolve", "load_model", lambda t: ["models", "Qwen/Qwen2.5-1.5B-Instruct"]),
    ("oomless.stats.measure", "measure", lambda t: ["stats", str(written(t, "d.jsonl", '{"prompt": "hi"}\n'))]),
    ("oomless.adapters", "import_native", lambda t: ["plan", "--from", "swift", str(SWIFT), "--gpu", "H100"]),
    ("oomless.planner.plan", "make_plan", lambda t: ["plan", "--from", "orz", str(ORZ), "--gpu", "H100"]),
    ("oomless.doctor.diagnose", "infer_phase", lambda t: ["doctor", str(written(
        t, "a.log", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"))]),
]
"""(module, function, argv): a failure of oomless itself in each command's path."""


@pytest.mark.parametrize("module, name, argv", INJECTED, ids=[f"{m}.{n}" for m, n, _ in INJECTED])
def test_an_injected_internal_error_exits_3_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str,
                                                        name: str, argv: Callable[[Path], list[str]]) -> None:
    import importlib

    monkeypatch.setattr(importlib.import_module(module), name, _boom)
    result = CliRunner().invoke(app, argv(tmp_path))
    assert result.exit_code == EXIT_INTERNAL_ERROR, result.output[-500:]
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines[-1] == "internal error: ZeroDivisionError: injected failure; rerun with --debug and report it"
    assert all(line.startswith("note: ") for line in lines[:-1]), lines  # what --from read, before the failure
