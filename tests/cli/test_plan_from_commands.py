"""`--from` on every command that takes a spec, `oomless import`, framework aliases, and the
warnings a framework config gets (not-understood keys listed, no-effect keys counted)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from oomless.errors import EXIT_BAD_INPUT
from tests.cli.conftest import run_oomless
from tests.helpers import EXAMPLES, ROOT

NATIVE = EXAMPLES / "seeds" / "native"
S1 = ["--gpu", "RTX-3090"]
VERL = ROOT / "tests" / "adapters" / "data" / "verl_gsm8k.sh"


def test_import_writes_a_commented_spec_that_plans_like_the_native_file(tmp_path: Path) -> None:
    out = tmp_path / "s1.yaml"
    done = run_oomless("import", "--from", "ms-swift", str(NATIVE / "s1-before.sh"), *S1, "-o", str(out))
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert "model: Qwen/Qwen2-7B-Instruct  # from --model" in text
    assert "gpu: RTX-3090  # from --gpu (command line)" in text
    assert "kl_beta: 0.04  # default of --beta" in text
    native = run_oomless("plan", "--from", "swift", str(NATIVE / "s1-before.sh"), *S1, "--json")
    spec = run_oomless("plan", str(out), "--json")
    assert spec.returncode == native.returncode == 1
    assert json.loads(spec.stdout)["binding"] == json.loads(native.stdout)["binding"]
    again = run_oomless("import", "--from", "swift", str(NATIVE / "s1-before.sh"), *S1, "-o", str(out))
    assert again.returncode == EXIT_BAD_INPUT and "file exists; pass --force" in again.stderr


def test_import_to_stdout_lists_every_key_not_used() -> None:
    done = run_oomless("import", "--from", "verl", str(VERL), "--gpu", "H100-80GB")
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(done.stdout)["batch"]["num_generations"] == 5
    assert "# not used: data.train_files=$HOME/data/gsm8k/train.parquet: no effect on the planned memory" in done.stdout
    assert "# not used: data.train_batch_size" not in done.stdout  # read: the rollout round (adapters/schedule.py)


def test_no_effect_keys_are_counted_in_one_warning() -> None:
    done = run_oomless("plan", "--from", "verl", str(VERL), "--gpu", "H100-80GB")
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning: verl:")]
    assert "warning: verl: actor_rollout_ref.actor.typo_key=3: not a verl 0.9.1 key" in warnings
    counted = [w for w in warnings if "with no effect on memory were skipped" in w]
    assert len(counted) == 1 and not any(w.endswith("no effect on the planned memory") for w in warnings)


def test_compare_export_and_fit_take_a_framework_config(tmp_path: Path) -> None:
    done = run_oomless("compare", "--from", "swift", str(NATIVE / "s1-before.sh"), str(NATIVE / "s1-after.sh"), *S1, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["differences"]["verdict"] == {"before": False, "after": True}
    out = tmp_path / "trl"
    done = run_oomless("export", "--from", "vlmr1", str(NATIVE / "s3-after.sh"), "--gpu", "H20", "--to", "vlm-r1",
                       "--out-dir", str(out))
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.split()) >= 2 and all(Path(p).is_file() for p in done.stdout.split())
    done = run_oomless("fit", "--from", "open-reasoner-zero", str(NATIVE / "s4-after.py"), "--gpu", "A100-80GB", "--json", "--top", "1")
    assert done.returncode in (0, 1), done.stderr
    assert "best" in json.loads(done.stdout)


def test_unknown_framework_names_the_allowed_ones() -> None:
    done = run_oomless("plan", "--from", "deepspeed-chat", str(VERL), "--gpu", "H100-80GB")
    assert done.returncode == EXIT_BAD_INPUT
    assert done.stderr.strip() == ("error: --from: unknown framework 'deepspeed-chat'; allowed: swift, trl, verl, easyr1, "
                                   "openrlhf, orz, vlmr1, ms-swift, ms_swift, open-reasoner-zero, open_reasoner_zero, "
                                   "vlm-r1, vlm_r1")
