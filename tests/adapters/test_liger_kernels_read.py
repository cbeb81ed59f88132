"""`liger_kernels` from the frameworks' keys: TRL and ms-swift `use_liger_kernel` (transformers'
Trainer calls liger_kernel's `_apply_liger_kernel_to_instance`; ms-swift's, and TRL 0.25-1.14's,
also the fused loss: `logits` fused; TRL per release: test_trl_liger.py), verl `actor_rollout_ref.model.use_liger` (fsdp_workers.py patches the actor module);
the writers say it back."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomless.adapters import HardwareFlags, export_native, import_native
from oomless.errors import InputError
from oomless.spec.load import parse_spec
from tests.adapters.native_helpers import DATA, imported
from tests.adapters.test_trl import QUICKSTART_TRL, spec_of
from tests.helpers import EXAMPLES

TRL_LAUNCH = ("accelerate launch --num_processes 4 examples/scripts/grpo.py --model_name_or_path Qwen/Qwen2.5-1.5B-Instruct "
              "--output_dir out{}\n")


@pytest.mark.parametrize("flag", [True, False])
def test_trl_use_liger_kernel_sets_liger_kernels(flag: bool) -> None:
    """TRL 1.16 (the default release): the model kernels only; other releases: test_trl_liger.py."""
    spec = spec_of({"launch.sh": TRL_LAUNCH.format(" --use_liger_kernel true" if flag else "")})
    assert spec.liger_kernels is flag
    assert spec.logits.value == "chunked_head"


@pytest.mark.parametrize("flag", [True, False])
def test_swift_use_liger_kernel_sets_liger_kernels(tmp_path: Path, flag: bool) -> None:
    text = (EXAMPLES / "seeds" / "native" / "s0-before.sh").read_text()
    if flag:
        text = text.replace("    --use_vllm true \\\n", "    --use_vllm true \\\n    --use_liger_kernel true \\\n")
        assert "--use_liger_kernel true" in text
    path = tmp_path / "run.sh"
    path.write_text(text)
    spec = parse_spec(import_native("swift", path, HardwareFlags(gpu="H20")).spec)
    assert spec.liger_kernels is flag
    assert (spec.logits.value == "fused") is flag


@pytest.mark.parametrize("flag", [True, False])
def test_verl_model_use_liger_sets_liger_kernels(tmp_path: Path, flag: bool) -> None:
    text = (DATA / "verl_gsm8k.sh").read_text()
    anchor = "    actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct \\\n"
    assert anchor in text
    path = tmp_path / "run.sh"
    path.write_text(text.replace(anchor, anchor + f"    actor_rollout_ref.model.use_liger={flag} \\\n"))
    spec = imported("verl", path, gpu="H100-80GB")
    assert spec.liger_kernels is flag
    assert spec.logits == imported("verl", DATA / "verl_gsm8k.sh", gpu="H100-80GB").logits  # the loss is another key


def test_verl_writes_use_liger_and_reads_it_back(tmp_path: Path) -> None:
    spec = imported("verl", DATA / "verl_gsm8k.sh", gpu="H100-80GB").model_copy(update={"liger_kernels": True})
    written = export_native("verl", spec, tmp_path, force=False)
    texts = "".join(Path(p).read_text() for p in written if Path(p).is_file())
    assert "use_liger" in texts
    back = [imported("verl", Path(p), gpu="H100-80GB") for p in written if Path(p).suffix in (".sh", ".yaml")]
    assert back and all(b.liger_kernels for b in back)


def test_trl_writes_use_liger_kernel_for_liger_kernels(tmp_path: Path) -> None:
    spec = parse_spec({**QUICKSTART_TRL, "liger_kernels": True})
    written = export_native("trl", spec, tmp_path, force=False)
    assert any("use_liger_kernel: true" in Path(p).read_text() for p in written if Path(p).suffix == ".yaml")


def test_trl_cannot_write_the_fused_loss_in_1_16(tmp_path: Path) -> None:
    spec = parse_spec({**QUICKSTART_TRL, "logits": "fused", "liger_kernels": True})
    with pytest.raises(InputError) as err:
        export_native("trl", spec, tmp_path, force=False)
    assert err.value.field == "logits"


def _swift_spec(tmp_path: Path, **update: object):
    path = tmp_path / "run.sh"
    path.write_text((EXAMPLES / "seeds" / "native" / "s0-before.sh").read_text())
    return parse_spec(import_native("swift", path, HardwareFlags(gpu="H20")).spec).model_copy(update=update)


def test_swift_writes_use_liger_kernel_for_liger_with_the_fused_loss(tmp_path: Path) -> None:
    from oomless.spec.run import LogitsMode

    out = tmp_path / "out"
    written = export_native("swift", _swift_spec(tmp_path, logits=LogitsMode.fused, liger_kernels=True), out, force=False)
    assert any("--use_liger_kernel true" in Path(p).read_text() for p in written if Path(p).is_file())


def test_swift_writes_liger_kernels_alone_only_for_a_release_without_the_fused_loss(tmp_path: Path) -> None:
    """ms-swift >= 3.5 applies Liger's GRPO loss with --use_liger_kernel (swift/liger.py): the
    kernels alone are ms-swift 3.4's flag, which the export falls back to."""
    from oomless.adapters.swift import writer as SW

    spec = _swift_spec(tmp_path, liger_kernels=True)
    with pytest.raises(InputError) as err:
        SW.native_settings(spec)
    assert err.value.field == "liger_kernels" and "logits: fused" in err.value.message
    written = export_native("swift", spec, tmp_path / "out", force=False)
    script = next(Path(p).read_text() for p in written if Path(p).suffix == ".sh")
    assert "--use_liger_kernel true" in script and "ms-swift==3.4" in script
