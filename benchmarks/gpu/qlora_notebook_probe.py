"""TRL's QLoRA GRPO notebook (examples/notebooks/grpo_trl_lora_qlora.ipynb, huggingface/trl c9a9e25),
replayed on a GPU with the library releases of its run, to measure what its published figures
measure (issue 14: the plan's error against published measured figures).

    python benchmarks/gpu/qlora_notebook_probe.py build --model Qwen/Qwen2-7B-Instruct --dir /tmp/q7
    PYTHONPATH=<transformers 4.57 site>:$PYTHONPATH python benchmarks/gpu/qlora_notebook_probe.py run --dir /tmp/q7 --out probe.json

`build` (any recent transformers) writes the catalog config's model with random bf16 weights, made on
the GPU, and the character tokenizer padded to its vocabulary. `run` does what cells 23, 25, 29, 31,
33, 36 and 38 do: load the model in 4-bit NF4 with double quantisation and fp16 compute and dtype
float16, wrap it with the notebook's LoRA (r 32 on seven projections) in `GRPOTrainer` with its
GRPOConfig (batch 8, 8 generations, 256 completion tokens, paged_adamw_8bit, Liger, gradient
checkpointing), print `torch.cuda.max_memory_reserved()` after the trainer is built (cell 33's
figure) and after training steps on prompts of a fixed length (cell 38's). The notebook ran on a T4
in fp16 autocast: on a bf16 GPU the same bytes are held (fp16 and bf16 are both 2 bytes). After each
stage the JSON records max reserved, max allocated, allocated and reserved bytes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

NOTEBOOK_LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
GIB = 1 << 30


def build(model_id: str, folder: Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
    from oomless.catalog.resolve import catalog_config
    from oomless.train.tiny import build_tokenizer

    raw = {k: v for k, v in catalog_config(model_id).items() if not k.startswith("_")}
    tokenizer = build_tokenizer(raw["vocab_size"])
    fields = {k: v for k, v in raw.items() if k != "model_type"}
    fields.update(pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=None)
    config = AutoConfig.for_model(raw["model_type"], **fields)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.save_pretrained(folder, max_shard_size="4GB")
    tokenizer.save_pretrained(folder / "tokenizer")
    (folder / "vocab_size.txt").write_text(str(raw["vocab_size"]))


def memory(stage: str, started: float) -> dict[str, Any]:
    import torch

    torch.cuda.synchronize()
    return {"stage": stage, "seconds": round(time.perf_counter() - started, 1),
            "max_reserved_bytes": torch.cuda.max_memory_reserved(), "max_allocated_bytes": torch.cuda.max_memory_allocated(),
            "reserved_bytes": torch.cuda.memory_reserved(), "allocated_bytes": torch.cuda.memory_allocated()}


def run(folder: Path, out: Path, *, steps: int, prompt_chars: int, liger: bool) -> int:
    import datasets
    import peft
    import torch
    import transformers
    import trl
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig, PreTrainedTokenizerFast
    from trl import GRPOConfig, GRPOTrainer

    started = time.perf_counter()
    record: dict[str, Any] = {
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__, "trl": trl.__version__,
                     "peft": peft.__version__, "datasets": datasets.__version__},
        "gpu": torch.cuda.get_device_name(0), "liger": liger, "prompt_chars": prompt_chars, "stages": []}

    def save(stage: str) -> None:
        record["stages"].append(memory(stage, started))
        out.write_text(json.dumps(record, indent=2))
        print(json.dumps(record["stages"][-1]), flush=True)

    model = AutoModelForCausalLM.from_pretrained(  # cell 23
        folder, attn_implementation="sdpa", dtype=torch.float16,
        quantization_config=BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=torch.float16,
                                               bnb_4bit_use_double_quant=True, bnb_4bit_quant_type="nf4"))
    save("from_pretrained")
    tokenizer = PreTrainedTokenizerFast.from_pretrained(folder / "tokenizer")
    tokenizer.model_input_names = ["input_ids", "attention_mask"]  # no token_type_ids: generate() rejects them
    peft_config = LoraConfig(r=32, lora_alpha=32, target_modules=NOTEBOOK_LORA_TARGETS)  # cell 25
    args = GRPOConfig(  # cell 29, reporting and saving off
        output_dir=str(folder / "out"), learning_rate=2e-5, max_steps=steps, per_device_train_batch_size=8,
        max_completion_length=256, num_generations=8, optim="paged_adamw_8bit", use_liger_kernel=liger,
        gradient_checkpointing=True, gradient_checkpointing_kwargs={"use_reentrant": False},
        logging_steps=1, report_to="none", save_strategy="no")
    # prompts of one fixed length (one character is one token with the character tokenizer)
    prompts = [("0123456789" * (prompt_chars // 10 + 1))[:prompt_chars] for _ in range(64)]
    dataset = datasets.Dataset.from_dict({"prompt": prompts})

    def zero_reward(completions: list, **_: Any) -> list[float]:
        return [0.0] * len(completions)

    trainer = GRPOTrainer(model=model, reward_funcs=[zero_reward], args=args, train_dataset=dataset,  # cell 31
                          peft_config=peft_config, processing_class=tokenizer)
    save("trainer_built")  # cell 33's figure
    trainable = {str(p.dtype) for p in trainer.model.parameters() if p.requires_grad}
    record["trainable_dtypes"] = sorted(trainable)
    record["trainable_parameters"] = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
    record["prompt_tokens"] = len(tokenizer(prompts[0])["input_ids"])  # a plain-text prompt: no chat template
    trainer.train()
    save(f"after_{steps}_steps")  # cell 38's figure
    return 0


ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK_CONFIG = ROOT / "tests" / "published_figures" / "configs" / "trl_nb_qlora_qwen2_7b_t4.yaml"
"""The notebook's run as a TRL config (its directive names trl 0.26, transformers 4.57 and the prompt bound)."""


def _pct(planned: int, measured: int) -> float:
    return round(100 * (planned - measured) / measured, 2)


def plan_of_probe(probe: dict[str, Any]) -> dict[str, int]:
    """The current plan of the notebook config at the probe's prompt length on an H100, by phase,
    less the CUDA context (what torch's allocator statistics can see)."""
    import subprocess
    import tempfile

    text = NOTEBOOK_CONFIG.read_text(encoding="utf-8")
    first, rest = text.split("\n", 1)
    first = " ".join(w if not w.startswith("max_prompt_tokens=") else f"max_prompt_tokens={probe['prompt_tokens']}"
                     for w in first.split(" "))
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "notebook.yaml"
        config.write_text(first + "\n" + rest, encoding="utf-8")
        done = subprocess.run([sys.executable, "-c", "from oomless.cli.main import main; main()", "plan", "--from", "trl",
                               str(config), "--gpu", "H100-80GB", "--json"], capture_output=True, text=True, check=False)
    phases = json.loads(done.stdout)["gpu"]["phases"]
    return {p["name"]: p["peak_bytes"] - p["components"].get("cuda_context", 0) for p in phases}


def report(folder: Path) -> dict[str, Any]:
    """Each probe of ``folder`` against the current plan: the load (cell 33's max_memory_reserved
    after the trainer is built, and max_memory_allocated after from_pretrained) and the step (the
    largest phase of the plan against max_memory_allocated and max_memory_reserved after it)."""
    rows = []
    for path in sorted(folder.glob("probe-*.json")):
        probe = json.loads(path.read_text(encoding="utf-8"))
        stages = {s["stage"]: s for s in probe["stages"]}
        step = next(v for k, v in stages.items() if k.startswith("after_"))
        plan = plan_of_probe(probe)
        step_plan = max(plan[p] for p in plan if p != "load")
        rows.append({
            "probe": path.name, "prompt_tokens": probe["prompt_tokens"], "completion_tokens": 256,
            "load_plan_bytes": plan["load"],
            "load_max_allocated_bytes": stages["from_pretrained"]["max_allocated_bytes"],
            "trainer_built_max_reserved_bytes": stages["trainer_built"]["max_reserved_bytes"],
            "load_error_vs_reserved_pct": _pct(plan["load"], stages["trainer_built"]["max_reserved_bytes"]),
            "step_plan_bytes": step_plan,
            "step_max_allocated_bytes": step["max_allocated_bytes"], "step_max_reserved_bytes": step["max_reserved_bytes"],
            "step_error_vs_allocated_pct": _pct(step_plan, step["max_allocated_bytes"]),
            "step_error_vs_reserved_pct": _pct(step_plan, step["max_reserved_bytes"]),
        })
    first = json.loads(sorted(folder.glob("probe-*.json"))[0].read_text(encoding="utf-8"))
    return {"versions": first["versions"], "gpu": first["gpu"], "liger": first["liger"], "rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("build", "run", "report"),
                        help="report: the probes in --dir against the current plan, written to --dir/report.json (no GPU)")
    parser.add_argument("--model", default="Qwen/Qwen2-7B-Instruct")
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=Path("qlora-notebook-probe.json"))
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--prompt-chars", type=int, default=400)
    parser.add_argument("--no-liger", action="store_true")
    args = parser.parse_args(argv)
    if args.what == "report":
        (args.dir / "report.json").write_text(json.dumps(report(args.dir), indent=2) + "\n", encoding="utf-8")
        print((args.dir / "report.json").read_text(encoding="utf-8"))
        return 0
    if args.what == "build":
        build(args.model, args.dir)
        return 0
    return run(args.dir, args.out, steps=args.steps, prompt_chars=args.prompt_chars, liger=not args.no_liger)


if __name__ == "__main__":
    raise SystemExit(main())
