"""OpenRLHF and Open-Reasoner-Zero score every position, not the completion's c + 1 as TRL does.

OpenRLHF scores every position in fp32 (`Actor.forward`: the model without logits_to_keep,
``.to(torch.float32)``, flash-attn's cross-entropy, the output held through backward): its files
read as `logits: fp32_all_positions`, which the plan charges over the whole row, and the writer
writes nothing else. `fit` may halve the run's own log-prob micro-batch
(``--rollout.micro_batch_size``/``--micro_rollout_batch_size``). ORZ's actor takes a bf16
``log_softmax`` over every position (and a no-grad one for its entropy): `bf16_all_positions`."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomless.fit.overrides import apply
from oomless.fit.space import logprob_splits
from oomless.spec.run import LogitsMode
from tests.adapters.native_helpers import DATA, NATIVE, imported
from tests.helpers import BASE_SPEC, merged, plan_of

DOTTED_SH = DATA / "openrlhf_dotted.sh"


def test_openrlhf_reads_as_every_position_in_fp32() -> None:
    assert imported("openrlhf", DOTTED_SH, gpu="A100-80GB").logits == LogitsMode.fp32_all_positions


def _logits(plan, phase: str) -> int:  # type: ignore[no-untyped-def]
    group = next(g for g in plan.devices if g.role == "train")
    return sum(c.num_bytes for p in group.phases if p.name == phase for c in p.components if c.name == "logits")


def test_the_plan_charges_every_position_at_ten_bytes_a_logit() -> None:
    """Padded rows of p + c tokens: 2 B bf16 + 4 B fp32 per logit in the log-prob pass, 10 B at the
    loss's backward (fp32 logits, their fp32 gradient, its bf16 copy) against full_bf16's
    completion-only rows."""
    base = merged(BASE_SPEC, **{"lengths.max_prompt_tokens": 1536, "lengths.max_completion_tokens": 512,
                                "batch.micro_batch_size": 2})
    every = plan_of(merged(base, logits="fp32_all_positions"))
    bf16 = plan_of(merged(base, logits="full_bf16"))
    vocab, rows, s = every.arch.vocab_size, 2, 2048
    assert _logits(every, "logprob") == 6 * rows * s * vocab
    assert _logits(every, "train") >= 10 * rows * s * vocab
    assert _logits(every, "train") > 3 * _logits(bf16, "train")


def test_the_writer_says_only_what_openrlhf_does(tmp_path: Path) -> None:
    from oomless.adapters import export_native
    from oomless.errors import InputError

    spec = imported("openrlhf", DOTTED_SH, gpu="A100-80GB")
    assert export_native("openrlhf", spec, tmp_path / "ok", force=False)
    with pytest.raises(InputError) as err:
        export_native("openrlhf", spec.model_copy(update={"logits": LogitsMode.full_bf16}), tmp_path / "no", force=False)
    assert err.value.field == "logits" and "fp32_all_positions" in str(err.value)


def test_fit_may_halve_a_stated_log_prob_micro_batch() -> None:
    """(tests/adapters/test_patch_corpus.py's OpenRLHF case needs it: on 40-GB cards its published
    ``--rollout.micro_batch_size 16`` packs 32,768 tokens of fp32 logits into one log-prob pass.)"""
    spec = imported("openrlhf", DOTTED_SH, gpu="A100-80GB")
    stated = apply(spec, {"batch.logprob_micro_batch_size": 12})
    assert [o["batch.logprob_micro_batch_size"] for o in logprob_splits(stated)] == [12, 6, 3, 1]
    assert logprob_splits(apply(spec, {"batch.logprob_micro_batch_size": None})) == [{}]


def test_orz_reads_as_every_position_in_bf16_and_writes_nothing_else(tmp_path: Path) -> None:
    from oomless.adapters import export_native
    from oomless.errors import InputError

    spec = imported("orz", NATIVE / "s4-after.py", gpu="A100-80GB")
    assert spec.logits == LogitsMode.bf16_all_positions
    with pytest.raises(InputError) as err:
        export_native("orz", spec.model_copy(update={"logits": LogitsMode.full_bf16}), tmp_path, force=False)
    assert err.value.field == "logits"


def test_orz_plans_eight_bytes_a_logit_and_more_at_the_backward() -> None:
    base = merged(BASE_SPEC, **{"lengths.max_prompt_tokens": 1536, "lengths.max_completion_tokens": 512,
                                "batch.micro_batch_size": 2})
    orz = plan_of(merged(base, logits="bf16_all_positions"))
    vocab, rows, s, c = orz.arch.vocab_size, 2, 2048, 512
    assert _logits(orz, "logprob") == 4 * rows * s * vocab
    assert _logits(orz, "train") >= (8 * s + 2 * c) * rows * vocab
