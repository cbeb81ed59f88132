"""Mutated framework configs (issue 15): every adapter, given a damaged copy of a real config
(lines deleted, duplicated, swapped, cut, numbers made absurd, junk inserted: deep arithmetic,
huge literals, code that must never run), ends in a plan or a one-line `InputError` — and no
line of any config is ever executed.

The configs are the shipped native examples, the adapters' golden files and the corpus of the
frameworks' own example scripts under tests/real_configs/ (every manifest entry, planned from a
copy of its version folder with the hardware its entry publishes); the file mutated is the
config or one of the accelerate/DeepSpeed files it names. Mutations (`strategies.mutated_text`):
lines deleted, duplicated, swapped or cut; numbers and flag/key values replaced by extreme ones
(0, -1, 1e400, nan, int64 + 1, the wrong type, 300 characters); unterminated quotes and
substitutions; nesting 50 to 3,000 deep (brackets, YAML, JSON); junk lines.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

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


CORPUS = ROOT / "tests" / "real_configs"


@dataclass(frozen=True)
class Config:
    framework: str
    root: Path
    """Folder the config is planned from (a corpus entry's repository root at its version)."""
    file: Path
    """The config, relative to ``root``."""
    hardware: HardwareFlags
    companions: tuple[Path, ...] = ()
    """Files the config names (accelerate/DeepSpeed configs), relative to ``root``."""


def fixed_configs() -> list[Config]:
    return [Config(fw, path.parent, Path(path.name), HardwareFlags(gpu="H100")) for fw, path in FIXED]


def corpus_configs() -> list[Config]:
    """Every entry of the real-config corpus (tests/real_configs/manifest.yaml), with the
    hardware its manifest entry publishes (H100 otherwise, as scripts/real_configs_table.py)."""
    manifest = CORPUS / "manifest.yaml"
    if not manifest.is_file():
        return []
    out = []
    for e in yaml.safe_load(manifest.read_text(encoding="utf-8"))["entries"]:
        hw = e.get("hardware") or {}
        flags = HardwareFlags(gpu=hw.get("gpu", "H100"), gpus_per_node=hw.get("gpus_per_node"), num_nodes=hw.get("nodes"))
        out.append(Config(e["framework"], CORPUS / e["root"], Path(e["file"]).relative_to(e["root"]), flags,
                          tuple(Path(c) for c in e.get("companions", []))))
    return out


CONFIGS = fixed_configs() + corpus_configs()


def plan_config(framework: str, path: Path, hardware: HardwareFlags | None = None) -> None:
    """Plan ``path`` as `oomless plan --from` does; an InputError must be one line."""
    try:
        run = load_any(path, framework, hardware or HardwareFlags(gpu="H100"))
        make_plan(run.spec, run.arch, run.gpu, run.archs)
    except InputError as err:
        assert "\n" not in str(err) and str(err).strip(), repr(err)


@functools.cache
def original_text(root: Path, file: Path) -> str:
    """A config's text as first read: other work editing the tree mid-run must not change what
    hypothesis replays (it reports that as a flaky strategy)."""
    return (root / file).read_text(encoding="utf-8")


@contextlib.contextmanager
def working_directory(folder: Path) -> Iterator[None]:
    """``cd folder`` for the block (contextlib.chdir needs Python 3.11; the project takes 3.10)."""
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def copy_of_root(config: Config, folder: Path) -> None:
    """The config's root as the planner sees it: the config's folder, its companions, and for a
    corpus entry the whole version folder (a few dozen small files)."""
    if config.root.is_relative_to(CORPUS):
        shutil.copytree(config.root, folder, dirs_exist_ok=True)
        return
    for sibling in (config.root / config.file).parent.iterdir():
        if sibling.is_file():
            shutil.copy(sibling, folder / config.file.parent / sibling.name)


@pytest.mark.parametrize("framework, path", FIXED, ids=[str(p.relative_to(ROOT)) for _, p in FIXED])
def test_the_unmutated_configs_plan(framework: str, path: Path) -> None:
    run = load_any(path, framework, HardwareFlags(gpu="H100"))
    make_plan(run.spec, run.arch, run.gpu, run.archs)


def test_every_adapter_and_format_is_fuzzed() -> None:
    """The seven adapters, and shell scripts, YAML (Hydra and plain), ORZ Python and DeepSpeed
    JSON, are all among the configs mutated."""
    assert {c.framework for c in CONFIGS} >= {"swift", "trl", "verl", "easyr1", "openrlhf", "orz", "vlmr1"}
    suffixes = {p.suffix for c in CONFIGS for p in (c.file, *c.companions)}
    assert suffixes >= {".sh", ".yaml", ".py", ".json"}, suffixes


@fuzz_settings(ci_examples=60)
@given(st.sampled_from(CONFIGS), st.data())
def test_a_mutated_config_plans_or_is_refused_in_one_line(tmp_path_factory, config: Config, data) -> None:
    folder = tmp_path_factory.mktemp("mutated")
    (folder / config.file.parent).mkdir(parents=True, exist_ok=True)
    copy_of_root(config, folder)
    candidates = [config.file, *(c for c in config.companions if (folder / c).is_file())]
    chosen = data.draw(st.sampled_from(candidates))
    target = folder / chosen
    target.write_text(data.draw(mutated_text(original_text(config.root, chosen))), encoding="utf-8")
    with working_directory(folder):
        plan_config(config.framework, folder / config.file, config.hardware)
    assert not SENTINEL.exists(), f"a line of {target.name} was executed"
