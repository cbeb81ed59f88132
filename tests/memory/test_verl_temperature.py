"""How the sampling temperature reaches the logits of verl's flash-attn cross-entropy
(`logits_temperature`, memory/logits.py `FLASH_CE_TEMPERATURE_COPIES`): verl 0.9 returns them
unscaled at temperature 1 and scales a copy otherwise; verl <= 0.8 and EasyR1 divide in place."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomless.adapters import export_native
from oomless.catalog.resolve import load_model
from oomless.errors import InputError
from oomless.memory import logits as L
from oomless.spec.ignored import ignored_fields
from oomless.spec.run import LogitsMode, RunSpec
from tests.adapters.native_helpers import imported
from tests.adapters.test_verl_tuning import PER_GPU, script

ARCH = load_model("Qwen/Qwen2.5-7B-Instruct")
ROWS, S = 1, 16384  # one packed row of 16k tokens: its logits dominate the head's backward


def test_training_copies_by_scaling() -> None:
    es = ROWS * S * ARCH.vocab_size
    train = {how: L.training_logits_bytes(ARCH, LogitsMode.bf16_flash_ce, ROWS, S - 1, 2048, S, temperature=how)
             for how in ("in_place", "copy", "none")}
    assert train["in_place"] == train["copy"]  # two bf16 copies at the peak either way
    # unscaled: the gradient written over the only copy, so the head's backward binds (the logits'
    # gradient beside the head input's bf16 gradient, h per token; Qwen2.5-7B's head is untied)
    assert not ARCH.tie_word_embeddings
    assert train["in_place"] - train["none"] == 2 * es - 2 * ARCH.hidden_size * S
    # the entropy's backward copies were traced with the in-place division and are kept for all three
    entropy = {how: L.training_logits_bytes(ARCH, LogitsMode.bf16_flash_ce_entropy, ROWS, S - 1, 2048, S, temperature=how)
               for how in ("in_place", "copy", "none")}
    assert len(set(entropy.values())) == 1


@pytest.mark.parametrize("mode", [LogitsMode.bf16_flash_ce, LogitsMode.bf16_flash_ce_entropy])
def test_no_grad_pass_holds_two_copies_only_when_scaled_out_of_place(mode: LogitsMode) -> None:
    es = ROWS * S * ARCH.vocab_size
    got = {how: L.logprob_logits_bytes(ARCH, mode, ROWS, S - 1, 2048, S, temperature=how) for how in ("in_place", "copy", "none")}
    assert got == {"in_place": 2 * es, "copy": 4 * es, "none": 2 * es}


@pytest.mark.parametrize(("override", "how"), [("", "none"), ("actor_rollout_ref.rollout.temperature=0.7", "copy"),
                                               ("actor_rollout_ref.rollout.temperature=1.0", "none")])
def test_verl_reads_the_rollout_temperature(tmp_path: Path, override: str, how: str) -> None:
    spec = imported("verl", script(tmp_path, PER_GPU, override), gpu="H100-80GB")
    assert spec.logits == LogitsMode.bf16_flash_ce and spec.logits_temperature.value == how


def test_plan_differs_by_the_copy_and_verl_export_names_what_it_cannot_choose(tmp_path: Path) -> None:
    from tests.helpers import component, plan_of

    unit = imported("verl", script(tmp_path, PER_GPU), gpu="H100-80GB").model_dump(mode="json")
    scaled = {**unit, "logits_temperature": "copy"}
    es_bytes = [component(plan_of(s), "logprob", "logits") for s in (unit, scaled)]
    assert es_bytes[1] == 2 * es_bytes[0] > 0
    with pytest.raises(InputError) as err:
        export_native("verl", RunSpec.model_validate(scaled), tmp_path / "out", force=False)
    assert err.value.field == "logits_temperature" and "rollout.temperature" in err.value.message


def test_the_field_is_ignored_outside_the_flash_ce_modes() -> None:
    spec = RunSpec.model_validate({"model": "Qwen/Qwen2.5-7B-Instruct", "hardware": {"gpu": "H100-80GB"},
                                   "logits": "full_bf16", "logits_temperature": "copy"})
    assert any(m.startswith("logits_temperature is ignored") for m in ignored_fields(spec))


def test_verl_0_9_0_scales_out_of_place_even_at_temperature_1(tmp_path: Path) -> None:
    """0.9.0's transformer_impl.py divides unconditionally; the skip at 1 came in 0.9.1."""
    path = script(tmp_path, PER_GPU)
    path.write_text("# verl==0.9.0\n" + path.read_text())
    assert imported("verl", path, gpu="H100-80GB").logits_temperature.value == "copy"
    path.write_text(path.read_text().replace("# verl==0.9.0", "# verl==0.9.1"))
    assert imported("verl", path, gpu="H100-80GB").logits_temperature.value == "none"
