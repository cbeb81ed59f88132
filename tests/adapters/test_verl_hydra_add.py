"""`fit --from verl --write` adds a key verl's config lacks as `+key=value` and sets one it has as
`key=value`: verl's main_ppo composes with Hydra in struct mode, where a plain override of an
absent key and a `+` on a key holding a value both fail. EasyR1 (`OmegaConf.from_cli`, no
prefixes) keeps plain `key=value`.

The overrides a patched script passes are applied with OmegaConf in struct mode by the rule of
hydra-core 1.3.2 `_internal/config_loader_impl.py` `_apply_overrides_to_config` (hydra-core is
not a dependency), over verl's defaults (keys.DEFAULTS) and the script's `--config-name` YAML."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest
import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError

from oomless.adapters import HardwareFlags
from oomless.adapters import common as C
from oomless.adapters.patch import plan_patch, read_back
from oomless.adapters.patch.shell_text import patch_shell
from oomless.adapters.verl.keys import DEFAULTS
from oomless.adapters.verl.writer import render_files
from oomless.cli.import_cmd import load_native
from oomless.frontends.hydra import parse_override
from tests.adapters.test_patch_keys import CORPUS, _changed
from tests.helpers import merged

VERL_EXAMPLE = CORPUS / "verl/HEAD/examples/grpo_trainer/run_qwen2-7b.sh"
EASYR1 = CORPUS / "easyr1/HEAD/examples"
HARDWARE = HardwareFlags(gpu="A100-80GB")
FUSED = "actor_rollout_ref.actor.optim.override_optimizer_config.fused"
ATTENTION = "actor_rollout_ref.model.override_config.attn_implementation"
GPU_MEMORY = "actor_rollout_ref.rollout.gpu_memory_utilization"
CHANGES = {"optimizer_implementation": "fused", "attention": "eager", "rollout.gpu_memory_utilization": 0.4}


class Refused(Exception):
    """Hydra would stop the run on this override."""


def hydra_apply(base: dict, overrides: list[str]) -> DictConfig:
    """``overrides`` applied to ``base`` as Hydra 1.3.2 applies command-line overrides."""
    cfg = OmegaConf.create(base)
    OmegaConf.set_struct(cfg, True)
    for token in overrides:
        prefix, key, value = parse_override(token)
        if prefix == "+":
            if OmegaConf.select(cfg, key, throw_on_missing=False) is not None and not isinstance(value, (dict, list)):
                raise Refused(f"Could not append to config. An item is already at '{key}'")
            OmegaConf.update(cfg, key, value, merge=True, force_add=True)
        elif prefix == "++":
            OmegaConf.update(cfg, key, value, merge=True, force_add=True)
        elif prefix == "":
            try:
                OmegaConf.update(cfg, key, value, merge=True)
            except (ConfigAttributeError, ConfigKeyError) as err:
                raise Refused(f"Could not override '{key}'") from err
    return cfg


def main_ppo_overrides(text: str) -> list[str]:
    """The `key=value` words of the script's main_ppo command (one command; `"$@"` skipped)."""
    line = next(line for line in text.replace("\\\n", " ").splitlines() if "verl.trainer.main_ppo" in line)
    words = shlex.split(line)
    return [w for w in words[words.index("verl.trainer.main_ppo") + 1:] if "=" in w and not w.startswith(("-", "$"))]


def _patched(path: Path) -> tuple[str, str]:
    run, _ = load_native(path, "verl", HARDWARE)
    wanted = _changed(run.spec, CHANGES)
    patch = plan_patch("verl", path, path.read_text(), run.spec, wanted)
    assert read_back(patch, HARDWARE, wanted, run.arch) == ()
    return patch.text, patch.patched


def test_the_oracle_refuses_what_hydra_refuses() -> None:
    base = merged({}, **DEFAULTS)
    for refused in ([f"{FUSED}=true"], [f"{ATTENTION}=eager"], [f"+{GPU_MEMORY}=0.4"]):
        with pytest.raises(Refused):
            hydra_apply(base, refused)
    cfg = hydra_apply(base, [f"+{FUSED}=true", f"{GPU_MEMORY}=0.4", "+actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2"])
    assert OmegaConf.select(cfg, FUSED) is True and OmegaConf.select(cfg, GPU_MEMORY) == 0.4


def test_keys_new_to_verl_are_added_with_a_plus(tmp_path: Path) -> None:
    path = tmp_path / VERL_EXAMPLE.name
    shutil.copy(VERL_EXAMPLE, path)
    before, after = _patched(path)
    words = main_ppo_overrides(after)
    assert f"+{FUSED}=true" in words and f"+{ATTENTION}=eager" in words
    assert f"{GPU_MEMORY}=0.4" in words and f"{GPU_MEMORY}=0.6" in main_ppo_overrides(before)  # edited in place, plain
    cfg = hydra_apply(merged({}, **DEFAULTS), words)
    assert OmegaConf.select(cfg, FUSED) is True and OmegaConf.select(cfg, ATTENTION) == "eager"


def test_a_key_the_config_name_yaml_sets_stays_plain(tmp_path: Path) -> None:
    """`oomless export --to verl`'s pair: its YAML states attn_implementation (a `+` would be
    refused), not override_optimizer_config (a plain override would be)."""
    run, _ = load_native(VERL_EXAMPLE, "verl", HARDWARE)
    with C.collect_unexpressed():
        files = render_files(run.spec)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    _, after = _patched(tmp_path / "run_verl.sh")
    words = main_ppo_overrides(after)
    assert f"{ATTENTION}=eager" in words and f"+{FUSED}=true" in words and f"{GPU_MEMORY}=0.4" in words
    own = yaml.safe_load(files["verl_ppo.yaml"])
    base = OmegaConf.to_container(OmegaConf.merge(merged({}, **DEFAULTS), {k: v for k, v in own.items() if k not in ("hydra", "defaults")}))
    cfg = hydra_apply(base, words)
    assert OmegaConf.select(cfg, ATTENTION) == "eager"


def test_a_key_the_script_sets_keeps_its_own_prefix() -> None:
    text = f"python3 -m verl.trainer.main_ppo +{FUSED}=False {GPU_MEMORY}=0.6\n"
    out = patch_shell(text, {FUSED: True, GPU_MEMORY: 0.4, ATTENTION: "sdpa"}, "hydra", "run.sh", [FUSED, GPU_MEMORY],
                      added_prefix=lambda key: "+")
    assert out == f"python3 -m verl.trainer.main_ppo +{FUSED}=True {GPU_MEMORY}=0.4 +{ATTENTION}=sdpa\n"


def test_easyr1_appends_plain_overrides(tmp_path: Path) -> None:
    shutil.copy(EASYR1 / "config.yaml", tmp_path / "config.yaml")
    path = tmp_path / "run.sh"
    path.write_text((EASYR1 / "qwen2_5_7b_math_grpo.sh").read_text().replace("examples/config.yaml", "config.yaml"))
    run, _ = load_native(path, "easyr1", HARDWARE)
    wanted = _changed(run.spec, {"rollout.gpu_memory_utilization": 0.4})
    patch = plan_patch("easyr1", path, path.read_text(), run.spec, wanted)
    assert patch.patched.rstrip().endswith(" \\\n    worker.rollout.gpu_memory_utilization=0.4")
    assert "+worker." not in patch.patched
    assert read_back(patch, HARDWARE, wanted, run.arch) == ()
