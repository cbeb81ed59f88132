"""The generated key tables (scripts/native_flag_tables.py): how they are read and worded, that
the hand-written key sets name real keys, that the defaults the TRL and ms-swift readers apply
are the frameworks' own, and that exported files use only keys of their target release."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from oomless.adapters import HardwareFlags, common
from oomless.adapters import key_tables as KT
from oomless.adapters.openrlhf.reader import CLASSIC, DOTTED, MARKERS
from oomless.adapters.swift import keys as SF
from oomless.adapters.swift.reader import import_text
from oomless.adapters.trl import keys as TK
from oomless.adapters.trl.reader import import_path
from oomless.adapters.verl.keys import VERSION as VERL_VERSION
from tests.adapters.native_helpers import GOLDEN

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from key_tables.dataclass_fields import classes_in, fields_of  # noqa: E402  (scripts/ is not a package)
from key_tables.ranges import merge  # noqa: E402

TRL, TRANSFORMERS, SWIFT = KT.load("trl"), KT.transformers_table(), KT.load("swift")
VERL, OPENRLHF = KT.load("verl"), KT.load("openrlhf")
MODEL = "Qwen/Qwen2.5-0.5B-Instruct"


# --- the generator ---------------------------------------------------------------------------

SOURCE = '''
from dataclasses import dataclass, field
from typing import ClassVar
class Base(TrainingArguments):
    lr: float = 1e-5
    steps: int = field(default=int(1e3))
class Mixin:
    lr: float = 2e-5
    names: list = field(default_factory=lambda: ["a", "b"])
class Config(Mixin, Base):
    kind: ClassVar[str] = "x"
    path: str
    when: object = field(default_factory=make_default)
'''


def test_dataclass_fields_follow_the_mro_and_keep_what_is_not_literal() -> None:
    fields, external = fields_of(classes_in({"c.py": SOURCE}), "Config")
    assert external == {"TrainingArguments"}
    assert fields["lr"]["default"] == 2e-5  # Mixin comes before Base in Config's MRO
    assert fields["steps"]["default"] == 1000 and fields["names"]["default"] == ["a", "b"]
    assert "default" not in fields["path"] and fields["when"] == {"type": "object", "default_expr": "make_default()"}
    assert "kind" not in fields


def test_merge_gives_first_last_absent_and_changes() -> None:
    versions, keys = merge({"1.0": {"a": {"default": 1}}, "1.1": {"b": {"default": 0}},
                            "1.2": {"a": {"default": 2}, "b": {"default": 0}}})
    assert versions == ["1.0", "1.1", "1.2"]
    assert keys["a"] == {"first": "1.0", "last": "1.2", "default": 2, "absent": ["1.1"],
                         "changes": [["1.0", 1], ["1.2", 2]]}
    assert keys["b"] == {"first": "1.1", "last": "1.2", "default": 0}


# --- reading and wording ---------------------------------------------------------------------

TOY = KT.KeyTable("TRL", ("0.14.0", "0.20.0", "0.27.2", "1.0.0", "1.16.0"), {
    "old": {"first": "0.14.0", "last": "0.27.2"}, "new": {"first": "1.0.0", "last": "1.16.0"},
    "mid": {"first": "0.20.0", "last": "0.27.2"}, "all": {"first": "0.14.0", "last": "1.16.0", "absent": ["0.20.0"]}})


def test_range_wording_comes_from_the_releases_read() -> None:
    assert [TOY.range_text(k) for k in ("old", "new", "mid")] == ["TRL ≤ 0.27", "TRL ≥ 1.0", "TRL 0.20–0.27"]
    assert TOY.range_text("all") == "TRL 0.14–1.16" == f"TRL {TOY.span_text}"


def test_existence_by_minor_version() -> None:
    assert TOY.exists_in("old", (0, 27)) and TOY.exists_in("old", (0, 10)) and not TOY.exists_in("old", (0, 28))
    assert TOY.exists_in("new", (1, 20)) and not TOY.exists_in("new", (0, 29))
    assert not TOY.exists_in("mid", (0, 19)) and not TOY.exists_in("all", (0, 20)) and TOY.exists_in("all", (0, 21))
    assert not TOY.exists_in("missing", (1, 0))


def test_notes_and_warnings_name_the_releases() -> None:
    current = ((TOY, (1, 16)),)
    assert KT.other_release_note("old", current, "TRL 1.16") == "`old`: TRL ≤ 0.27; read with its meaning there (not a TRL 1.16 key)"
    assert KT.other_release_note("new", current, "TRL 1.16") is None
    assert KT.unread_key_why((TOY,), "nope") == "not a TRL key in any release 0.14–1.16"
    assert KT.unread_key_why((TOY,), "new") == "not understood (a TRL key oomless does not read)"


@pytest.mark.parametrize(("table", "oldest", "newest"), [
    (TRL, (0, 14), (1,)), (SWIFT, (3, 2), (4,)), (VERL, (0, 3), (0, 9)), (OPENRLHF, (0, 5), (0, 11))])
def test_tables_span_the_releases_asked_for(table: KT.KeyTable, oldest: tuple, newest: tuple) -> None:
    """Issue 13: TRL 0.14-1.x, ms-swift 3.x-4.x, verl 0.3-0.9, OpenRLHF 0.5-0.11."""
    assert KT.minor(table.versions[0]) <= oldest and KT.minor(table.versions[-1])[:len(newest)] >= newest
    assert len(table.keys) > 50


# --- hand-written sets name real keys ----------------------------------------------------------

def _missing(tables: tuple[KT.KeyTable, ...], names) -> list[str]:
    return sorted(n for n in names if not any(n in t for t in tables))


def test_trl_hand_written_keys_exist_in_some_release() -> None:
    from trl import TrlParser
    import inspect

    parser_keys = {"env"}  # TrlParser reads `env:` from the YAML itself, not from a dataclass
    assert all(f'"{k}"' in inspect.getsource(TrlParser) for k in parser_keys)
    legacy = [*TK.LEGACY_KEYS, *(new for new, _ in TK.LEGACY_KEYS.values())]
    names = set(TK.NO_MEMORY_EFFECT) | set(TK.NOT_MODELLED) | set(legacy)
    assert _missing((TRL, TRANSFORMERS), names - parser_keys) == []


def test_trl_legacy_keys_are_gone_from_the_newest_release() -> None:
    newest = KT.minor(TRL.versions[-1])
    assert [k for k in TK.LEGACY_KEYS if TRL.exists_in(k, newest)] == []


def test_swift_hand_written_flags_exist_in_some_release() -> None:
    names = set(SF.FLAGS) | set(SF.NO_MEMORY_EFFECT) | set(SF.NOT_MODELLED) | set(SF.COMPAT_ALIASES) | set(SF.COMPAT_ALIASES.values())
    assert _missing((SWIFT, TRANSFORMERS), names) == []


@pytest.mark.parametrize("name", sorted(SF.FLAGS))
def test_swift_flag_list_versions_agree_with_the_releases_read(name: str) -> None:
    first, gone, _ = SF.FLAGS[name]
    inherited = name in TRANSFORMERS  # TrainingArguments fields: every ms-swift release has them
    assert inherited or SWIFT.exists_in(name, first), f"--{name}: not in ms-swift {first} ({SWIFT.range_text(name)})"
    if gone is not None:
        assert not SWIFT.exists_in(name, KT.minor(SWIFT.versions[-1])), f"--{name} is still in the newest release"


# --- defaults the readers apply are the frameworks' own ------------------------------------------

def _trl_default(key: str) -> object:
    newest = TRL.versions[-1]
    if TRL.exists_in(key, KT.minor(newest)):
        return TRL.default(key, newest)
    return TRANSFORMERS.default(key, TRANSFORMERS.versions[-1])


def test_trl_reader_defaults_are_the_newest_trl_defaults() -> None:
    config = f"model_name_or_path: {MODEL}\nuse_vllm: true\nuse_peft: true\n"
    spec, _, _ = import_path(Path("c.yaml"), HardwareFlags(gpu="H100-80GB", gpus_per_node=1), {"c.yaml": config})
    assert spec["batch"]["micro_batch_size"] == _trl_default("per_device_train_batch_size")
    assert spec["batch"]["num_generations"] == _trl_default("num_generations")
    assert spec["lengths"]["max_completion_tokens"] == _trl_default("max_completion_length")
    assert spec["kl_beta"] == _trl_default("beta")
    assert spec["gradient_checkpointing"] == _trl_default("gradient_checkpointing")
    assert spec["rollout"]["engine"] == f"vllm_{_trl_default('vllm_mode')}"
    assert spec["rollout"]["gpu_memory_utilization"] == _trl_default("vllm_gpu_memory_utilization")
    assert spec["rollout"]["tensor_parallel_size"] == _trl_default("vllm_tensor_parallel_size")
    lora = spec["finetune"]
    assert (lora["lora_rank"], lora["lora_alpha"], lora["lora_dropout"]) == tuple(
        _trl_default(k) for k in ("lora_r", "lora_alpha", "lora_dropout"))


def test_trl_legacy_prompt_default_is_the_old_releases() -> None:
    entry = TRL.keys["max_prompt_length"]
    assert f"default {TRL.default('max_prompt_length', entry['first'])}" in TK.LEGACY_KEYS["max_prompt_length"][1]


SWIFT_READ = [v for v in SWIFT.versions if SF.MIN_VERSION <= KT.minor(v) < SF.MAX_VERSION]


@pytest.mark.parametrize("version", SWIFT_READ)
def test_swift_reader_defaults_are_that_releases_defaults(version: str) -> None:
    at = KT.minor(version)
    mode = " --vllm_mode colocate" if SF.Profile(at).has_vllm_mode else ""
    text = f"# oomless: ms-swift=={at[0]}.{at[1]}\nNPROC_PER_NODE=8 swift rlhf --rlhf_type grpo --model {MODEL} --use_vllm true{mode}\n"
    spec, _, _ = import_text(text, Path("."), HardwareFlags(gpu="H100-80GB", gpus_per_node=8), "run.sh")

    def default(key: str) -> object:
        table = SWIFT if key in SWIFT else TRANSFORMERS
        return table.default(key, version if table is SWIFT else table.versions[-1])

    assert spec["batch"]["micro_batch_size"] == default("per_device_train_batch_size")
    assert spec["batch"]["num_generations"] == default("num_generations")
    assert spec["lengths"]["max_completion_tokens"] == default("max_completion_length")
    assert spec["gradient_checkpointing"] == default("gradient_checkpointing")
    assert spec["rollout"]["gpu_memory_utilization"] == default("vllm_gpu_memory_utilization")
    tp = "vllm_tensor_parallel_size" if SWIFT.exists_in("vllm_tensor_parallel_size", at) else "tensor_parallel_size"
    assert spec["rollout"]["tensor_parallel_size"] == (default(tp) or 1)
    lora = spec["finetune"]
    assert (lora["lora_rank"], lora["lora_alpha"], lora["lora_dropout"]) == tuple(
        default(k) for k in ("lora_rank", "lora_alpha", "lora_dropout"))
    seqs = default("vllm_max_num_seqs") if SWIFT.exists_in("vllm_max_num_seqs", at) else None
    if at >= (3, 5) and (not SF.Profile(at).colocate_max_num_seqs_flag or seqs is None):  # ms-swift sizes the engine
        batch = spec["batch"]  # per device batch × TP × steps_per_generation (swift.keys.Profile)
        seqs = batch["micro_batch_size"] * spec["rollout"]["tensor_parallel_size"] * batch["gradient_accumulation_steps"]
    if isinstance(seqs, int):
        assert spec["rollout"]["max_num_seqs"] == seqs


# --- the readers name other releases' keys from the tables ---------------------------------------

def test_trl_reader_names_keys_of_other_releases_and_of_none() -> None:
    config = f"model_name_or_path: {MODEL}\nmax_prompt_length: 1024\nvllm_device: auto\nfrobnicate: 1\n"
    spec, ignored, notes = import_path(Path("c.yaml"), HardwareFlags(gpu="H100-80GB", gpus_per_node=1), {"c.yaml": config})
    assert spec["lengths"]["max_prompt_tokens"] == 1024
    assert any(n.startswith(f"`max_prompt_length`: {TRL.range_text('max_prompt_length')}; ") for n in notes), notes
    assert f"`vllm_device`: {TRL.range_text('vllm_device')}; read with its meaning there (not a TRL 1.16 key)" in notes
    assert f"frobnicate: not a TRL key in any release {TRL.span_text} (nor of transformers {TRANSFORMERS.span_text})" in ignored


def test_a_key_of_an_older_transformers_gets_no_note() -> None:
    """The transformers release is not known: a TrainingArguments key of any release read is current."""
    dropped = next(k for k in sorted(TRANSFORMERS.keys) if not TRANSFORMERS.exists_in(k, KT.minor(TRANSFORMERS.versions[-1]))
                   and k not in TRL and k not in TK.LEGACY_KEYS)
    config = f"model_name_or_path: {MODEL}\n{dropped}: null\n"
    _, _, notes = import_path(Path("c.yaml"), HardwareFlags(gpu="H100-80GB", gpus_per_node=1), {"c.yaml": config})
    assert not any(n.startswith(f"`{dropped}`") for n in notes), notes


def test_swift_reader_names_flags_of_other_releases() -> None:
    old = next(k for k in sorted(SWIFT.keys) if k not in SF.FLAGS and not SWIFT.exists_in(k, SF.LATEST)
               and k not in TRANSFORMERS)
    text = f"NPROC_PER_NODE=8 swift rlhf --rlhf_type grpo --model {MODEL} --{old} 1 --frobnicate 1\n"
    _, ignored, notes = import_text(text, Path("."), HardwareFlags(gpu="H100-80GB", gpus_per_node=8), "run.sh")
    assert any(n.startswith(f"`--{old}`: {SWIFT.range_text(old)}; ") for n in notes), notes
    assert any(line.startswith("--frobnicate: not a ms-swift key in any release") for line in ignored)


# --- exported files use only keys of their target release ---------------------------------------

def _flatten(data: dict, prefix: str = "") -> list[str]:
    out = []
    for key, value in data.items():
        if isinstance(value, dict) and value:
            out += _flatten(value, f"{prefix}{key}.")
        else:
            out.append(f"{prefix}{key}")
    return out


def _verl_has(key: str, version: tuple[int, ...]) -> bool:
    """A key of the table, or one inside a mapping the table leaves open (`override_config: {}`)."""
    parts = key.split(".")
    prefixes = [".".join(parts[:i]) for i in range(1, len(parts))]
    return VERL.exists_in(key, version) or any(
        VERL.exists_in(p, version) and VERL.default(p) in ({}, None) for p in prefixes)


def test_exported_verl_config_uses_keys_of_its_release() -> None:
    data = yaml.safe_load((GOLDEN / "verl" / "verl_ppo.yaml").read_text(encoding="utf-8"))
    keys = _flatten({k: v for k, v in data.items() if k not in ("hydra", "defaults")})
    version = KT.minor(VERL_VERSION)
    assert keys and [k for k in keys if not _verl_has(k, version)] == []


@pytest.mark.parametrize(("name", "version"), [("train_ppo_ray.sh", DOTTED), ("train_ppo_ray_classic.sh", CLASSIC)])
def test_exported_openrlhf_flags_are_flags_of_their_release(name: str, version: str) -> None:
    text = (GOLDEN / "openrlhf" / name).read_text(encoding="utf-8")
    args = common.command_with(common.parse_shell(text, name), MARKERS)[1]
    flags = [a for a in args if a.startswith("--")]
    assert flags and [f for f in flags if not OPENRLHF.exists_in(f, KT.minor(version))] == []


SWIFT_GOLDEN = [p.name for p in sorted((GOLDEN / "swift").iterdir())]
"""ms-swift 3.6 goldens included: the writer leaves out --vllm_max_num_seqs where the table lacks it."""


@pytest.mark.parametrize("folder", SWIFT_GOLDEN)
def test_exported_swift_flags_are_flags_of_their_release(folder: str) -> None:
    text = (GOLDEN / "swift" / folder / "run_grpo.sh").read_text(encoding="utf-8")
    version = common.parse_version("ms-swift", common.read_directives(text)["ms-swift"])
    names = [n for cmd in common.parse_shell(text, "run_grpo.sh") if cmd.argv[:2] == ("swift", "rlhf")
             for n in common.parse_flags(cmd.argv[2:], "run_grpo.sh")]
    assert names and [n for n in names if not (SWIFT.exists_in(n, version) or n in TRANSFORMERS)] == []
