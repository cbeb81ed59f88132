"""A real TRL GRPOTrainer run on the CPU with the drop-in callback and TensorBoard reporting:
the tiny-arith model (built locally, random weights), a dozen prompts, `MAX_STEPS` steps.

Usage: trl_job.py OUT_DIR MAX_STEPS [SPEC]
"""

import sys
from pathlib import Path

from datasets import Dataset
from transformers import AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

from oomless.spec.train_section import BuildModel
from oomless.train.tiny import build_model, tokenizer_dir
from oomless.watch.callback import OomlessMemoryCallback

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

out, max_steps = Path(sys.argv[1]), int(sys.argv[2])
spec = sys.argv[3] if len(sys.argv) > 3 else None
model = build_model(EXAMPLES / "tiny-arith" / "config.json", BuildModel(seed=0), out / "model")
prompts = Dataset.from_list([{"prompt": f"{a}+{b}="} for a in range(4) for b in range(3)])


def digits(completions, **_):
    return [float(c.strip().isdigit()) for c in completions]


config = GRPOConfig(
    output_dir=str(out / "run"), max_steps=max_steps, per_device_train_batch_size=4, num_generations=4,
    max_completion_length=3, logging_steps=1, save_strategy="no", report_to=["tensorboard"],
    use_cpu=True, disable_tqdm=True, dataloader_num_workers=0, seed=0, beta=0.0,
)
trainer = GRPOTrainer(model=str(model), reward_funcs=digits, args=config, train_dataset=prompts,
                      processing_class=AutoTokenizer.from_pretrained(tokenizer_dir(model)))
OomlessMemoryCallback.attach(trainer, spec=spec)
trainer.train()
print("job done", flush=True)
