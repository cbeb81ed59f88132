"""Real CPU training runs of a tiny model: a short run with its telemetry, rollout offload, an
injected out-of-memory error, checkpoint and resume. Each run takes a few seconds."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from safetensors.torch import load_file
from typer.testing import CliRunner

from oomless.cli.main import app
from oomless.train.offload import RolloutOffload
from oomless.train.run import TrainOptions, train
from oomless.telemetry import read_records
from oomless.train.telemetry import read_jsonl
from oomless.train.trainer import OomlessGRPOTrainer
from tests.helpers import EXAMPLES

TINY_CONFIG = EXAMPLES / "tiny-arith" / "config.json"
PHASES_PER_STEP = {"rollout", "train", "optimizer"}


def tiny_spec(tmp_path: Path, **train: Any) -> Path:
    """The tiny-arith example shrunk to seconds: 16 completions per step in 2 micro-batches of 8."""
    data = yaml.safe_load((EXAMPLES / "tiny-arith.yaml").read_text(encoding="utf-8"))
    data["model"] = str(TINY_CONFIG)
    data["batch"] = {"micro_batch_size": 8, "gradient_accumulation_steps": 2, "num_generations": 4}
    data["train"].update(
        {"data": {"arithmetic": {"num_samples": 64, "max_operand": 4, "seed": 0}},
         "max_steps": 3, "save_steps": 0, "output_dir": str(tmp_path / "run"), **train},
    )
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def run(spec: Path, out: Path, **options: Any):
    return train(spec, TrainOptions(output_dir=out, progress=False, **options), say=lambda line: None)


def weights(out: Path) -> dict[str, torch.Tensor]:
    return load_file(str(out / "final" / "model.safetensors"))


def test_short_run_writes_a_record_per_step_and_phase(tmp_path: Path) -> None:
    spec = tiny_spec(tmp_path)
    result = CliRunner().invoke(app, ["train", str(spec), "--output-dir", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert "plan vs actual" in result.output and "mean reward" in result.output
    records = read_records(tmp_path / "run" / "telemetry.jsonl")
    assert {(r["step"], r["phase"]) for r in records} == {(0, "load")} | {(s, p) for s in (1, 2, 3) for p in PHASES_PER_STEP}
    for r in records:
        assert r["peak_bytes"] > 0 and r["planned_bytes"] > 0 and r["rss_bytes"] > 0 and r["device"] == "cpu"
        assert r["schema"] == 1
        assert r["peak_bytes"] >= r["live_bytes"] and set(r["resident_bytes"]) == {"PARAM", "GRAD", "OPT"}
    train_records = [r for r in records if r["phase"] == "train"]
    params = records[0]["resident_bytes"]["PARAM"]
    assert all(r["resident_bytes"]["GRAD"] == params for r in train_records)  # fp32 grads of every weight
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert [row["phase"] for row in summary["plan_vs_actual"]] == ["load", "rollout", "train", "optimizer"]
    assert len(read_jsonl(tmp_path / "run" / "rewards.jsonl")) == 3


def test_rollout_offload_moves_the_optimizer_states_out_and_back(tmp_path: Path) -> None:
    run(tiny_spec(tmp_path), tmp_path / "run")
    rollouts = [r for r in read_records(tmp_path / "run" / "telemetry.jsonl") if r["phase"] == "rollout"]
    first, later = rollouts[0], rollouts[1:]
    assert first["offload_moved_bytes"] == 0  # Adam's states are made at the first optimizer step
    for r in later:
        opt = r["offload_moved_bytes"]
        assert opt > 0
        assert r["offload_device_bytes_before"] - r["offload_device_bytes_after"] == opt
        assert r["reload_device_bytes_after"] == r["offload_device_bytes_before"]


def test_offload_really_frees_and_restores_weights_and_states(tmp_path: Path) -> None:
    model = torch.nn.Linear(32, 16)
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.randn(4, 32)).sum().backward()
    optimizer.step()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    states = [s["exp_avg"].clone() for s in optimizer.state.values()]
    offload = RolloutOffload(model, optimizer, torch.device("cpu"), model_too=True, optimizer_too=True, spill_file=tmp_path / "spill.pt")
    out = offload.offload()
    assert out.device_bytes_after < out.device_bytes_before - out.moved_bytes + 64  # only the step counters stay
    assert all(p.numel() == 0 for p in model.parameters())
    back = offload.reload()
    assert back.device_bytes_after == out.device_bytes_before and not (tmp_path / "spill.pt").exists()
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(torch.equal(a, s["exp_avg"]) for a, s in zip(states, optimizer.state.values()))


def test_injected_oom_halves_the_micro_batch_and_redoes_the_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = tiny_spec(tmp_path, max_steps=2, offload_optimizer_in_rollout=False)
    clean = run(spec, tmp_path / "clean")
    seen: list[Counter] = []
    original_compute = OomlessGRPOTrainer.compute_loss
    original_recovery = OomlessGRPOTrainer._train_step_with_recovery
    state = {"raised": False}

    def row(inputs: dict, i: int) -> tuple:
        return (*inputs["prompt_ids"][i].tolist(), *inputs["completion_ids"][i].tolist(), float(inputs["advantages"][i]))

    def failing_compute(self, model, inputs, *args, **kwargs):
        if self.state.global_step == 1 and len(inputs["prompt_ids"]) == 8 and not state["raised"]:
            state["raised"] = True
            raise torch.OutOfMemoryError("injected: CUDA out of memory. Tried to allocate 2.00 GiB")
        seen[-1].update(row(inputs, i) for i in range(len(inputs["prompt_ids"])))
        return original_compute(self, model, inputs, *args, **kwargs)

    def recording_recovery(self, model, inputs):
        seen.append(Counter())
        out = original_recovery(self, model, inputs)
        expected = Counter(row(inputs, i) for i in range(len(inputs["prompt_ids"])))
        assert seen[-1] == expected  # every sample of the step once: none lost, none seen twice
        return out

    monkeypatch.setattr(OomlessGRPOTrainer, "compute_loss", failing_compute)
    monkeypatch.setattr(OomlessGRPOTrainer, "_train_step_with_recovery", recording_recovery)
    outcome = run(spec, tmp_path / "oom")
    assert state["raised"] and len(seen) == 2
    assert [(e["step"], e["micro_batch_size_before"], e["micro_batch_size_after"], e["gradient_accumulation_before"],
             e["gradient_accumulation_after"]) for e in outcome.events] == [(2, 8, 4, 2, 4)]
    step2 = next(r for r in read_records(tmp_path / "oom" / "telemetry.jsonl") if r["step"] == 2 and r["phase"] == "train")
    assert step2["oom_retries"] == 1 and step2["micro_batch_size"] == 4
    # Same samples, same effective batch: the update equals the run without the error.
    a, b = weights(tmp_path / "clean"), weights(tmp_path / "oom")
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    assert clean.events == []




def test_resume_continues_where_the_checkpoint_left_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = tiny_spec(tmp_path, max_steps=4, save_steps=2, offload_optimizer_in_rollout=False)
    run(spec, tmp_path / "whole")
    # An interrupted run: it stops after step 2 (checkpoint-2 saved), then is resumed.
    original_step = OomlessGRPOTrainer.training_step

    def crash_at_step_3(self, model, inputs, num_items_in_batch=None):
        if self.state.global_step == 2:
            raise KeyboardInterrupt("simulated crash")
        return original_step(self, model, inputs, num_items_in_batch)

    monkeypatch.setattr(OomlessGRPOTrainer, "training_step", crash_at_step_3)
    with pytest.raises(KeyboardInterrupt):
        run(spec, tmp_path / "resumed")
    monkeypatch.setattr(OomlessGRPOTrainer, "training_step", original_step)
    assert (tmp_path / "resumed" / "checkpoint-2" / "oomless_state.json").exists()
    outcome = run(spec, tmp_path / "resumed", resume=True)
    assert outcome.exit_code == 0
    records = read_records(tmp_path / "resumed" / "telemetry.jsonl")
    steps = Counter((r["step"], r["phase"]) for r in records)
    assert set(steps.values()) == {1} and {s for s, _ in steps} == {0, 1, 2, 3, 4}
    a, b = weights(tmp_path / "whole"), weights(tmp_path / "resumed")
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)


def test_a_run_that_does_not_fit_is_refused_unless_forced(tmp_path: Path) -> None:
    spec = tiny_spec(tmp_path)
    data = yaml.safe_load(spec.read_text())
    data["hardware"] = {"gpu_capacity_gib": 0.1, "gpus_per_node": 1}  # below the planned CUDA context
    spec.write_text(yaml.safe_dump(data))
    result = CliRunner().invoke(app, ["train", str(spec)])
    assert result.exit_code == 1
    assert "does not fit: load on train gpu: cuda_context" in result.output and "refused" in result.output
    assert not (tmp_path / "run").exists()


def test_qlora_on_cpu_is_one_line_and_exit_2(tmp_path: Path) -> None:
    spec = tiny_spec(tmp_path)
    data = yaml.safe_load(spec.read_text())
    data["finetune"] = {"method": "qlora"}
    spec.write_text(yaml.safe_dump(data))
    result = CliRunner().invoke(app, ["train", str(spec)])
    assert result.exit_code == 2
    assert result.output.strip() == "error: finetune.method: qlora needs bitsandbytes and a CUDA GPU; use lora on this machine"


def test_fit_trains_fits_choice_and_degrades_without_the_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = tiny_spec(tmp_path, max_steps=1)
    result = CliRunner().invoke(app, ["train", str(spec), "--fit", "--output-dir", str(tmp_path / "a")])
    assert result.exit_code == 0, result.output
    assert "fit: " in result.output
    monkeypatch.setitem(__import__("sys").modules, "oomless.fit.search", None)  # as if oomless.fit were absent
    result = CliRunner().invoke(app, ["train", str(spec), "--fit", "--output-dir", str(tmp_path / "b")])
    assert result.exit_code == 0, result.output
    assert "warning: --fit needs oomless.fit, which this installation lacks; training the spec as written" in result.output


def test_a_used_output_folder_is_refused_unless_resume_or_overwrite(tmp_path: Path) -> None:
    spec = tiny_spec(tmp_path, max_steps=1, logging_steps=1)
    out = tmp_path / "used"
    (out / "checkpoint-5").mkdir(parents=True)
    (out / "telemetry.jsonl").write_text('{"step": 0, "phase": "load", "peak_bytes": 1}\n')
    refused = CliRunner().invoke(app, ["train", str(spec), "--output-dir", str(out)])
    assert refused.exit_code == 2
    line = refused.output.strip()
    assert "\n" not in line and str(out) in line and "--resume" in line and "--overwrite" in line
    both = CliRunner().invoke(app, ["train", str(spec), "--output-dir", str(out), "--resume", "--overwrite"])
    assert both.exit_code == 2 and "exclude each other" in both.output
    assert (out / "checkpoint-5").is_dir()  # nothing was removed by a refused run
    result = CliRunner().invoke(app, ["train", str(spec), "--output-dir", str(out), "--overwrite", "--report-to", "tensorboard"])
    assert result.exit_code == 0, result.output
    assert not (out / "checkpoint-5").exists()
    assert {r["step"] for r in read_records(out / "telemetry.jsonl")} == {0, 1}
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (logdir,) = (out / "runs").iterdir()
    events = EventAccumulator(str(logdir))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"train/memory/train_peak_gib", "train/memory/train_planned_gib", "train/memory/train_measured_over_planned"} <= tags
    train_record = next(r for r in read_records(out / "telemetry.jsonl") if r["phase"] == "train")
    logged = events.Scalars("train/memory/train_peak_gib")[-1].value
    assert logged == pytest.approx(train_record["peak_bytes"] / 2**30, rel=1e-4)


def test_ctrl_c_saves_a_checkpoint_and_resume_loses_no_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import signal

    spec = tiny_spec(tmp_path, max_steps=4, save_steps=0, offload_optimizer_in_rollout=False)
    run(spec, tmp_path / "whole")
    original_step = OomlessGRPOTrainer.training_step

    def ctrl_c_during_step_2(self, model, inputs, num_items_in_batch=None):
        if self.state.global_step == 1:
            os.kill(os.getpid(), signal.SIGINT)
        return original_step(self, model, inputs, num_items_in_batch)

    monkeypatch.setattr(OomlessGRPOTrainer, "training_step", ctrl_c_during_step_2)
    out = tmp_path / "stopped"
    before = signal.getsignal(signal.SIGINT)  # SIG_IGN when started in the background by a non-interactive shell
    stopped = CliRunner().invoke(app, ["train", str(spec), "--output-dir", str(out)])
    assert stopped.exit_code == 130, stopped.output
    assert "SIGINT: saving a checkpoint" in stopped.output and "stopped at step 2 of 4" in stopped.output
    assert (out / "checkpoint-2" / "trainer_state.json").is_file() and not (out / "final").exists()
    assert json.loads((out / "summary.json").read_text())["interrupted_at_step"] == 2
    assert signal.getsignal(signal.SIGINT) is before  # the handler is given back
    monkeypatch.setattr(OomlessGRPOTrainer, "training_step", original_step)
    assert CliRunner().invoke(app, ["train", str(spec), "--output-dir", str(out)]).exit_code == 2
    resumed = CliRunner().invoke(app, ["train", str(spec), "--output-dir", str(out), "--resume"])
    assert resumed.exit_code == 0, resumed.output
    steps = Counter((r["step"], r["phase"]) for r in read_records(out / "telemetry.jsonl"))
    assert set(steps.values()) == {1} and {s for s, _ in steps} == {0, 1, 2, 3, 4}
    assert [r["step"] for r in read_jsonl(out / "rewards.jsonl")] == [1, 2, 3, 4]
    a, b = weights(tmp_path / "whole"), weights(out)
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)


def test_the_built_model_is_trained_with_the_character_tokenizer(tmp_path: Path) -> None:
    """The tokenizer TRL gets splits text one character at a time, as `train.tiny` builds it.
    Saved beside the qwen2 config.json, transformers 5.x's AutoTokenizer would load
    Qwen2Tokenizer instead and drop letters ("ab+1" → ["+", "1"])."""
    from oomless.train.session import load_tokenizer
    from oomless.train.tiny import build_model, tokenizer_dir
    from oomless.spec.train_section import BuildModel

    model_dir = build_model(TINY_CONFIG, BuildModel(), tmp_path / "model")
    tokenizer = load_tokenizer(str(tokenizer_dir(model_dir)), None, tmp_path)
    text = "12+3=15"
    assert tokenizer.convert_ids_to_tokens(tokenizer(text)["input_ids"]) == list(text)
    vocab_size = json.loads(TINY_CONFIG.read_text())["vocab_size"]
    assert len(tokenizer) == vocab_size  # Qwen2Tokenizer adds <|endoftext|> at id vocab_size
    assert not (model_dir / "tokenizer.json").exists()
