"""Strategies and the harness of the round-trip properties (test_round_trip_properties.py,
test_export_unexpressed_properties.py): specs each of verl, EasyR1, VLM-R1, OpenRLHF and
Open-Reasoner-Zero can express, drawn from the values its writer's `common.require` allows
(adapters/<fw>/writer.py), and the spec → files → reader → spec check.

Each property runs `CI` examples; OOMLESS_FUZZ_EXAMPLES=N runs N, randomised (tests/fuzz/strategies.py).
"""

from __future__ import annotations

import copy
import importlib
import math
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import assume
from hypothesis import strategies as st

from oomless.adapters import HardwareFlags, common, import_native
from oomless.adapters.round_trip import all_differences
from oomless.errors import InputError
from oomless.spec.load import parse_spec
from oomless.spec.run import RunSpec
from tests.fuzz.strategies import fuzz_settings

CI = 20
"""Examples per property in CI (each example writes and reads its files: ~0.1-0.3 s)."""

SETTINGS = fuzz_settings(CI)
READABLE = (".yaml", ".sh", ".py")


# --- the harness -----------------------------------------------------------------------------

def writer(framework: str) -> Any:
    return importlib.import_module(f"oomless.adapters.{framework}.writer")


def spec_from(base: dict[str, Any], **sections: Any) -> RunSpec:
    """``base`` with each section updated (a dict merges into the section, anything else replaces it)."""
    data = copy.deepcopy(base)
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key].update(value)
        else:
            data[key] = value
    try:
        return parse_spec(data)
    except InputError:  # a cross-field rule of the spec the strategy did not foresee
        assume(False)
        raise


NODES_FROM_THE_COMMAND_LINE = ("orz",)
"""ORZ's experiment file counts GPUs, not nodes: `--nodes` says how they are spread (as `fit --export` passes it)."""


def read_back(framework: str, spec: RunSpec, files: dict[str, str]) -> dict[str, RunSpec]:
    """Each launch/config file the writer wrote, read by the framework's reader."""
    nodes = spec.hardware.num_nodes if framework in NODES_FROM_THE_COMMAND_LINE else None
    flags = HardwareFlags(gpu=spec.hardware.gpu, host_ram_gib=spec.hardware.host_ram_gib, num_nodes=nodes)
    with tempfile.TemporaryDirectory() as folder:
        for name, text in files.items():
            (Path(folder) / name).write_text(text, encoding="utf-8")
        return {name: parse_spec(import_native(framework, Path(folder) / name, flags).spec)
                for name in files if name.endswith(READABLE)}


def assert_round_trip(framework: str, spec: RunSpec) -> dict[str, str]:
    files = writer(framework).render_files(spec)
    wanted = spec.model_dump(mode="json")
    again = read_back(framework, spec, files)
    assert again
    for name, got in again.items():
        differences = all_differences(wanted, got.model_dump(mode="json"))
        assert differences == [], f"{framework} {name}: " + "; ".join(
            f"{d}: wrote {_at(wanted, d)!r}, read {_at(got.model_dump(mode='json'), d)!r}" for d in differences)
    return files


def _at(tree: dict[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        tree = tree.get(part) if isinstance(tree, dict) else None
    return tree


def _divisors(number: int, low: int = 2, high: int = 16) -> list[int]:
    return [d for d in range(low, high + 1) if number % d == 0]


@st.composite
def rounds(draw: st.DrawFn, data_parallel: int) -> dict[str, int]:
    """micro-batch, gradient accumulation and steps_per_generation whose round and optimizer
    step are whole numbers of prompts of ``num_generations`` (adapters/schedule.py); now and
    then a round shorter than an optimizer step, which verl and EasyR1 cannot say."""
    micro, accumulation = draw(st.integers(1, 6)), draw(st.integers(1, 4))
    per_round = draw(st.one_of(st.integers(1, 3).map(lambda k: k * accumulation), st.integers(1, 8)))
    if math.gcd(micro * accumulation * data_parallel, micro * per_round * data_parallel) < 2:
        micro *= 2
    n = draw(st.sampled_from(_divisors(math.gcd(micro * accumulation * data_parallel, micro * per_round * data_parallel))))
    return {"micro_batch_size": micro, "gradient_accumulation_steps": accumulation,
            "steps_per_generation": per_round, "num_generations": n,
            "logprob_micro_batch_size": draw(st.sampled_from([1, 4, 16]))}


def steps_per_round(batch: dict[str, int]) -> int:
    return max(batch["steps_per_generation"] // batch["gradient_accumulation_steps"], 1)


@st.composite
def schedules(draw: st.DrawFn, steps_per_round: int) -> dict[str, Any]:
    """max_steps / save_steps, mostly whole rounds (verl and EasyR1 count rounds)."""
    max_rounds, save_rounds = draw(st.sampled_from([None, 1, 7])), draw(st.sampled_from([None, 1, 5]))
    out = {"max_steps": max_rounds and max_rounds * steps_per_round, "save_steps": save_rounds and save_rounds * steps_per_round}
    if draw(st.integers(0, 4)) == 0:
        out["max_steps"] = draw(st.integers(1, 50))
    return out


def unsayable_rounds(spec: RunSpec) -> set[str]:
    """The round fields verl and EasyR1 cannot write: a round shorter than an optimizer step, a
    run length or save frequency that is not whole rounds (adapters/schedule.native_round)."""
    b, sch = spec.batch, spec.schedule
    out = {"batch.steps_per_generation"} if spec.steps_per_generation < b.gradient_accumulation_steps else set()
    per_round = max(spec.steps_per_generation // b.gradient_accumulation_steps, 1)
    return out | {f"schedule.{name}" for name in ("max_steps", "save_steps")
                  if getattr(sch, name) is not None and getattr(sch, name) % per_round}


def assert_round_trip_or_named(framework: str, spec: RunSpec, unsayable: set[str]) -> dict[str, str] | None:
    """The round trip, or — when ``unsayable`` — the writer naming each of those fields."""
    if not unsayable:
        return assert_round_trip(framework, spec)
    with common.collect_unexpressed() as found:
        writer(framework).render_files(spec)
    assert unsayable <= {field for field, _ in found}, found
    return None


def lengths() -> st.SearchStrategy[dict[str, int]]:
    return st.fixed_dictionaries({"max_prompt_tokens": st.sampled_from([256, 1024, 3000]),
                                  "max_completion_tokens": st.sampled_from([128, 1024, 4096])})


def loras(methods: tuple[str, ...] = ("full", "lora"), dropouts: tuple[float, ...] = (0.0,)) -> st.SearchStrategy[dict[str, Any]]:
    """Full fine-tuning (the LoRA fields left at their defaults: they mean nothing then) or LoRA."""
    adapters = st.fixed_dictionaries({"method": st.sampled_from([m for m in methods if m != "full"] or ["lora"]),
                                      "lora_rank": st.sampled_from([8, 64]), "lora_alpha": st.sampled_from([16.0, 32.0]),
                                      "lora_dropout": st.sampled_from(dropouts),
                                      "lora_targets": st.sampled_from(["all-linear", ["q_proj", "v_proj"]])})
    return st.one_of(st.just({"method": "full"}), adapters) if "full" in methods else adapters


def hardware(draw: st.DrawFn, gpu: str, per_node: tuple[int, ...] = (1, 2, 4, 8)) -> dict[str, Any]:
    return {"gpu": gpu, "gpus_per_node": draw(st.sampled_from(per_node)), "num_nodes": draw(st.sampled_from([1, 2]))}


# --- verl ------------------------------------------------------------------------------------

@st.composite
def verl_specs(draw: st.DrawFn) -> RunSpec:
    hw = hardware(draw, "H100-80GB")
    world = hw["gpus_per_node"] * hw["num_nodes"]
    ulysses = draw(st.sampled_from([1, 2])) if world % 2 == 0 else 1
    batch, lens = draw(rounds(world // ulysses)), {**draw(lengths()), "max_prompt_counts_images": True}  # verl's bound
    if draw(st.booleans()):  # use_dynamic_bsz: micro-batches are what the token budget holds at the limits
        sequence = lens["max_prompt_tokens"] + lens["max_completion_tokens"]
        batch.update(max_tokens_per_gpu=batch["micro_batch_size"] * sequence,
                     logprob_max_tokens_per_gpu=batch["logprob_micro_batch_size"] * sequence)
    ft = draw(loras())
    sleep = draw(st.sampled_from([0, 1 if ft["method"] == "lora" else 2]))
    offload = draw(st.booleans())
    algorithm = draw(st.sampled_from(["grpo", "rloo", "ppo"]))
    # verl's torch AdamW: foreach unless override_optimizer_config says fused / foreach=False (the
    # reader states None for foreach, and for any step on the CPU: FSDP2 offload_policy)
    steps = [None] if offload else [None, "fused", "for_loop"]
    kl = draw(st.sampled_from([0.0, 0.001, 0.04]))
    # full_bf16 is verl without remove-padding, which Ulysses needs; remove-padding packs the rows
    # no chunked: verl 0.9.1 chunks the entropy alone (entropy_from_logits_with_chunking), never the log-probs
    logits = draw(st.sampled_from(["fused_token_chunks", "bf16_flash_ce", "bf16_flash_ce_entropy"]
                                  + (["full_bf16"] if ulysses == 1 else [])))
    # use_remove_padding: needed by flash-attn's cross-entropy and by Ulysses, free for the chunked and fused heads
    packed = logits in ("bf16_flash_ce", "bf16_flash_ce_entropy") or ulysses > 1 or (logits == "fused_token_chunks" and draw(st.booleans()))
    batch.update(padding_free=packed, length_sorted_micro_batches=draw(st.booleans()))  # balance_batch
    return spec_from(
        {}, model="Qwen/Qwen2.5-7B-Instruct", hardware=hw, algorithm=algorithm, finetune=ft, batch=batch,
        optimizer_implementation=draw(st.sampled_from(steps)),
        precision=draw(st.sampled_from(["bf16_mixed", "bf16"])), attention=draw(st.sampled_from(["flash_attention_2", "sdpa"])),
        gradient_checkpointing=draw(st.booleans()), lengths=lens, kl_beta=kl, logits=logits,
        # verl 0.9.1 at its default rollout temperature 1 leaves the logits unscaled (the reader)
        logits_temperature="none" if logits.startswith("bf16_flash_ce") else "in_place",
        distribution={"strategy": "fsdp", "offload_params": offload, "offload_optimizer": offload,
                      "sequence_parallel_size": ulysses,
                      "offload_reference_params": ft["method"] == "full" and kl > 0},  # verl offloads its reference
        rollout={"engine": "vllm_colocate", "engine_in_trainer_process": False, "sleep_level": sleep,
                 "tensor_parallel_size": draw(st.sampled_from([t for t in (1, 2, 4) if hw["gpus_per_node"] % t == 0])),
                 "gpu_memory_utilization": draw(st.sampled_from([0.4, 0.6])), "enforce_eager": draw(st.booleans()),
                 "max_num_seqs": draw(st.sampled_from([256, 1024])), "max_num_batched_tokens": draw(st.sampled_from([8192, 16384])),
                 "offload_model": sleep > 0 and draw(st.booleans()), "offload_optimizer": sleep > 0 and draw(st.booleans()),
                 # verl sends LoRA adapters unmerged (layered_summon or the whole model summoned)
                 "lora_sync": draw(st.sampled_from(["adapter", "adapter_layers"])) if ft["method"] == "lora" else "merge"},
        ray={"enabled": True}, critic={"model": "Qwen/Qwen2.5-1.5B-Instruct" if algorithm == "ppo" else None},
        schedule=draw(schedules(steps_per_round(batch))))


# --- EasyR1 ----------------------------------------------------------------------------------

@st.composite
def easyr1_specs(draw: st.DrawFn) -> RunSpec:
    hw = hardware(draw, "A100-80GB")
    batch = draw(rounds(hw["gpus_per_node"] * hw["num_nodes"]))
    strategy = draw(st.sampled_from(["fsdp", "zero2"]))
    offload = strategy == "fsdp" and draw(st.booleans())  # the spec offloads parameters under FSDP or ZeRO-3 only
    algorithm = draw(st.sampled_from(["grpo", "rloo", "ppo"]))
    schedule = draw(schedules(steps_per_round(batch)))
    schedule["save_only_model"] = schedule["save_steps"] is not None and draw(st.booleans())
    # EasyR1's AdamW is fused (optim.strategy adamw) or a per-parameter loop (adamw_bf16), as the
    # reader states them: None where the unset field plans the same (fused under ZeRO-2, offloaded steps)
    steps = [None] if offload else ["fused", "for_loop"] if strategy == "fsdp" else [None, "for_loop"]
    ft = draw(loras())
    sync = "adapter_layers" if ft["method"] == "lora" else "merge"  # EasyR1 sends LoRA adapters unmerged, per layer
    logits = draw(st.sampled_from(["full_bf16", "bf16_flash_ce"]))  # EasyR1 padding_free false / true
    batch["padding_free"] = logits == "bf16_flash_ce"
    limits = {**draw(lengths()), "max_prompt_counts_images": True}  # EasyR1's bound holds the image tokens
    if draw(st.booleans()):  # dynamic_batching: budgets of micro-batch size x padded row (the reader)
        padded = limits["max_prompt_tokens"] + limits["max_completion_tokens"]
        batch["max_tokens_per_gpu"] = batch["micro_batch_size"] * padded
        batch["logprob_micro_batch_size"] = batch.get("logprob_micro_batch_size") or batch["micro_batch_size"]
        batch["logprob_max_tokens_per_gpu"] = batch["logprob_micro_batch_size"] * padded
    return spec_from(
        {}, model="Qwen/Qwen2.5-VL-7B-Instruct", hardware=hw, algorithm=algorithm, finetune=ft, batch=batch,
        optimizer_implementation=draw(st.sampled_from(steps)),
        precision=draw(st.sampled_from(["bf16_mixed", "bf16"])), attention="flash_attention_2",
        gradient_checkpointing=draw(st.booleans()), kl_beta=draw(st.sampled_from([0.0, 0.01, 0.04])),
        logits=logits, lengths=limits,
        distribution={"strategy": strategy, "offload_params": offload,
                      "offload_optimizer": offload, "rank0_init": draw(st.booleans())},
        rollout={"engine": "vllm_colocate", "engine_in_trainer_process": True, "sleep_level": 1, "lora_sync": sync,
                 "samples_per_request": batch["num_generations"],
                 "tensor_parallel_size": draw(st.sampled_from([t for t in (1, 2, 4) if hw["gpus_per_node"] % t == 0])),
                 "gpu_memory_utilization": draw(st.sampled_from([0.5, 0.6])), "enforce_eager": draw(st.booleans()),
                 "max_num_batched_tokens": draw(st.sampled_from([8192, 16384])),
                 "max_model_len": draw(st.sampled_from([None, 8192])),
                 "limit_images_per_prompt": draw(st.sampled_from([None, 1, 4])),
                 "offload_model": draw(st.booleans()), "offload_optimizer": draw(st.booleans())},
        vision={"max_pixels": draw(st.sampled_from([1003520, 4194304])), "min_pixels": draw(st.sampled_from([3136, 262144])),
                "freeze_tower": draw(st.booleans())},
        ray={"enabled": True}, critic={"model": "Qwen/Qwen2.5-VL-3B-Instruct" if algorithm == "ppo" else None},
        schedule=schedule)


# --- VLM-R1 ----------------------------------------------------------------------------------

@st.composite
def vlmr1_specs(draw: st.DrawFn) -> RunSpec:
    n = draw(st.sampled_from([2, 4, 8]))
    accumulation = draw(st.integers(1, 4))
    strategy = draw(st.sampled_from(["ddp", "zero1", "zero2", "zero3"]))
    dist: dict[str, Any] = {"strategy": strategy, "offload_optimizer": strategy != "ddp" and draw(st.booleans()),
                            "offload_params": strategy == "zero3" and draw(st.booleans())}
    if strategy != "ddp":
        dist.update(overlap_comm=draw(st.booleans()), reduce_bucket_size=draw(st.sampled_from(["auto", 200_000_000])))
    if strategy == "zero3":
        dist.update(stage3_prefetch_bucket_size=draw(st.sampled_from(["auto", 50_000_000])),
                    stage3_param_persistence_threshold=draw(st.sampled_from(["auto", 100_000])))
    vision: dict[str, Any] = {"max_pixels": draw(st.sampled_from([401408, 12845056])), "freeze_tower": draw(st.booleans()),
                              "min_pixels": draw(st.sampled_from([None, 3136]))}
    return spec_from(
        {}, model="Qwen/Qwen2.5-VL-3B-Instruct", hardware=hardware(draw, "A100-80GB", (1, 2, 4, 6, 8)),
        finetune=draw(loras(dropouts=(0.0, 0.05))), distribution=dist, vision=vision,
        batch={"micro_batch_size": n * draw(st.integers(1, 3)), "num_generations": n, "gradient_accumulation_steps": accumulation,
               "steps_per_generation": 1 if accumulation > 1 else None},
        precision=draw(st.sampled_from(["bf16_mixed", "fp16_mixed"])),
        attention=draw(st.sampled_from(["flash_attention_2", "sdpa", "eager"])), gradient_checkpointing=draw(st.booleans()),
        lengths=draw(lengths()), kl_beta=draw(st.sampled_from([0.0, 0.04])), rollout={"engine": "hf"})


# --- OpenRLHF --------------------------------------------------------------------------------

def _pairs(draw: st.DrawFn, roles: list[str], sizes: tuple[int, ...] = (1, 2, 4)) -> list[dict[str, Any]]:
    """OpenRLHF's training groups in the order its reader lists them: actor with reference
    (`colocate_actor_ref`) or apart, then critic with reward (`colocate_critic_reward`) or apart."""
    groups = []
    for first, second in (("actor", "reference"), ("critic", "reward")):
        present = [r for r in (first, second) if r in roles]
        together = len(present) == 2 and draw(st.booleans())
        for members in ([present] if together else [[r] for r in present]):
            groups.append({"roles": members, "gpus_per_node": draw(st.sampled_from(sizes))})
    return groups


@st.composite
def openrlhf_specs(draw: st.DrawFn) -> RunSpec:
    algorithm, kl = draw(st.sampled_from(["grpo", "rloo", "ppo"])), draw(st.sampled_from([0.0, 0.001]))
    reward = draw(st.sampled_from([None, "Qwen/Qwen2.5-0.5B-Instruct"]))
    roles = ["actor"] + ["reference"] * (kl > 0) + ["critic"] * (algorithm == "ppo") + ["reward"] * (reward is not None)
    engine, nodes = draw(st.sampled_from(["vllm_colocate", "vllm_separate", "hf"])), draw(st.sampled_from([1, 2]))
    rollout: dict[str, Any] = {"engine": engine}
    if engine == "vllm_colocate":
        size = draw(st.sampled_from([2, 4, 8]))
        groups = [{"roles": [*roles, "vllm"], "gpus_per_node": size}]
        tp = draw(st.sampled_from([t for t in (1, 2, 4) if size * nodes % t == 0]))
        rollout["sleep_level"] = draw(st.sampled_from([0, 1]))
    else:
        groups = _pairs(draw, roles)
        if engine == "vllm_separate":
            size = draw(st.sampled_from([1, 2, 4]))
            tp = draw(st.sampled_from([t for t in (1, 2, 4) if size % t == 0]))
            groups.append({"roles": ["vllm"], "gpus_per_node": size})
            rollout["num_gpus"] = size
    if engine != "hf":
        rollout.update(tensor_parallel_size=tp, gpu_memory_utilization=draw(st.sampled_from([0.5, 0.8])),
                       enforce_eager=draw(st.booleans()), engine_in_trainer_process=False, engine_starts_first=True)
    lens = draw(lengths())
    micro, packed = draw(st.integers(1, 8)), draw(st.booleans())
    batch: dict[str, Any] = {"micro_batch_size": micro, "logprob_micro_batch_size": draw(st.sampled_from([1, 4, 16])),
                             "num_generations": draw(st.sampled_from([2, 4, 8])), "padding_free": packed}
    if draw(st.booleans()):  # dynamic batch: micro-batches are what the token budget holds at the limits
        sequence = lens["max_prompt_tokens"] + lens["max_completion_tokens"]
        batch["max_tokens_per_gpu"] = micro * sequence
        if draw(st.booleans()):
            batch["logprob_max_tokens_per_gpu"] = batch["logprob_micro_batch_size"] * sequence
    strategy = draw(st.sampled_from(["ddp", "zero1", "zero2", "zero3"]))
    return spec_from(
        {}, model="Qwen/Qwen2.5-1.5B-Instruct", hardware={"gpu": "A100-80GB", "num_nodes": nodes,
                                                          "gpus_per_node": sum(g["gpus_per_node"] for g in groups)},
        algorithm=algorithm, kl_beta=kl, reward_model={"model": reward},
        critic={"model": draw(st.sampled_from([None, "Qwen/Qwen2.5-0.5B-Instruct"])) if algorithm == "ppo" else None},
        placement={"groups": groups, "process_per_role": True, "offload_idle_models": draw(st.booleans())},
        rollout=rollout, batch=batch, lengths=lens, finetune=draw(loras(("full", "lora", "qlora"), (0.0, 0.05))),
        optimizer_implementation="fused" if strategy == "ddp" else None,  # DeepSpeed FusedAdam at ZeRO stage 0 too
        distribution={"strategy": strategy, "offload_optimizer": strategy != "ddp" and draw(st.booleans()),
                      "sequence_parallel_size": draw(st.sampled_from([1, 2]))},
        precision=draw(st.sampled_from(["bf16_mixed", "fp16_mixed"])), gradient_checkpointing=draw(st.booleans()),
        attention="flash_attention_2" if packed else draw(st.sampled_from(["flash_attention_2", "sdpa", "eager"])),
        vision={"freeze_tower": draw(st.booleans())}, ray={"enabled": True}, logits="fp32_all_positions")


# --- Open-Reasoner-Zero ----------------------------------------------------------------------

@st.composite
def orz_specs(draw: st.DrawFn) -> RunSpec:
    algorithm = draw(st.sampled_from(["grpo", "ppo"]))
    reward = draw(st.sampled_from([None, "Qwen/Qwen2.5-0.5B-Instruct"]))
    roles = ["actor", "reference"] + ["critic"] * (algorithm == "ppo") + ["reward"] * (reward is not None)
    colocate, nodes = draw(st.booleans()), draw(st.sampled_from([1, 2]))
    rollout: dict[str, Any] = {"engine": "vllm_colocate" if colocate else "vllm_separate", "sleep_level": int(colocate),
                               "engine_in_trainer_process": False, "engine_starts_first": True,
                               "gpu_memory_utilization": draw(st.sampled_from([0.3, 0.5])),
                               "max_num_batched_tokens": draw(st.sampled_from([2048, 8192])),
                               "enforce_eager": draw(st.booleans()), "max_model_len": draw(st.sampled_from([None, 16384]))}
    if colocate:  # ORZ colocate_all: every role and one TP-1 engine on each GPU
        groups = [{"roles": [*roles, "vllm"], "gpus_per_node": draw(st.sampled_from([1, 2, 4, 8]))}]
    else:
        groups = _pairs(draw, roles)
        size = draw(st.sampled_from([1, 2, 4]))
        groups.append({"roles": ["vllm"], "gpus_per_node": size})
        rollout.update(num_gpus=size, tensor_parallel_size=draw(st.sampled_from([t for t in (1, 2, 4) if size % t == 0])))
    strategy = draw(st.sampled_from(["ddp", "zero1", "zero2", "zero3"]))
    return spec_from(
        {}, model="Qwen/Qwen2.5-1.5B-Instruct", hardware={"gpu": "A100-80GB", "num_nodes": nodes,
                                                          "gpus_per_node": sum(g["gpus_per_node"] for g in groups)},
        algorithm=algorithm, reward_model={"model": reward},
        critic={"model": draw(st.sampled_from([None, "Qwen/Qwen2.5-0.5B-Instruct"])) if algorithm == "ppo" else None},
        placement={"groups": groups, "process_per_role": True, "offload_idle_models": colocate}, rollout=rollout,
        batch={"micro_batch_size": draw(st.integers(1, 8)), "logprob_micro_batch_size": draw(st.sampled_from([1, 4, 16])),
               "num_generations": draw(st.sampled_from([1, 2, 4, 8]))},
        lengths=draw(lengths()), kl_beta=draw(st.sampled_from([0.0, 0.01])),
        distribution={"strategy": strategy, "offload_optimizer": strategy != "ddp" and draw(st.booleans())},
        optimizer_implementation="fused" if strategy == "ddp" else None,  # DeepSpeed FusedAdam at ZeRO stage 0 too
        precision=draw(st.sampled_from(["bf16_mixed", "fp16_mixed"])), gradient_checkpointing=draw(st.booleans()),
        attention=draw(st.sampled_from(["flash_attention_2", "eager"])), ray={"enabled": True}, logits="bf16_all_positions")
