"""Liger's RMSNorm and SwiGLU in the activation terms (`RunSpec.liger_kernels`), derived by hand
from liger-kernel 0.6.4/0.8.5's autograd Functions (`ops/rms_norm.py` LigerRMSNormFunction saves
X, W and an fp32 rstd per row, backward in place into dY; `ops/swiglu.py` LigerSiLUMulFunction
saves a and b, backward in place into them) for catalog configs, against the HF terms."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from oomless.catalog.resolve import load_model
from oomless.memory import activations as A
from oomless.spec.run import AttentionImpl

MODELS = ["Qwen/Qwen2-7B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"]


@pytest.mark.parametrize("ref", MODELS)
def test_per_token_layer_terms_are_liger_s_saved_tensors(ref: str) -> None:
    arch = load_model(ref)
    h, i = arch.hidden_size, arch.intermediate_size
    # two RMSNorms: bf16 X (2h) + fp32 rstd (4) each; the two norm outputs the linears keep (2h each)
    assert A.norms_saved_bytes_per_token(arch, liger_kernels=True) == 2 * (2 * h + 4) + 2 * 2 * h
    # HF: fp32 upcast (4h) + bf16 normalised value (2h) + rstd, per norm
    assert A.norms_saved_bytes_per_token(arch) == 2 * (6 * h + 4) + 2 * 2 * h
    # SwiGLU: gate output a, up output b, the product down_proj keeps; HF adds silu(gate)
    assert A.mlp_saved_bytes_per_token(arch, liger_kernels=True) == 3 * 2 * i
    assert A.mlp_saved_bytes_per_token(arch) == 4 * 2 * i
    # backward: a, b (their gradients written in place) and dc; HF: gate, silu, up + 3 gradients
    assert A.mlp_backward_peak_bytes_per_token(arch, liger_kernels=True) == 3 * 2 * i
    assert A.mlp_backward_peak_bytes_per_token(arch) == 6 * 2 * i
    # a norm's backward holds its bf16 input only (dX written into dY)
    assert A.norm_backward_peak_bytes_per_token(arch, liger_kernels=True) == 2 * h
    # the final norm keeps the last layer's output and rstd; a recomputed layer's input norm the checkpointed input
    assert A.head_saved_bytes_per_token(arch, liger_kernels=True) == 2 * h + 4
    assert A.checkpointed_input_reused_bytes_per_token(arch, liger_kernels=True) == 2 * h
    assert A.checkpointed_input_reused_bytes_per_token(arch) == 0
    # a whole layer per token: the difference is the norms' 2 x 4h and one [.., I] tensor
    s = 1024
    per_seq = A.decoder_layer_saved_bytes_per_sequence(arch, AttentionImpl.sdpa, s)
    liger = A.decoder_layer_saved_bytes_per_sequence(arch, AttentionImpl.sdpa, s, liger_kernels=True)
    assert per_seq - liger == s * (2 * 4 * h + 2 * i)


@pytest.mark.parametrize("ref", MODELS)
@pytest.mark.parametrize("checkpointing", [True, False])
def test_training_terms_fall_with_liger_and_grow_slower_with_tokens(ref: str, checkpointing: bool) -> None:
    arch = load_model(ref)

    def total(s: int, liger: bool) -> int:
        args = (arch, AttentionImpl.sdpa, checkpointing, 8, s, 0, 1, liger)
        return A.training_saved_activation_bytes(*args) + A.backward_transient_bytes(*args)

    for s in (400, 656):
        assert total(s, True) < total(s, False)
    assert total(656, True) - total(400, True) < total(656, False) - total(400, False)


def test_families_liger_does_not_patch_this_way_are_unchanged() -> None:
    arch = load_model("Qwen/Qwen2-7B-Instruct")
    for other in (dataclasses.replace(arch, text_model_type="gemma2"), dataclasses.replace(arch, mlp_gated=False),
                  dataclasses.replace(arch, norm_type="layer_norm")):
        for checkpointing in (True, False):
            args = (other, AttentionImpl.sdpa, checkpointing, 4, 512, 0, 1)
            assert A.training_saved_activation_bytes(*args, True) == A.training_saved_activation_bytes(*args, False)
            assert A.backward_transient_bytes(*args, True) == A.backward_transient_bytes(*args, False)


NOTEBOOK = Path(__file__).resolve().parents[1] / "published_figures" / "configs" / "trl_nb_qlora_qwen2_7b_t4.yaml"


def _train_peak(tmp_path: Path, liger: bool) -> int:
    from oomless.adapters import HardwareFlags, import_native
    from oomless.planner.plan import make_plan
    from oomless.planner.report import plan_to_dict
    from oomless.spec.load import parse_spec, resolve

    text = NOTEBOOK.read_text()
    assert "use_liger_kernel: true" in text
    path = tmp_path / "nb.yaml"
    path.write_text(text)
    spec = parse_spec(import_native("trl", path, HardwareFlags(gpu="H100-80GB")).spec)
    assert spec.liger_kernels
    if not liger:
        spec = spec.model_copy(update={"liger_kernels": False})
    run = resolve(spec)
    phases = plan_to_dict(make_plan(run.spec, run.arch, run.gpu, run.archs))["gpu"]["phases"]
    return next(p["peak_bytes"] for p in phases if p["name"] == "train")


def test_the_notebook_train_phase_falls_with_liger_kernels(tmp_path: Path) -> None:
    assert _train_peak(tmp_path, True) < _train_peak(tmp_path, False)
