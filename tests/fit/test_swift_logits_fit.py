"""`fit --from swift` keeps to the logits modes ms-swift can write (`adapters/swift/liger.py`): the
writer's check (`adapters.patch.sayable`, `fit.expressible`) rejects `chunked`, so the work
factor searched on an ms-swift script holds no chunked option, while full_bf16 stays and, from
ms-swift 3.5, Liger's fused pair."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from oomless.cli.fit_native import native_limits
from oomless.cli.import_cmd import hardware_flags, load_native
from oomless.fit.expressible import sayable_factors
from oomless.fit.layouts import batch_splits
from oomless.fit.search import FitOptions, fit
from oomless.fit.space import work_factor
from oomless.spec.enums import LogitsMode

SCRIPT = """# oomless: ms-swift=={release} vllm==0.8.5
CUDA_VISIBLE_DEVICES=0,1,2,3 NPROC_PER_NODE=4 swift rlhf --rlhf_type grpo --model Qwen/Qwen2.5-7B-Instruct \\
    --train_type full --torch_dtype bfloat16 --dataset AI-MO/NuminaMath-TIR --reward_funcs accuracy \\
    --deepspeed zero3 --per_device_train_batch_size 8 --gradient_accumulation_steps 1 --num_generations 8 \\
    --max_length 1024 --max_completion_length 8192 --use_vllm true --vllm_mode colocate --output_dir out
"""


def _load(tmp_path: Path, release: str):
    path = tmp_path / "run.sh"
    path.write_text(SCRIPT.format(release=release))
    run, raw = load_native(path, "swift", hardware_flags("A100-80GB", None, None, None))
    return path, run, raw


def _modes(options) -> set[tuple[str, bool]]:
    return {(o.overrides["logits"].value, o.overrides["liger_kernels"]) for o in options}


@pytest.mark.parametrize(("release", "kept"), [
    ("3.4", {("full_bf16", False)}),
    ("3.5", {("full_bf16", False), ("fused", True)}),
])
def test_the_writer_check_drops_chunked_from_the_work_factor(tmp_path: Path, release: str, kept: set) -> None:
    path, run, _ = _load(tmp_path, release)
    check = native_limits("swift", path, run)["expressible"]
    assert check is not None and check(run.spec)
    assert not check(run.spec.model_copy(update={"logits": LogitsMode.chunked}))
    work = work_factor(run.spec, batch_splits(run.spec, 4, 4), 1024 + 8192)
    assert ("chunked", False) in _modes(work.options)  # offered before the check
    (sayable,) = sayable_factors(run.spec, (work,), check)
    assert _modes(sayable.options) == kept


def test_a_fit_from_an_ms_swift_script_proposes_no_chunked_logits(tmp_path: Path) -> None:
    path, run, raw = _load(tmp_path, "3.4")
    options = dataclasses.replace(FitOptions(top_k=5), **native_limits("swift", path, run))
    result = fit(run, raw, path.parent, options)
    assert result.best is not None
    answers = [result.best, *result.alternatives]
    assert all(c.run.spec.logits != LogitsMode.chunked for c in answers)
