"""TRL's Liger keys per release (`adapters/trl/liger.py`): which of `logits: fused` and
`liger_kernels` `use_liger_kernel`, `use_liger_loss` and `liger_kernel_config` switch on in the
GRPO and RLOO trainers of TRL 0.16 … 1.16, and the writer's keys for every pair and release
reading back as that pair (or being refused, naming the field)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from oomless.adapters import export_native
from oomless.adapters.trl.liger import liger_fields, liger_settings
from oomless.adapters.trl.reader import Keys, read_legacy
from oomless.adapters.trl import trainers as TT
from oomless.errors import InputError
from oomless.spec.load import parse_spec
from tests.adapters.test_trl import QUICKSTART_TRL, from_files

LAUNCH = ("# oomless: trl=={v}\naccelerate launch --num_processes 4 examples/scripts/{script}.py "
          "--model_name_or_path Qwen/Qwen2.5-1.5B-Instruct --output_dir out --bf16 true{flags}\n")
KERNEL, LOSS = " --use_liger_kernel true", " --use_liger_loss true"

# (release, trainer script, flags) -> (logits is fused, liger_kernels), from the wheels' grpo_trainer.py / rloo_trainer.py
RELEASES = [
    ("0.16", "grpo", KERNEL, False, True),     # no Liger loss yet: Trainer's model kernels only
    ("0.20", "grpo", KERNEL, False, True),     # use_liger_kernel is TrainingArguments' kernels alone
    ("0.20", "grpo", LOSS, True, False),       # use_liger_loss is LigerFusedLinearGRPOLoss alone
    ("0.20", "grpo", KERNEL + LOSS, True, True),
    ("0.26", "grpo", KERNEL, True, True),      # from 0.25 use_liger_kernel switches the loss too
    ("0.26", "grpo", LOSS, True, True),        # and use_liger_loss is copied into it
    ("0.26", "grpo", KERNEL + " --use_liger_loss false", False, False),  # ... winning over it
    ("1.0", "grpo", KERNEL, True, True),
    ("1.14", "grpo", KERNEL, True, True),
    ("1.15", "grpo", KERNEL, False, True),     # 1.15: only the layer kernels; the tiled LM head stays
    ("1.16", "grpo", KERNEL, False, True),
    ("1.0", "rloo", KERNEL, False, True),      # RLOOTrainer has no Liger loss in any release
    ("1.16", "rloo", KERNEL, False, True),
    ("1.16", "grpo", "", False, False),
]


@pytest.mark.parametrize(("version", "script", "flags", "fused", "kernels"), RELEASES,
                         ids=[f"{r[0]}-{r[1]}-{r[2].strip() or 'none'}" for r in RELEASES])
def test_each_release_switches_what_its_trainer_applies(version: str, script: str, flags: str, fused: bool, kernels: bool) -> None:
    spec, _, _ = from_files({"launch.sh": LAUNCH.format(v=version, script=script, flags=flags)})
    assert (spec["logits"] == "fused") is fused
    assert spec.get("liger_kernels", False) is kernels
    if not fused:  # the release's own log-prob path, as without any Liger key
        plain, _, _ = from_files({"launch.sh": LAUNCH.format(v=version, script=script, flags="")})
        assert spec["logits"] == plain["logits"]


def test_use_liger_loss_in_a_release_without_it_is_named() -> None:
    spec, ignored, _ = from_files({"launch.sh": LAUNCH.format(v="0.16", script="grpo", flags=LOSS)})
    assert spec["logits"] != "fused" and not spec.get("liger_kernels", False)
    assert any(line.startswith("use_liger_loss:") for line in ignored)


def test_a_use_liger_loss_that_is_not_a_boolean_is_refused_by_its_own_name() -> None:
    with pytest.raises(InputError) as err:
        from_files({"launch.sh": LAUNCH.format(v="0.20", script="grpo", flags=" --use_liger_loss maybe")})
    assert err.value.field == "use_liger_loss"


YAML = """# oomless: trl=={v}{transformers}
model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct
output_dir: out
bf16: true
use_liger_kernel: {kernel}
liger_kernel_config: {config}
"""


def _yaml(config: str, v: str = "1.16", kernel: str = "true", transformers: str = ""):
    text = YAML.format(v=v, config=config, kernel=kernel, transformers=f" transformers=={transformers}" if transformers else "")
    return from_files({"grpo.yaml": text}, entry="grpo.yaml")


@pytest.mark.parametrize(("config", "kernels", "noted"), [
    ("{rope: false}", True, False),                           # RoPE plans nothing
    ("{cross_entropy: true}", True, False),                   # the loss module: GRPO has none
    ("{rms_norm: false}", False, True),                       # only SwiGLU: the spec's switch is both
    ("{swiglu: false}", False, True),
    ("{rms_norm: false, swiglu: false}", False, False),
    ("{rms_norm: true, swiglu: true, rope: true}", True, False),
])
def test_liger_kernel_config_selects_the_model_kernels(config: str, kernels: bool, noted: bool) -> None:
    spec, _, notes = _yaml(config)
    assert spec.get("liger_kernels", False) is kernels
    assert any("liger_kernel_config" in n for n in notes) is noted


def test_liger_kernel_config_keeps_the_loss_of_releases_that_tie_it_to_use_liger_kernel() -> None:
    spec, _, _ = _yaml("{rms_norm: false, swiglu: false}", v="1.14")
    assert spec["logits"] == "fused" and not spec.get("liger_kernels", False)


def test_fused_linear_cross_entropy_is_refused_where_trl_refuses_it() -> None:
    with pytest.raises(InputError) as err:
        _yaml("{fused_linear_cross_entropy: true}", v="1.16")
    assert err.value.field == "liger_kernel_config.fused_linear_cross_entropy"
    spec, _, _ = _yaml("{fused_linear_cross_entropy: true}", v="1.14")  # 1.14 patches forward; log-probs pass no labels
    assert spec["logits"] == "fused" and spec["liger_kernels"] is True


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"config": "'rms_norm=false'"}, "liger_kernel_config"),
    ({"config": "{rms_norm: maybe}"}, "liger_kernel_config.rms_norm"),
    ({"config": "{rms_norm: false}", "transformers": "4.52"}, "liger_kernel_config"),  # the key is 4.53's
])
def test_a_liger_kernel_config_the_run_would_not_take_is_refused(kwargs: dict, field: str) -> None:
    with pytest.raises(InputError) as err:
        _yaml(**kwargs)
    assert err.value.field == field


def test_a_liger_kernel_config_key_the_plan_does_not_know_is_named() -> None:
    spec, ignored, _ = _yaml("{geglu: false}")
    assert spec["liger_kernels"] is True
    assert any(line.startswith("liger_kernel_config.geglu:") for line in ignored)


def test_liger_kernel_config_without_use_liger_kernel_is_ignored_by_name() -> None:
    spec, ignored, _ = _yaml("{rms_norm: false}", kernel="false")
    assert not spec.get("liger_kernels", False)
    assert any(line.startswith("liger_kernel_config:") for line in ignored)


# --- the writer's keys read back as the pair, release by release ----------------------------------

DIALECTS = [(0, 16), (0, 20), (0, 24), (0, 25), (0, 27), (0, 29), (1, 0), (1, 14), (1, 15), (1, 16)]


def _spec(algorithm: str, fused: bool, kernels: bool):
    return parse_spec({**QUICKSTART_TRL, "algorithm": algorithm, "logits": "fused" if fused else "chunked_head",
                       "liger_kernels": kernels})


@pytest.mark.parametrize("dialect", DIALECTS, ids=[".".join(map(str, d)) for d in DIALECTS])
@pytest.mark.parametrize("algorithm", ["grpo", "rloo"])
def test_written_liger_keys_read_back_as_the_pair_or_are_refused(dialect: tuple[int, ...], algorithm: str) -> None:
    trainer = TT.RLOO if algorithm == "rloo" else TT.GRPO
    written = 0
    for fused, kernels in itertools.product((False, True), repeat=2):
        try:
            settings = liger_settings(_spec(algorithm, fused, kernels), dialect)
        except InputError as err:
            assert err.field == ("logits" if fused and (kernels or trainer == TT.RLOO or dialect < (0, 25) or dialect >= (1, 15))
                                 else "liger_kernels")
            continue
        notes: list[str] = []
        keys = Keys(read_legacy(settings, notes, dialect, trainer), dialect, trainer)
        got = liger_fields(keys, notes)
        assert (got.get("logits") == "fused", got.get("liger_kernels", False)) == (fused, kernels)
        written += 1
    assert written >= 2  # at least no Liger and the model kernels


@pytest.mark.parametrize("dialect", DIALECTS, ids=[".".join(map(str, d)) for d in DIALECTS])
def test_the_pair_is_written_wherever_the_fused_loss_is(dialect: tuple[int, ...]) -> None:
    """fit and doctor propose `logits: fused` with `liger_kernels` (`fit.space`, `doctor.fixes`):
    every TRL release that can write Liger's GRPO loss at all can write that pair."""
    def sayable(kernels: bool) -> bool:
        try:
            liger_settings(_spec("grpo", True, kernels), dialect)
        except InputError:
            return False
        return True

    assert sayable(True) or not sayable(False)
    assert sayable(True) is ((0, 17) <= dialect < (1, 15))


def test_export_writes_use_liger_kernel_for_the_model_kernels_and_refuses_the_fused_loss(tmp_path: Path) -> None:
    written = export_native("trl", parse_spec({**QUICKSTART_TRL, "liger_kernels": True}), tmp_path / "a", force=False)
    assert any("use_liger_kernel: true" in Path(p).read_text() for p in written if Path(p).suffix == ".yaml")
    with pytest.raises(InputError) as err:
        export_native("trl", parse_spec({**QUICKSTART_TRL, "logits": "fused", "liger_kernels": True}), tmp_path / "b", force=False)
    assert err.value.field == "logits" and "1.15" in err.value.message
