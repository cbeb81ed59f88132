"""`oomless train` against TRL's defaults: peak memory and step time, on a real vocabulary.

One task (examples/tiny-arith.yaml: single-digit addition, GRPO, a Qwen2-shaped model with
random weights built locally), run at two vocabulary sizes, each row the same spec but for
``vocab_size``:

- Qwen's 151,936 (the catalog's Qwen/Qwen2.5-0.5B-Instruct config.json): the embedding, the LM
  head and the log-prob tiles are as wide as a real Qwen2/Qwen2.5 model's. The tokenizer is the
  character tokenizer of `oomless.train.tiny`, a `tokenizers` WordLevel model widened with
  filler entries to exactly ``vocab_size`` tokens, wrapped in `PreTrainedTokenizerFast` with
  `<pad>`/`<eos>` set and saved beside the weights (no hub).
- The example's own 17-token vocabulary, so the difference a vocabulary makes stays visible.

Both sides see the same effective batch (the spec's micro-batch × gradient accumulation
completions per optimizer step, `num_generations` per prompt), the same lengths, rewards,
learning rate, seed, model folder and number of steps, one torch thread each. What differs:

- TRL defaults: `GRPOConfig` as shipped except what the task and a CPU need (the batch and
  lengths above, `use_cpu`, `bf16=False`, `report_to="none"`): gradient checkpointing on
  (TRL's default), TRL's log-prob tile of 32,768 vocabulary columns, optimizer states resident.
- oomless: the spec as `oomless train` runs it: no checkpointing (the spec's choice), the
  log-prob tile narrowed to the vocabulary when it is smaller than 32,768, optimizer states
  spilled during rollout.

Memory is the peak of live tensor bytes over the whole run, counted by the same dispatch-level
tracker (`oomless.train.live_bytes`) in both runs, so its overhead is in both step times; the
process's peak RSS is recorded too. The model folder is built once per vocabulary in the parent
process, so neither peak includes building it. Step time is the median wall time per optimizer
step after the warm-up steps. Each run is a fresh subprocess; runs alternate between sides.

    nice -n 10 .venv/bin/python benchmarks/train_vs_trl.py     # writes benchmarks/results/train-vs-trl.{json,md}
    .venv/bin/python benchmarks/train_vs_trl.py --vocab-sizes 151936 --steps 10 --repeats 1 --no-write
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "examples" / "tiny-arith.yaml"
RESULTS = ROOT / "benchmarks" / "results"
WORK = Path("/tmp") / "oomless-bench-train-vs-trl"
REAL_VOCAB_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
"""Whose ``vocab_size`` the real-vocabulary row takes (151,936, the catalog's config.json)."""
SIDES = ("trl_defaults", "oomless")
TOKENIZER_DIR = "tokenizer"
TARGET_MEMORY_RATIO, TARGET_TIME_RATIO = 0.6, 1.1


def real_vocab_size() -> int:
    from oomless.catalog.resolve import catalog_config

    return int(catalog_config(REAL_VOCAB_MODEL)["vocab_size"])


def min_vocab_size() -> int:
    """The character tokenizer's own entries (specials, chat markers, digits, `+`, `=`)."""
    from oomless.train.tiny import vocabulary

    return len(vocabulary())


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab-sizes", type=int, nargs="+", default=None, metavar="N",
                        help=f"one row per vocabulary size (default: the example's own and {REAL_VOCAB_MODEL}'s)")
    parser.add_argument("--steps", type=int, default=12,
                        help="optimizer steps per run (default 12: a 151,936-token step takes tens of seconds on one CPU thread)")
    parser.add_argument("--warmup", type=int, default=2, help="steps left out of the median step time (default 2)")
    parser.add_argument("--repeats", type=int, default=2,
                        help="runs per side and row, alternated; each keeps its fastest median (default 2)")
    parser.add_argument("--no-write", action="store_true", help="print the results, write nothing under benchmarks/results")
    parser.add_argument("--render", type=Path, metavar="JSON",
                        help="measure nothing: write train-vs-trl.md from an earlier results file")
    args = parser.parse_args(argv)
    smallest = min_vocab_size()
    if args.vocab_sizes is None:
        args.vocab_sizes = [int(json.loads(spec_model_config().read_text())["vocab_size"]), real_vocab_size()]
    for n in args.vocab_sizes:
        if n < smallest:
            parser.error(f"--vocab-sizes: {n} is below {smallest}, the character tokenizer's own entries")
    if len(set(args.vocab_sizes)) != len(args.vocab_sizes):
        parser.error(f"--vocab-sizes: {args.vocab_sizes} repeats a size")
    if args.steps < 1 or args.repeats < 1 or not 0 <= args.warmup < args.steps:
        parser.error(f"--steps {args.steps}, --warmup {args.warmup}, --repeats {args.repeats}: "
                     "need steps >= 1, repeats >= 1 and 0 <= warmup < steps")
    return args


def spec_model_config() -> Path:
    return SPEC.parent / yaml.safe_load(SPEC.read_text(encoding="utf-8"))["model"]


def write_spec(vocab_size: int, folder: Path, gradient_checkpointing: bool | None = None, name: str = "spec.yaml") -> Path:
    """The example's spec and model config with ``vocab_size`` changed and the tokenizer read
    from ``folder/tokenizer`` (`build_local_tokenizer`), nothing else (but
    ``gradient_checkpointing`` when given), in ``folder``."""
    spec = yaml.safe_load(SPEC.read_text(encoding="utf-8"))
    config = json.loads(spec_model_config().read_text(encoding="utf-8"))
    config["vocab_size"] = vocab_size
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    spec["model"] = "config.json"
    spec["train"]["save_steps"] = 0  # no checkpoints, as TRL's side (save_strategy "no")
    spec["train"]["tokenizer"] = str((folder / TOKENIZER_DIR).resolve())
    if gradient_checkpointing is not None:
        spec["gradient_checkpointing"] = gradient_checkpointing
    path = folder / name
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


def build_local_tokenizer(vocab_size: int, folder: Path) -> Any:
    """The character tokenizer widened to exactly ``vocab_size`` entries, saved alone in
    ``folder`` and loaded back as both trainers load it (`AutoTokenizer`).

    Alone: beside a qwen2 config.json, transformers 5.23 and 5.24's `AutoTokenizer` ignore the saved
    tokenizer class (qwen2 is in `MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS`) and rebuilds a
    byte-level BPE `Qwen2Tokenizer` from the vocabulary, adding `<|endoftext|>` one past it
    (``vocab_size + 1`` entries). Source: transformers 5.23 `models/auto/tokenization_auto.py`."""
    from transformers import AutoTokenizer

    from oomless.train.tiny import build_tokenizer

    shutil.rmtree(folder, ignore_errors=True)
    build_tokenizer(vocab_size).save_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    if len(tokenizer) != vocab_size or tokenizer.pad_token is None or tokenizer.eos_token is None:
        raise RuntimeError(f"the tokenizer in {folder} has {len(tokenizer)} entries (wanted {vocab_size}), "
                           f"pad {tokenizer.pad_token!r}, eos {tokenizer.eos_token!r}")
    return tokenizer


def build_model_folder(spec_path: Path, out: Path) -> dict[str, Any]:
    """Random weights for ``spec_path``'s model in ``out`` and its tokenizer in ``spec_path``'s
    folder; returns what was built."""
    from transformers import AutoConfig

    from oomless.spec.load import load_run
    from oomless.train.tiny import build_model

    spec = load_run(spec_path).spec
    shutil.rmtree(out, ignore_errors=True)
    build_model(spec_path.parent / spec.model, spec.train.build_model, out)
    config = AutoConfig.from_pretrained(out)
    tokenizer = build_local_tokenizer(config.vocab_size, Path(spec.train.tokenizer))
    return {"vocab_size": config.vocab_size, "tokenizer_entries": len(tokenizer), "tokenizer": type(tokenizer.backend_tokenizer.model).__name__,
            "pad_token_id": tokenizer.pad_token_id, "eos_token_id": tokenizer.eos_token_id,
            "tie_word_embeddings": config.tie_word_embeddings, "hidden_size": config.hidden_size,
            "intermediate_size": config.intermediate_size, "num_hidden_layers": config.num_hidden_layers,
            "num_attention_heads": config.num_attention_heads, "num_key_value_heads": config.num_key_value_heads}


def step_timer() -> Any:
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.times: list[float] = []
            self.cpu_times: list[float] = []
            self.last = self.last_cpu = 0.0

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.last, self.last_cpu = time.perf_counter(), time.process_time()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.times.append(time.perf_counter() - self.last)
            self.cpu_times.append(time.process_time() - self.last_cpu)

    return StepTimer()


def logprob_chunk() -> int:
    import trl.trainer.utils as trl_utils

    return int(trl_utils._CHUNKED_LOGPROB_CHUNK_SIZE)


def run_oomless(spec_path: Path, model_dir: Path, out: Path, steps: int) -> dict[str, Any]:
    from oomless.planner.plan import make_plan
    from oomless.spec.load import load_run
    from oomless.train.devices import detect_machine
    from oomless.train.live_bytes import LiveTensorBytes
    from oomless.train.run import prepare_output
    from oomless.train.session import build_trainer

    run = load_run(spec_path)
    plan = make_plan(run.spec, run.arch, run.gpu, run.archs)
    prepare_output(out, resume=False, overwrite=True, say=lambda line: None)  # the benchmark replaces its own run
    shutil.rmtree(out / "model", ignore_errors=True)
    shutil.copytree(model_dir, out / "model")  # `build_model` reuses a built folder as it is
    tracker = LiveTensorBytes()
    trainer = build_trainer(run.spec, plan, spec_path.parent, out, steps, detect_machine(), lambda line: None, tracker)
    timer = step_timer()
    trainer.add_callback(timer)
    with tracker:
        trainer.train()
    records = [json.loads(line) for line in (out / "telemetry.jsonl").read_text().splitlines()]
    return {"peak_bytes": max(r["peak_bytes"] for r in records), "step_seconds": timer.times, "step_cpu_seconds": timer.cpu_times,
            "peak_by_phase": {p: max(r["peak_bytes"] for r in records if r["phase"] == p) for p in {r["phase"] for r in records}},
            "spilled_bytes_per_rollout": max((r.get("offload_moved_bytes", 0) for r in records), default=0),
            "rewards": [r["reward"] for r in trainer.hooks.rewards], "logprob_chunk": logprob_chunk(),
            "num_parameters": sum(p.numel() for p in trainer.model.parameters())}


def run_trl_defaults(spec_path: Path, model_dir: Path, out: Path, steps: int) -> dict[str, Any]:
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from oomless.spec.load import load_run
    from oomless.train.data import load_prompts
    from oomless.train.live_bytes import LiveTensorBytes
    from oomless.train.rewards import build_reward

    spec = load_run(spec_path).spec
    train = spec.train
    rewards = [build_reward(r, spec.lengths.max_completion_tokens) for r in train.rewards]
    config = GRPOConfig(
        output_dir=str(out), max_steps=steps,
        per_device_train_batch_size=spec.batch.micro_batch_size * spec.batch.gradient_accumulation_steps,
        num_generations=spec.batch.num_generations, max_completion_length=spec.lengths.max_completion_tokens,
        learning_rate=train.learning_rate, lr_scheduler_type=train.lr_scheduler,
        seed=train.seed, reward_weights=[r.weight for r in train.rewards],
        use_cpu=True, bf16=False, report_to="none", save_strategy="no", disable_tqdm=True,
    )
    trainer = GRPOTrainer(model=str(model_dir), reward_funcs=rewards, args=config,
                          train_dataset=load_prompts(train.data), processing_class=AutoTokenizer.from_pretrained(train.tokenizer))
    tracker = LiveTensorBytes()
    tracker.track(list(trainer.model.parameters()) + list(trainer.model.buffers()))
    timer = step_timer()
    trainer.add_callback(timer)
    with tracker:
        trainer.train()
    rewards_logged = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    return {"peak_bytes": tracker.peak["cpu"], "step_seconds": timer.times, "step_cpu_seconds": timer.cpu_times,
            "rewards": rewards_logged,
            "logprob_chunk": logprob_chunk(), "num_parameters": sum(p.numel() for p in trainer.model.parameters()),
            "config": {k: getattr(config, k) for k in ("per_device_train_batch_size", "gradient_accumulation_steps",
                                                        "gradient_checkpointing", "num_generations", "max_completion_length",
                                                        "beta", "loss_type")}}


def scored_positions(spec_path: Path) -> int:
    """Positions TRL's log-prob kernel scores per optimizer step on a CPU (every position of
    every sequence but the last: trl 1.16 `add_fused_lm_head` scores all positions where Triton
    is absent), with completions at their length limit. The task's prompts are all one length
    (single-digit operands), so the first one stands for all."""
    from transformers import AutoTokenizer

    from oomless.spec.load import load_run
    from oomless.train.data import load_prompts

    spec = load_run(spec_path).spec
    tokenizer = AutoTokenizer.from_pretrained(spec.train.tokenizer)
    prompt = load_prompts(spec.train.data)["prompt"][0]
    prompt_tokens = len(tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"])
    step_batch = spec.batch.micro_batch_size * spec.batch.gradient_accumulation_steps
    return step_batch * (prompt_tokens + spec.lengths.max_completion_tokens - 1)


def kernel_peaks(vocab_size: int, hidden_size: int, positions: int, chunk: int) -> dict[str, int]:
    """Peak live tensor bytes of TRL's chunked log-prob kernel alone, over its inputs, for one
    forward and one forward + backward at this vocabulary, width and tile (GRPO's outputs:
    log-probs and entropy). Source: trl 1.16.0 `trl/kernels/chunked_logprob.py`."""
    import torch
    from trl.kernels.chunked_logprob import ChunkedLogProbFunction

    from oomless.train.live_bytes import LiveTensorBytes

    torch.manual_seed(0)
    weight = torch.randn(vocab_size, hidden_size, requires_grad=True)
    hidden = torch.randn(positions, hidden_size, requires_grad=True)
    targets = torch.randint(0, vocab_size, (positions,))
    tracker = LiveTensorBytes()
    tracker.track([weight, hidden, targets])
    inputs = tracker.live["cpu"]
    with tracker:
        log_probs = ChunkedLogProbFunction.apply(hidden, weight, None, targets, 1.0, chunk, None, 1.0, ("log_probs", "entropy"))[0]
        forward = tracker.peak["cpu"] - inputs
        log_probs.sum().backward()
    return {"chunk": chunk, "positions": positions, "forward_bytes": forward, "forward_backward_bytes": tracker.peak["cpu"] - inputs}


def one(which: str, spec_path: Path, model_dir: Path, out: Path, steps: int) -> None:
    import torch

    torch.set_num_threads(1)
    runner = run_oomless if which == "oomless" else run_trl_defaults
    result = runner(spec_path, model_dir, out, steps)
    result["max_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(result))


def versions() -> dict[str, str]:
    from importlib.metadata import version

    return {p: version(p) for p in ("torch", "transformers", "trl", "tokenizers", "peft", "accelerate", "datasets", "oomless")}


def peak_with_checkpointing(vocab_size: int, folder: Path, checkpointing: bool, steps: int) -> dict[str, Any]:
    """One short oomless run with TRL's gradient-checkpointing setting: its peak shows how much
    of the difference between the sides that one setting makes."""
    spec_path = write_spec(vocab_size, folder, gradient_checkpointing=checkpointing, name="spec-checkpointing.yaml")
    command = [sys.executable, __file__, "--one", "oomless", str(spec_path), str(folder / "model"), str(folder / "oomless-checkpointing"), str(steps)]
    run = json.loads(subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT).stdout.strip().splitlines()[-1])
    return {"gradient_checkpointing": checkpointing, "num_steps": steps, "peak_bytes": run["peak_bytes"], "peak_by_phase": run["peak_by_phase"]}


def measure_row(vocab_size: int, args: argparse.Namespace) -> dict[str, Any]:
    """Both sides at one vocabulary size, ``args.repeats`` alternating runs each."""
    folder = WORK / f"vocab-{vocab_size}"
    spec_path = write_spec(vocab_size, folder)
    model = build_model_folder(spec_path, folder / "model")
    positions = scored_positions(spec_path)
    sides: dict[str, Any] = {}
    for _ in range(args.repeats):
        for which in SIDES:
            out = folder / which
            command = [sys.executable, __file__, "--one", which, str(spec_path), str(folder / "model"), str(out), str(args.steps)]
            done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
            if done.returncode != 0:
                raise SystemExit(f"{which} at vocab_size {vocab_size} failed:\n{done.stderr[-4000:]}")
            run = json.loads(done.stdout.strip().splitlines()[-1])
            run["median_step_seconds"] = statistics.median(run["step_seconds"][args.warmup:])
            run["median_step_cpu_seconds"] = statistics.median(run["step_cpu_seconds"][args.warmup:])
            best = sides.get(which)
            medians = (best["all_medians"] if best else []) + [round(run["median_step_seconds"], 5)]
            peaks = (best["all_peaks"] if best else []) + [run["peak_bytes"]]
            if best is None or run["median_step_seconds"] < best["median_step_seconds"]:
                sides[which] = run
            sides[which]["all_medians"], sides[which]["all_peaks"] = medians, peaks
    trl, ours = sides["trl_defaults"], sides["oomless"]
    checkpointed = None
    if trl["config"]["gradient_checkpointing"] != yaml.safe_load(spec_path.read_text())["gradient_checkpointing"]:
        checkpointed = peak_with_checkpointing(vocab_size, folder, trl["config"]["gradient_checkpointing"], min(args.steps, 3))
    kernels = []
    for chunk in sorted({trl["logprob_chunk"], ours["logprob_chunk"]}):
        command = [sys.executable, __file__, "--kernel", str(vocab_size), str(model["hidden_size"]), str(positions), str(chunk)]
        kernels.append(json.loads(subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT).stdout.splitlines()[-1]))
    memory_ratio = ours["peak_bytes"] / trl["peak_bytes"]
    time_ratio = ours["median_step_seconds"] / trl["median_step_seconds"]
    return {
        "vocab_size": vocab_size, "model": model, "trl_defaults_config": trl.pop("config"), "logprob_kernel": kernels,
        "oomless_with_trl_checkpointing": checkpointed,
        "results": {k: {"peak_bytes": v["peak_bytes"], "peak_bytes_per_repeat": v["all_peaks"], "max_rss_bytes": v["max_rss_bytes"],
                        "median_step_seconds": round(v["median_step_seconds"], 5), "median_step_seconds_per_repeat": v["all_medians"],
                        "median_step_cpu_seconds": round(v["median_step_cpu_seconds"], 5),
                        "step_seconds": [round(x, 4) for x in v["step_seconds"]],
                        "step_cpu_seconds": [round(x, 4) for x in v["step_cpu_seconds"]],
                        "peak_by_phase": v.get("peak_by_phase"), "spilled_bytes_per_rollout": v.get("spilled_bytes_per_rollout"),
                        "logprob_chunk": v["logprob_chunk"],
                        "num_parameters": v["num_parameters"], "mean_reward_last_10": _mean_tail(v["rewards"])}
                    for k, v in sides.items()},
        "memory_ratio": round(memory_ratio, 4), "step_time_ratio": round(time_ratio, 4),
        "rss_ratio": round(ours["max_rss_bytes"] / trl["max_rss_bytes"], 4),
        "step_cpu_time_ratio": round(ours["median_step_cpu_seconds"] / trl["median_step_cpu_seconds"], 4),
        "met": {"memory": memory_ratio <= TARGET_MEMORY_RATIO, "step_time": time_ratio <= TARGET_TIME_RATIO},
    }


def _mean_tail(rewards: list[float], n: int = 10) -> float | None:
    tail = rewards[-n:]
    return round(sum(tail) / len(tail), 4) if tail else None


def command_line(argv: list[str]) -> str:
    """The command as typed, with the `nice` level this process runs at."""
    script = Path(__file__).resolve().relative_to(ROOT)
    python = os.path.relpath(sys.executable, ROOT) if sys.executable.startswith(str(ROOT)) else sys.executable
    niceness = os.nice(0)
    prefix = f"nice -n {niceness} " if niceness else ""
    return prefix + shlex.join([python, str(script), *argv])


def document(rows: list[dict[str, Any]], args: argparse.Namespace, argv: list[str],
             load_before: tuple[float, ...], seconds: float) -> dict[str, Any]:
    spec = yaml.safe_load(SPEC.read_text(encoding="utf-8"))
    return {
        "benchmark": "oomless train vs TRL defaults, tiny-arith at two vocabulary sizes, CPU",
        "command": command_line(argv),
        "machine": {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
                    "cpu_count": os.cpu_count(), "python": platform.python_version(), "torch_threads": 1,
                    "load_average_before": [round(x, 2) for x in load_before],
                    "load_average_after": [round(x, 2) for x in os.getloadavg()]},
        "versions": versions(), "seconds": round(seconds, 1),
        "config": {"spec": str(SPEC.relative_to(ROOT)), "spec_text": SPEC.read_text(encoding="utf-8"),
                   "batch": spec["batch"], "lengths": spec["lengths"], "gradient_checkpointing": spec["gradient_checkpointing"],
                   "real_vocab_from": REAL_VOCAB_MODEL, "num_steps": args.steps, "warmup_steps": args.warmup,
                   "repeats": args.repeats},
        "targets": {"memory_ratio_at_most": TARGET_MEMORY_RATIO, "step_time_ratio_at_most": TARGET_TIME_RATIO},
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> int:
    from train_vs_trl_report import markdown  # beside this file

    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.render is not None:
        (RESULTS / "train-vs-trl.md").write_text(markdown(json.loads(args.render.read_text(encoding="utf-8"))), encoding="utf-8")
        return 0
    load_before, start = os.getloadavg(), time.perf_counter()
    rows: list[dict[str, Any]] = []
    for n in args.vocab_sizes:
        rows.append(measure_row(n, args))
        doc = document(rows, args, argv, load_before, time.perf_counter() - start)
        if not args.no_write:  # after every row, so a long run that is cut off keeps its finished rows
            RESULTS.mkdir(parents=True, exist_ok=True)
            (RESULTS / "train-vs-trl.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
            (RESULTS / "train-vs-trl.md").write_text(markdown(doc), encoding="utf-8")
    print(json.dumps([{k: r[k] for k in ("vocab_size", "memory_ratio", "step_time_ratio", "rss_ratio")} for r in rows]))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--kernel":
        import torch

        torch.set_num_threads(1)
        print(json.dumps(kernel_peaks(*(int(x) for x in sys.argv[2:]))))
        sys.exit(0)
    if len(sys.argv) == 7 and sys.argv[1] == "--one":
        one(sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]), Path(sys.argv[5]), int(sys.argv[6]))
    else:
        sys.exit(main())
