"""What verl's own `examples/tuning/` scripts (published as the least hardware each model runs on,
docs/perf/device_tuning.rst) need read as verl runs them: the older global micro-batch keys, the
reference verl always offloads, the vLLM release a script names, an engine spanning nodes, and
FSDP's optimizer step without a second fp32 gradient."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from oomless.adapters import HardwareFlags, import_native
from oomless.errors import InputError
from oomless.spec.load import parse_spec
from tests.adapters.native_helpers import imported
from tests.helpers import BASE_SPEC, component, merged, plan_of

LORA = ("actor_rollout_ref.model.lora_rank=32 actor_rollout_ref.model.lora_alpha=32 "
        "actor_rollout_ref.model.target_modules=all-linear")


def script(tmp_path: Path, *overrides: str, gpus: int = 8, nodes: int = 1, head: str = "",
           model: str = "Qwen/Qwen2.5-7B-Instruct") -> Path:
    body = " \\\n    ".join([
        "python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo",
        "data.train_batch_size=64 data.max_prompt_length=512 data.max_response_length=1024",
        f"actor_rollout_ref.model.path={model} actor_rollout_ref.actor.ppo_mini_batch_size=32",
        "actor_rollout_ref.actor.use_kl_loss=True actor_rollout_ref.actor.kl_loss_coef=0.001",
        "actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.n=4",
        f"trainer.n_gpus_per_node={gpus} trainer.nnodes={nodes}", *overrides])
    path = tmp_path / "run.sh"
    path.write_text(head + body + "\n")
    return path


PER_GPU = ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2 "
           "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4")


def test_global_micro_batches_are_divided_over_the_data_parallel_ranks(tmp_path: Path) -> None:
    # fsdp_workers.py: ppo_micro_batch_size //= world // ulysses (the same for the log-prob keys)
    spec = imported("verl", script(tmp_path, "actor_rollout_ref.actor.ppo_micro_batch_size=64",
                                   "actor_rollout_ref.rollout.log_prob_micro_batch_size=32",
                                   "actor_rollout_ref.ref.log_prob_micro_batch_size=32"), gpu="H100-80GB")
    assert (spec.batch.micro_batch_size, spec.batch.logprob_micro_batch_size) == (8, 4)
    sp = imported("verl", script(tmp_path, "actor_rollout_ref.actor.ppo_micro_batch_size=64",
                                 "actor_rollout_ref.actor.ulysses_sequence_parallel_size=2",
                                 "actor_rollout_ref.rollout.log_prob_micro_batch_size=32"), gpu="H100-80GB")
    assert (sp.batch.micro_batch_size, sp.batch.logprob_micro_batch_size) == (16, 8)  # 4 data-parallel ranks


@pytest.mark.parametrize(("overrides", "field"), [
    (("actor_rollout_ref.actor.ppo_micro_batch_size=64", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8",
      "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4"), "actor_rollout_ref.actor.ppo_micro_batch_size"),
    (("actor_rollout_ref.actor.ppo_micro_batch_size=4", "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4"),
     "actor_rollout_ref.actor.ppo_micro_batch_size"),
])
def test_both_micro_keys_or_too_few_rows_are_refused(tmp_path: Path, overrides: tuple[str, ...], field: str) -> None:
    with pytest.raises(InputError) as err:
        imported("verl", script(tmp_path, *overrides), gpu="H100-80GB")
    assert err.value.field == field


def test_the_reference_of_full_fine_tuning_lives_on_the_cpu(tmp_path: Path) -> None:
    full = imported("verl", script(tmp_path, PER_GPU), gpu="H100-80GB")
    assert full.distribution.offload_reference_params
    plan = plan_of(full.model_dump(mode="json"))
    assert component(plan, "logprob", "reference.weights") == 0
    host = {c.name for p in plan.host.phases for c in p.components}
    assert "offload.reference.params_pinned" in host
    lora = imported("verl", script(tmp_path, PER_GPU, LORA), gpu="H100-80GB")
    assert not lora.distribution.offload_reference_params  # the actor with its adapters off


def test_a_stated_vllm_release_places_cuda_graphs(tmp_path: Path) -> None:
    newest = plan_of(imported("verl", script(tmp_path, PER_GPU), gpu="H100-80GB").model_dump(mode="json"))
    old_spec = imported("verl", script(tmp_path, PER_GPU, head="# oomless: vllm==0.8.3\n"), gpu="H100-80GB")
    assert (old_spec.rollout.vllm_version, old_spec.rollout.cuda_graphs_in_budget) == ("0.8.3", False)
    old = plan_of(old_spec.model_dump(mode="json"))
    # vLLM < 0.21 captures graphs after sizing the KV cache (the cache gets their bytes); its
    # release also picks the sampler the start-up profile runs (memory/vllm_sampler.py)
    for plan, graphs_inside in ((old, False), (newest, True)):
        b = plan.engine
        assert b.cuda_graph_bytes > 0
        assert b.kv_cache_bytes == (b.requested_bytes - b.weight_bytes - b.activation_bytes - b.non_torch_bytes
                                    - (b.cuda_graph_bytes if graphs_inside else 0))
    assert old.engine.activation_bytes != newest.engine.activation_bytes


def test_a_colocated_engine_may_span_whole_nodes(tmp_path: Path) -> None:
    spec = imported("verl", script(tmp_path, PER_GPU, "actor_rollout_ref.rollout.tensor_model_parallel_size=16",
                                   nodes=4, model="Qwen/Qwen2-72B-Instruct"), gpu="H800")
    assert spec.rollout.tensor_parallel_size == 16
    one_node = plan_of(merged(spec.model_dump(mode="json"), **{"rollout.tensor_parallel_size": 8}))
    two_nodes = plan_of(spec.model_dump(mode="json"))
    assert component(two_nodes, "rollout", "vllm.weights") < component(one_node, "rollout", "vllm.weights")
    for tp, nodes in ((12, 4), (16, 1), (16, 3)):
        with pytest.raises(InputError, match="tensor_parallel_size"):
            parse_spec(merged(spec.model_dump(mode="json"), **{"rollout.tensor_parallel_size": tp,
                                                             "hardware.num_nodes": nodes}))


def test_fsdp_steps_on_its_own_fp32_gradients() -> None:
    # torch AdamW on FSDP's flat parameter: `.grad` is already fp32 under mixed precision
    fsdp = plan_of(merged(BASE_SPEC, **{"distribution.strategy": "fsdp"}))
    assert component(fsdp, "optimizer", "optimizer.fp32_grads") == 0
    assert component(fsdp, "optimizer", "policy.grads") > 0
    zero2 = plan_of(merged(BASE_SPEC, **{"distribution.strategy": "zero2"}))
    assert component(zero2, "optimizer", "optimizer.fp32_grads") > 0  # DeepSpeed's fp32 partition


def test_fit_writes_the_global_micro_keys_a_file_uses(tmp_path: Path) -> None:
    """A script in the older global keys gets its fix in them (× the data-parallel ranks), never
    beside a `_per_gpu` key verl would refuse with it (verl/utils/config.py check_mutually_exclusive)."""
    from tests.adapters.native_helpers import fit_write

    source = script(tmp_path, "actor_rollout_ref.actor.ppo_micro_batch_size=256",
                    "actor_rollout_ref.rollout.log_prob_micro_batch_size=256", "data.max_response_length=8192",
                    "actor_rollout_ref.actor.ppo_mini_batch_size=64")
    assert imported("verl", source, gpu="A100-40GB").batch.micro_batch_size == 32
    out = tmp_path / "out"
    result = fit_write("verl", source, out, "--gpu", "A100-40GB")
    assert result.exit_code == 0, result.output
    written = (out / "run.sh").read_text()
    # each section keeps the form the file uses; the new global value is fit's per-GPU answer × 8 ranks
    assert "ppo_micro_batch_size_per_gpu" not in written and "rollout.log_prob_micro_batch_size_per_gpu" not in written
    total = int(re.search(r"actor\.ppo_micro_batch_size=(\d+)", written).group(1))
    again = imported("verl", out / "run.sh", gpu="A100-40GB")
    assert total != 256 and again.batch.micro_batch_size == total // 8 < 32


def test_a_repeated_override_is_changed_everywhere() -> None:
    """verl's tuning scripts set `enable_gradient_checkpointing=True` twice; Hydra applies both,
    so changing only the first would be undone by the second."""
    from oomless.adapters.patch.shell_text import patch_shell

    key = "actor_rollout_ref.model.enable_gradient_checkpointing"
    text = f"python3 -m verl.trainer.main_ppo \\\n    {key}=True \\\n    trainer.nnodes=1 \\\n    {key}=True\n"
    out = patch_shell(text, {key: False}, "hydra", "run.sh", [key, "trainer.nnodes"])
    assert out.count(f"{key}=False") == 2 and f"{key}=True" not in out
    removed = patch_shell(text, {key: None}, "hydra", "run.sh", [key, "trainer.nnodes"])
    assert key not in removed and "trainer.nnodes=1" in removed


@pytest.mark.parametrize(("overrides", "mode"), [
    ((), "bf16_flash_ce"),  # verl 0.9.1 defaults: use_remove_padding true, entropy_coeff 0
    (("actor_rollout_ref.actor.entropy_coeff=0.001",), "bf16_flash_ce_entropy"),
    (("actor_rollout_ref.actor.calculate_entropy=True",), "bf16_flash_ce_entropy"),
    (("actor_rollout_ref.model.use_remove_padding=False",), "full_bf16"),
])
def test_the_logits_follow_verls_loss_path(tmp_path: Path, overrides: tuple[str, ...], mode: str) -> None:
    assert imported("verl", script(tmp_path, PER_GPU, *overrides), gpu="H100-80GB").logits.value == mode


def test_verl_logits_by_hand() -> None:
    """One packed row of 1,000 tokens of Qwen2.5-7B (V 152,064, h 3,584, untied head), full
    fine-tuning: E_s = 152,064,000 logits of 2 bytes."""
    from oomless.catalog.resolve import load_catalog_model
    from oomless.memory import logits as L
    from oomless.spec.run import LogitsMode

    arch = load_catalog_model("Qwen/Qwen2.5-7B-Instruct")
    es, lm_input = 152_064_000, 2 * 3_584 * 1_000
    # the gradient over the logits plus its temperature-scaled copy
    assert L.training_logits_bytes(arch, LogitsMode.bf16_flash_ce, 1, 999, 1, 1_000) == lm_input + 2 * 2 * es
    # with entropy: the logits, the cross-entropy's own gradient and the entropy's
    assert L.training_logits_bytes(arch, LogitsMode.bf16_flash_ce_entropy, 1, 999, 1, 1_000) == lm_input + 3 * 2 * es
    # no grad: the logits divided in place (verl 0.4-0.8, EasyR1)
    assert L.logprob_logits_bytes(arch, LogitsMode.bf16_flash_ce, 1, 999, 1, 1_000) == 2 * es
    # every position counts, not only the completion TRL's moment keeps
    assert L.logprob_logits_bytes(arch, LogitsMode.bf16_flash_ce, 2, 100, 1, 1_000) == 2 * 2 * 1_000 * 152_064


def test_lora_sync_is_unmerged_and_layered_when_asked(tmp_path: Path) -> None:
    """verl sends LoRA adapters to vLLM unmerged; `layered_summon` gathers one FSDP unit at a time
    (utils/fsdp_utils.py `collect_lora_params`, `layered_summon_lora_params`)."""
    from oomless.adapters.trl import writer as trl_writer

    whole = imported("verl", script(tmp_path, PER_GPU, LORA), gpu="H100-80GB")
    layered = imported("verl", script(tmp_path, PER_GPU, LORA, "actor_rollout_ref.rollout.layered_summon=True"),
                       gpu="H100-80GB")
    assert (whole.rollout.lora_sync.value, layered.rollout.lora_sync.value) == ("adapter", "adapter_layers")
    assert imported("verl", script(tmp_path, PER_GPU), gpu="H100-80GB").rollout.lora_sync.value == "merge"  # full
    plans = [plan_of(s.model_dump(mode="json")) for s in (whole, layered)]
    assert all(component(p, "weight_sync", "sync.lora_merge_delta") == 0 for p in plans)
    merging = plan_of(merged(whole.model_dump(mode="json"), **{"rollout.lora_sync": "merge"}))
    assert component(merging, "weight_sync", "sync.lora_merge_delta") > 0
    # Qwen2.5-7B's largest unit is its embedding (152,064 × 3,584, bf16 base), 7/8 of it beyond
    # the shard on 8 GPUs; the whole model otherwise
    embedding = 152_064 * 3_584 * 2
    assert component(plans[1], "weight_sync", "sync.gathered_params") == embedding - embedding // 8
    assert component(plans[0], "weight_sync", "sync.gathered_params") > 10 * embedding
    with pytest.raises(InputError, match="rollout.lora_sync"):
        trl_writer.native_settings(whole)


def test_a_file_mixing_both_forms_keeps_each(tmp_path: Path) -> None:
    from tests.adapters.native_helpers import fit_write

    source = script(tmp_path, "actor_rollout_ref.actor.ppo_micro_batch_size=256",
                    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=32", "data.max_response_length=8192",
                    "actor_rollout_ref.actor.ppo_mini_batch_size=64")
    result = fit_write("verl", source, tmp_path / "out", "--gpu", "A100-40GB")
    assert result.exit_code == 0, result.output
    written = (tmp_path / "out" / "run.sh").read_text()
    assert "actor.ppo_micro_batch_size_per_gpu" not in written and "rollout.log_prob_micro_batch_size=" not in written
    imported("verl", tmp_path / "out" / "run.sh", gpu="A100-40GB")  # verl's one-form-per-section rule holds


def test_a_stated_vllm_release_is_written_back(tmp_path: Path) -> None:
    from tests.adapters.native_helpers import round_trip

    spec = imported("verl", script(tmp_path, PER_GPU, head="# oomless: vllm==0.8.3\n"), gpu="H100-80GB")
    again = round_trip("verl", spec, tmp_path / "out", gpu="H100-80GB")
    assert [(s.rollout.vllm_version, s.rollout.cuda_graphs_in_budget) for s in again] == [("0.8.3", False)] * len(again)


@pytest.mark.parametrize(("overrides", "packed", "length_sorted"), [
    ((), True, True),  # verl 0.9.1's defaults: use_remove_padding and balance_batch on
    (("actor_rollout_ref.model.use_remove_padding=False",), False, True),
    (("actor_rollout_ref.model.use_remove_padding=True", "trainer.balance_batch=False"), True, False),
    (("trainer.balance_batch=null",), True, False),  # falsy to verl's `if self.config.trainer.balance_batch:`
    (("actor_rollout_ref.model.use_remove_padding=False", "actor_rollout_ref.actor.use_dynamic_bsz=True",
      "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=16384"), False, True),  # padded parts under a budget
])
def test_remove_padding_packs_rows_and_balance_batch_sorts_them(tmp_path: Path, overrides: tuple[str, ...], packed: bool,
                                                               length_sorted: bool) -> None:
    """dp_actor.py `unpad_input` packs a micro-batch's rows; ray_trainer.py `_balance_batch` (>= 0.6.1)
    sorts each rank's share by workload, the longest in the middle micro-batch."""
    spec = imported("verl", script(tmp_path, PER_GPU, *overrides), gpu="H100-80GB")
    assert spec.batch.padding_free is packed
    assert spec.batch.length_sorted_micro_batches is length_sorted


@pytest.mark.parametrize(("overrides", "mode"), [
    # verl 0.9.1 workers/engine/fsdp/transformer_impl.py: with remove-padding only the entropy is
    # chunked; the log-probs stay flash-attn's over every packed token
    (("actor_rollout_ref.actor.entropy_from_logits_with_chunking=True", "actor_rollout_ref.actor.entropy_coeff=0.001"),
     "bf16_flash_ce_entropy"),
    (("actor_rollout_ref.actor.entropy_from_logits_with_chunking=True", "actor_rollout_ref.actor.entropy_coeff=0"),
     "bf16_flash_ce"),
    # the padded branch calls entropy_from_logits unchunked: the flag does nothing there
    (("actor_rollout_ref.actor.entropy_from_logits_with_chunking=True", "actor_rollout_ref.model.use_remove_padding=False"),
     None),
])
def test_entropy_chunking_is_read_by_the_rows_it_runs_on(tmp_path: Path, overrides: tuple[str, ...], mode: str | None) -> None:
    result = import_native("verl", script(tmp_path, PER_GPU, *overrides), HardwareFlags(gpu="H100-80GB"))
    assert result.spec.get("logits") == mode
    notes = " ".join(result.notes)
    assert ("chunks the entropy alone" in notes) == (mode is not None)
    assert ("has no effect without use_remove_padding" in notes) == (mode is None)
