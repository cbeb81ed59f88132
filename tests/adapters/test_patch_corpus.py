"""`fit --from FW FILE --write DIR` on published configs that do not fit a smaller GPU: the
patched copy is read back by the framework's reader (`oomless plan --from`) as fitting with
fit's margin, and TRL's own argument parser accepts the patched TRL file."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from oomless.adapters import HardwareFlags
from oomless.cli.import_cmd import load_native
from oomless.cli.main import app
from oomless.fit.probe import slack_vector
from oomless.fit.search import FitOptions
from oomless.planner.plan import make_plan

CORPUS = Path(__file__).resolve().parents[1] / "real_configs"
CASES = [
    ("swift", "swift/HEAD/examples/train/grpo/internal/chord.sh", ["--gpu", "A100-40GB", "--gpus-per-node", "8"]),
    ("trl", "open-r1/HEAD/recipes/Qwen2.5-1.5B-Instruct/grpo/config_demo.yaml", ["--gpu", "RTX-4090"]),
    ("verl", "verl/HEAD/examples/grpo_trainer/run_qwen2-7b.sh", ["--gpu", "A100-40GB"]),
    ("easyr1", "easyr1/HEAD/examples/config.yaml", ["--gpu", "RTX-4090"]),
    ("openrlhf", "openrlhf/HEAD/examples/scripts/train_ppo_with_reward_fn.sh", ["--gpu", "A100-40GB"]),
    ("orz", "orz/HEAD/playground/orz_0p5b_ppo.py", ["--gpu", "RTX-4090"]),
    ("vlmr1", "vlmr1/HEAD/run_scripts/run_grpo_rec_internvl.sh", ["--gpu", "A100-80GB"]),
]
"""One published config per framework that does not fit the GPU named. With --from, fit searches
only what the framework's files can say: VLM-R1's answer keeps HF generation (its launch has no
vLLM engine) and one rollout per micro-step."""


def _flags(args: list[str]) -> HardwareFlags:
    gpus = int(args[args.index("--gpus-per-node") + 1]) if "--gpus-per-node" in args else None
    return HardwareFlags(gpu=args[1], gpus_per_node=gpus)


@pytest.mark.parametrize(("framework", "rel", "hardware"), CASES, ids=[c[0] for c in CASES])
def test_patched_copy_reads_back_as_fitting(tmp_path: Path, framework: str, rel: str, hardware: list[str]) -> None:
    source = CORPUS / rel
    run, _ = load_native(source, framework, _flags(hardware))
    assert not make_plan(run.spec, run.arch, run.gpu, run.archs).fits, "the case must not fit as published"
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["fit", "--from", framework, str(source), *hardware, "--write", str(out), "--top", "0"])
    assert result.exit_code == 0, result.output
    patched = out / source.name
    assert patched.is_file() and source.read_text() != patched.read_text()
    assert f"+++ {patched}" in result.stdout and "reads it back: fits" in result.stdout
    back, _ = load_native(patched, framework, _flags(hardware))
    plan = make_plan(back.spec, back.arch, back.gpu, back.archs)
    assert min(slack_vector(plan, FitOptions().margin)) >= 0
    if framework == "trl":
        _trl_parser_accepts(patched)


def _trl_parser_accepts(path: Path) -> None:
    """TRL's own parser (HfArgumentParser over GRPOConfig and ModelConfig, as `trl grpo` builds
    it) reads the patched YAML; keys of open-r1's own script arguments are extra keys there."""
    trl = pytest.importorskip("trl")
    from transformers import HfArgumentParser

    import yaml

    data = yaml.safe_load(path.read_text())
    parser = HfArgumentParser((trl.GRPOConfig, trl.ModelConfig))
    config, model = parser.parse_dict({**data, "use_cpu": True}, allow_extra_keys=True)  # CPU: bf16 checks pass
    for key, value in data.items():
        for parsed in (config, model):
            if hasattr(parsed, key) and isinstance(value, (int, float, bool)) and not isinstance(getattr(parsed, key), str):
                assert getattr(parsed, key) == value, key


def test_in_place_keeps_a_backup_and_refuses_overwrites(tmp_path: Path) -> None:
    source = CORPUS / CASES[1][1]
    mine = tmp_path / "config.yaml"
    mine.write_text(source.read_text())
    runner = CliRunner()
    done = runner.invoke(app, ["fit", "--from", "trl", str(mine), "--gpu", "RTX-4090", "--in-place", "--top", "0"])
    assert done.exit_code == 0, done.output
    assert (tmp_path / "config.yaml.bak").read_text() == source.read_text() and mine.read_text() != source.read_text()
    again = runner.invoke(app, ["fit", "--from", "trl", str(mine), "--gpu", "RTX-4090", "--in-place"])
    assert again.exit_code == 2 and "already exists; pass --overwrite" in again.stderr
    out = tmp_path / "out"
    out.mkdir()
    (out / "config.yaml").write_text("x: 1\n")
    refused = runner.invoke(app, ["fit", "--from", "trl", str(mine), "--gpu", "RTX-4090", "--write", str(out)])
    assert refused.exit_code == 2 and refused.stderr.count("\n") == 1 and "--overwrite" in refused.stderr
