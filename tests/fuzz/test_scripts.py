"""Mutated framework configs (issue 15): every adapter, given a damaged copy of a real config
(lines deleted, duplicated, swapped, cut, numbers made absurd, junk inserted: deep arithmetic,
huge literals, code that must never run), ends in a plan or a one-line `InputError` — and no
line of any config is ever executed.

The configs are the shipped native examples, the adapters' golden files and the corpus of the
frameworks' own example scripts under tests/real_configs/ (every manifest entry).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from oomless.adapters import HardwareFlags
from oomless.cli.plan_cmd import load_any
from oomless.errors import InputError
from oomless.planner.plan import make_plan
from tests.fuzz.strategies import fuzz_settings, mutated_text
from tests.helpers import EXAMPLES, ROOT

SENTINEL = Path("/tmp/oomless-fuzz-was-executed")
"""A junk line runs `touch` on this path: it must never appear."""

NATIVE = EXAMPLES / "seeds" / "native"
GOLDEN = ROOT / "tests" / "adapters" / "golden"
FIXED: list[tuple[str, Path]] = [
    ("swift", NATIVE / "s0-before.sh"), ("swift", NATIVE / "s1-after.sh"), ("easyr1", NATIVE / "s2-before.yaml"),
    ("vlmr1", NATIVE / "s3-before.sh"), ("orz", NATIVE / "s4-before.py"),
    ("swift", GOLDEN / "swift" / "quickstart" / "run_grpo.sh"), ("verl", GOLDEN / "verl" / "verl_ppo.yaml"),
    ("openrlhf", GOLDEN / "openrlhf" / "train_ppo_ray.sh"), ("orz", GOLDEN / "orz" / "orz_ppo_exp.py"),
    ("vlmr1", GOLDEN / "vlmr1" / "run_vlmr1.sh"), ("easyr1", GOLDEN / "easyr1" / "easyr1_config.yaml"),
    ("verl", ROOT / "tests" / "adapters" / "data" / "verl_gsm8k.sh"),
]


def corpus_configs() -> list[tuple[str, Path]]:
    """(framework, file) of every real-config manifest entry, when the corpus is present."""
    out = []
    for manifest in sorted((ROOT / "tests" / "real_configs").glob("*/manifest*.yaml")):
        for entry in yaml.safe_load(manifest.read_text(encoding="utf-8")) or []:
            out.append((manifest.parent.name, manifest.parent / entry["file"]))
    return out


CONFIGS = FIXED + corpus_configs()


def plan_config(framework: str, path: Path) -> None:
    """Plan ``path`` as `oomless plan --from` does; an InputError must be one line."""
    try:
        run = load_any(path, framework, HardwareFlags(gpu="H100"))
        make_plan(run.spec, run.arch, run.gpu, run.archs)
    except InputError as err:
        assert "\n" not in str(err) and str(err).strip(), repr(err)


@pytest.mark.parametrize("framework, path", FIXED, ids=[str(p.relative_to(ROOT)) for _, p in FIXED])
def test_the_unmutated_configs_plan(framework: str, path: Path) -> None:
    run = load_any(path, framework, HardwareFlags(gpu="H100"))
    make_plan(run.spec, run.arch, run.gpu, run.archs)


@fuzz_settings(ci_examples=60)
@given(st.sampled_from(CONFIGS), st.data())
def test_a_mutated_config_plans_or_is_refused_in_one_line(tmp_path_factory, config: tuple[str, Path], data) -> None:
    framework, original = config
    folder = tmp_path_factory.mktemp("mutated")
    for sibling in original.parent.iterdir():
        if sibling.is_file():
            shutil.copy(sibling, folder / sibling.name)
    text = data.draw(mutated_text(original.read_text(encoding="utf-8")))
    target = folder / original.name
    target.write_text(text, encoding="utf-8")
    plan_config(framework, target)
    assert not SENTINEL.exists(), f"a line of {original.name} was executed"
