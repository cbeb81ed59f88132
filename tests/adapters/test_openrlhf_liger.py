"""OpenRLHF's `--use_liger_kernel` / `--ds.use_liger_kernel` (`adapters/openrlhf/liger.py`): the
actor loaded through Liger's `AutoLigerKernelForCausalLM` is the spec's `liger_kernels`, the
logits are unchanged (no fused loss in OpenRLHF's log-prob path), the reference's Liger load is
noted, a vision model with the flag is refused (OpenRLHF >= 0.10.0 raises), and the writer's
flag reads back in both flag styles."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomless.adapters import HardwareFlags, export_native, import_native
from oomless.adapters import _native as N
from oomless.adapters import common
from oomless.adapters.openrlhf import writer as OW
from oomless.adapters.openrlhf.keys import FLAGS
from oomless.adapters.openrlhf.reader import CLASSIC, CLASSIC_08, DOTTED, MARKERS, _parse_args
from oomless.errors import InputError
from oomless.spec.enums import LogitsMode
from tests.adapters.native_helpers import DATA, imported, round_trip

DOTTED_SH, CLASSIC_SH = DATA / "openrlhf_dotted.sh", DATA / "openrlhf_classic.sh"
HW = {"gpu": "A100-80GB"}
MODEL = "Qwen/Qwen2.5-1.5B-Instruct"
VISION_MODEL = "Qwen/Qwen2.5-VL-3B-Instruct"

# (table, flags that pick it, the Liger flag of that style)
STYLES = [
    (CLASSIC_08, f"--pretrain {MODEL} --prompt_max_len 256 --generate_max_len 768 --bf16", "--use_liger_kernel"),
    (CLASSIC, f"--pretrain {MODEL} --max_len 1024 --max_new_tokens 512", "--use_liger_kernel"),
    (DOTTED, f"--actor.model_name_or_path {MODEL} --data.max_len 1024 --rollout.max_new_tokens 512",
     "--ds.use_liger_kernel"),
]


def _write(tmp_path: Path, flags: str, name: str = "run.sh") -> Path:
    path = tmp_path / name
    path.write_text("python3 -m openrlhf.cli.train_ppo_ray " + flags + "\n")
    return path


def test_every_table_declares_the_flag() -> None:
    for table, _, flag in STYLES:
        assert FLAGS[table][flag] == {"action": "store_true", "default": False}


@pytest.mark.parametrize(("table", "flags", "flag"), STYLES, ids=[s[0] for s in STYLES])
def test_the_flag_is_liger_kernels_and_leaves_logits(tmp_path: Path, table: str, flags: str, flag: str) -> None:
    plain = imported("openrlhf", _write(tmp_path, flags, "plain.sh"), **HW)
    path = _write(tmp_path, f"{flags} {flag}")
    result = import_native("openrlhf", path, HardwareFlags(**HW))
    liger = imported("openrlhf", path, **HW)
    assert liger.liger_kernels and not plain.liger_kernels
    assert liger.logits == plain.logits != LogitsMode.fused  # logits materialised as without the flag
    assert liger.model_copy(update={"liger_kernels": False}) == plain  # nothing else changes
    assert not any(flag in line for line in result.ignored)


def test_the_reference_load_is_noted_only_with_a_reference(tmp_path: Path) -> None:
    base = f"--pretrain {MODEL} --max_len 1024 --max_new_tokens 512 --use_liger_kernel"
    with_ref = import_native("openrlhf", _write(tmp_path, f"{base} --init_kl_coef 0.01", "a.sh"), HardwareFlags(**HW))
    without = import_native("openrlhf", _write(tmp_path, f"{base} --init_kl_coef 0", "b.sh"), HardwareFlags(**HW))
    assert any("reference" in n and "--use_liger_kernel" in n for n in with_ref.notes)
    assert not any("reference" in n and "Liger" in n for n in without.notes)


def test_a_vision_model_with_the_flag_is_refused_naming_it(tmp_path: Path) -> None:
    flags = f"--actor.model_name_or_path {VISION_MODEL} --data.max_len 1024 --rollout.max_new_tokens 512"
    imported("openrlhf", _write(tmp_path, flags, "ok.sh"), **HW)  # without the flag it reads
    with pytest.raises(InputError) as err:
        imported("openrlhf", _write(tmp_path, flags + " --ds.use_liger_kernel"), **HW)
    assert err.value.field.endswith("--ds.use_liger_kernel")


@pytest.mark.parametrize("source", [DOTTED_SH, CLASSIC_SH], ids=["dotted", "classic"])
def test_export_writes_the_flag_and_reads_back(tmp_path: Path, source: Path) -> None:
    spec = imported("openrlhf", source, **HW).model_copy(update={"liger_kernels": True})
    assert round_trip("openrlhf", spec, tmp_path, **HW) == [spec, spec]
    for name, version, flag in (("train_ppo_ray.sh", DOTTED, "--ds.use_liger_kernel"),
                                ("train_ppo_ray_classic.sh", CLASSIC, "--use_liger_kernel")):
        args = common.command_with(common.parse_shell((tmp_path / name).read_text(), name), MARKERS)[1]
        assert flag in args
        out = N.Collected()
        _parse_args(args, FLAGS[version], version, out)
        assert out.ignored == []
    off = spec.model_copy(update={"liger_kernels": False})
    assert not any("liger" in flag for flag in OW.native_settings(off) if OW.native_settings(off)[flag])


def test_export_refuses_liger_for_a_vision_model_naming_liger_kernels(tmp_path: Path) -> None:
    spec = imported("openrlhf", DOTTED_SH, **HW).model_copy(update={"model": VISION_MODEL, "liger_kernels": True})
    with pytest.raises(InputError) as err:
        OW.native_settings(spec)
    assert err.value.field == "liger_kernels"
    with common.collect_unexpressed() as found:  # fit's writer check: recorded, the flag left out
        settings = OW.native_settings(spec)
    assert [f for f, _ in found] == ["liger_kernels"] and not settings["--ds.use_liger_kernel"]


def test_export_refuses_the_fused_loss_naming_logits(tmp_path: Path) -> None:
    spec = imported("openrlhf", DOTTED_SH, **HW).model_copy(update={"logits": LogitsMode.fused, "liger_kernels": True})
    with pytest.raises(InputError) as err:
        export_native("openrlhf", spec, tmp_path, force=False)
    assert err.value.field == "logits"
