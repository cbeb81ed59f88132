"""Liger through the write-back path: every logits/Liger option `fit` searches
(`fit.space.logits_kernels`) and the doctor's fused-loss fix, patched into a TRL, ms-swift and
verl file by the framework's writer (`adapters.patch.plan_patch`, what `fit --from` and
`doctor --from` write), read back to the same `logits` and `liger_kernels` and the same planned
peaks; or refused by the writer, naming the field (then `fit --from` does not search it:
`fit.expressible`). The corpus-wide check is scripts/writeback_scan.py (minutes; not a test)."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomless.adapters import HardwareFlags
from oomless.adapters.patch import plan_patch
from oomless.cli.import_cmd import load_native
from oomless.doctor.fix_check import _candidates, _validated
from oomless.doctor.fixes import FUSED_LOGITS, realise
from oomless.fit.overrides import apply
from oomless.fit.space import logits_kernels
from oomless.planner.plan import make_plan
from oomless.spec.run import LogitsMode

ROOT = Path(__file__).resolve().parents[2]
TRL = """# oomless: trl=={release} max_prompt_tokens=1024
model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct
per_device_train_batch_size: 8
max_completion_length: 2048
bf16: true
use_vllm: true
vllm_mode: colocate
vllm_gpu_memory_utilization: 0.3
accelerate_config: zero3
{extra}"""
SWIFT = ROOT / "examples" / "seeds" / "native" / "s0-before.sh"
VERL = ROOT / "tests" / "adapters" / "data" / "verl_gsm8k.sh"

# (id, framework, file name, text, GPU, whether Liger's fused loss can be written there)
FILES = [
    ("trl-1.0", "trl", "grpo.yaml", TRL.format(release="1.0", extra=""), "H100", True),
    ("trl-1.0-liger", "trl", "grpo.yaml", TRL.format(release="1.0", extra="use_liger_kernel: true\n"), "H100", True),
    ("trl-0.20", "trl", "grpo.yaml", TRL.format(release="0.20", extra=""), "H100", True),
    ("trl-1.16", "trl", "grpo.yaml", TRL.format(release="1.16", extra=""), "H100", False),
    ("trl-1.16-liger", "trl", "grpo.yaml", TRL.format(release="1.16", extra="use_liger_kernel: true\n"), "H100", False),
    ("swift", "swift", "run.sh", SWIFT.read_text(), "H20", True),
    ("swift-liger", "swift", "run.sh", SWIFT.read_text().replace(
        "    --use_vllm true \\\n", "    --use_vllm true \\\n    --use_liger_kernel true \\\n"), "H20", True),
    ("swift-3.4", "swift", "run.sh", SWIFT.read_text().replace("ms-swift==3.5", "ms-swift==3.4"), "H20", False),
    # verl's use_fused_kernels is its own head in 512-token chunks (fused_token_chunks), not Liger's loss
    ("verl", "verl", "run.sh", VERL.read_text(), "H100-80GB", False),
]


def _load(framework: str, path: Path, gpu: str):
    run, _ = load_native(path, framework, HardwareFlags(gpu=gpu, gpus_per_node=8 if framework == "trl" else None))
    return run


def _peaks(run, spec) -> list[int]:
    return [d.peak_bytes for d in make_plan(spec, run.arch, run.gpu, run.archs).devices]


def _written_back(tmp_path: Path, framework: str, name: str, text: str, run, new_spec):
    """The patched file read back, or the fields the writer cannot say."""
    patch = plan_patch(framework, tmp_path / name, text, run.spec, new_spec)
    if patch.unexpressed:
        return None, {field for field, _ in patch.unexpressed}
    out = tmp_path / "back"
    out.mkdir(exist_ok=True)
    (out / name).write_text(patch.patched)
    return _load(framework, out / name, str(run.spec.hardware.gpu)), set()


@pytest.mark.parametrize(("case", "framework", "name", "text", "gpu", "fused_sayable"), FILES, ids=[f[0] for f in FILES])
def test_every_logits_option_fit_searches_reads_back_as_planned(tmp_path: Path, case: str, framework: str, name: str,
                                                                text: str, gpu: str, fused_sayable: bool) -> None:
    (tmp_path / name).write_text(text)
    run = _load(framework, tmp_path / name, gpu)
    said = []
    for option in logits_kernels(run.spec):
        proposed = apply(run.spec, option)
        back, refused = _written_back(tmp_path, framework, name, text, run, proposed)
        if back is None:
            assert refused <= {"logits", "liger_kernels"}, refused
            continue
        assert back.spec.liger_kernels == proposed.liger_kernels, option
        if LogitsMode.fused not in (proposed.logits, back.spec.logits) and back.spec.logits != proposed.logits \
                and proposed.logits != LogitsMode.fused_token_chunks:
            continue  # a mode with no key, left to the release (ms-swift has no chunked key): not Liger's pair
        assert back.spec.logits == proposed.logits, option
        assert _peaks(back, back.spec) == _peaks(run, proposed), option
        said.append(proposed.logits)
    assert (LogitsMode.fused in said) is fused_sayable
    assert run.spec.logits in said  # the input itself is always sayable
    if framework == "verl":
        assert LogitsMode.fused_token_chunks in said


@pytest.mark.parametrize(("case", "framework", "name", "text", "gpu", "fused_sayable"),
                         [f for f in FILES if f[5]], ids=[f[0] for f in FILES if f[5]])
def test_the_doctors_fused_loss_fix_reads_back_as_it_was_planned(tmp_path: Path, case: str, framework: str, name: str,
                                                                 text: str, gpu: str, fused_sayable: bool) -> None:
    (tmp_path / name).write_text(text)
    run = _load(framework, tmp_path / name, gpu)
    fix = realise(FUSED_LOGITS, run.spec)
    if run.spec.logits == LogitsMode.fused:
        assert fix is None  # the run has it already
        return
    assert fix is not None
    (overrides,) = _candidates(fix, run.spec)
    proposed = _validated(run.spec, overrides)  # as check_fixes plans it
    assert proposed.logits == LogitsMode.fused and proposed.liger_kernels
    back, refused = _written_back(tmp_path, framework, name, text, run, proposed)
    assert back is not None, refused
    assert _peaks(back, back.spec) == _peaks(run, proposed)
